//go:build race

package leasehold

// raceEnabled: the tests run under the race detector.
const raceEnabled = true
