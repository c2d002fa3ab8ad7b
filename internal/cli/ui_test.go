package cli

import (
	"net"
	"strings"
	"testing"
)

func TestUIWarnsOfANonLoopbackAddress(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]string{
		"127.0.0.1:8080": "",
		"127.9.9.9:8080": "",
		"[::1]:8080":     "",
		"0.0.0.0:8080":   "Host check",
		"[::]:8080":      "Host check",
		"10.1.2.3:8080":  "not a loopback address",
	} {
		tcp, err := net.ResolveTCPAddr("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		got := exposure(tcp)
		if (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("%s: %q, want %q in it", addr, got, want)
		}
	}
}
