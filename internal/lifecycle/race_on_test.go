//go:build race

package lifecycle_test

// raceEnabled: the tests run under the race detector.
const raceEnabled = true
