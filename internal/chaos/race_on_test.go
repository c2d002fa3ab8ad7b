//go:build race

package chaos_test

// raceEnabled: the test binary runs under the race detector, so the worker
// binary is built with it too (LEASEHOLD_CHAOS_WORKER_RACE overrides).
const raceEnabled = true
