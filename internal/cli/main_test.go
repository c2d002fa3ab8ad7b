package cli

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine a command starts is joined before it returns; the only
// ones left are the HTTP client's idle keep-alive connections.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
	)
}
