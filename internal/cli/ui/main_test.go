package ui_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The server's goroutines end with Serve; the only ones left are the HTTP
// clients' idle keep-alive connections.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
	)
}
