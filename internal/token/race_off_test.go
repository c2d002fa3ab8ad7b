//go:build !race

package token

// raceEnabled: the tests run under the race detector.
const raceEnabled = false
