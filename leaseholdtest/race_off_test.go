//go:build !race

package leaseholdtest_test

// raceEnabled: the tests run under the race detector.
const raceEnabled = false
