package eventsource

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine (a poller, a timer, an HTTP
// connection a test forgot to close) is still running after the tests.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
