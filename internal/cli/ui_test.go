package cli

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/awstest"
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

// An address other than a loopback one is refused without
// --allow-non-loopback, before any AWS call, with an error that names the
// flag.
func TestUIRefusesANonLoopbackAddress(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"0.0.0.0:0", ":0"} {
		var out, errOut bytes.Buffer
		// Bounded: a command that served the address would run until then.
		ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(10*time.Second))
		code := Main(ctx, []string{"ui", "--addr", addr}, Streams{In: strings.NewReader(""), Out: &out, Err: &errOut, Getenv: func(string) string { return "" }})
		cancel()
		if code != ExitUsage || !strings.Contains(errOut.String(), "refused to listen on every interface") ||
			!strings.Contains(errOut.String(), "pass --allow-non-loopback") || out.Len() != 0 {
			t.Errorf("--addr %s: exit %d, stderr %q, stdout %q; want a usage error naming --allow-non-loopback", addr, code, errOut.String(), out.String())
		}
	}
}

// startURL is the stdout of `leasehold ui`: it hands on the URL it prints.
type startURL struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	found chan string
}

var printedURL = regexp.MustCompile(`open (http://\S+)`)

func (s *startURL) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf.Write(p)
	if m := printedURL.FindSubmatch(s.buf.Bytes()); m != nil && s.found != nil {
		s.found <- string(m[1])
		s.found = nil
	}
	return len(p), nil
}

// With --allow-non-loopback the inspector serves every interface, with a
// warning; a loopback address needs no flag and gets no warning. Either
// way the printed URL opens the session once.
func TestUIServesANonLoopbackAddressWhenAllowed(t *testing.T) {
	t.Parallel()
	cfg := awstest.Config(t)
	table, queues := awstest.NewTable(t, cfg), awstest.NewQueues(t, cfg)
	env := map[string]string{EnvTable: table, EnvWorkQueueURL: queues.Work}
	client := &http.Client{Timeout: awstest.Scale(30 * time.Second), CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	defer client.CloseIdleConnections()
	for _, c := range []struct {
		args []string
		warn string
	}{
		{[]string{"--addr", "0.0.0.0:0", "--allow-non-loopback"}, "leasehold ui: warning: listening on every interface ("},
		{[]string{"--addr", "localhost:0"}, ""},
	} {
		found := make(chan string, 1)
		out := &startURL{found: found}
		var errOut bytes.Buffer
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan int, 1)
		go func() {
			done <- Main(ctx, append([]string{"ui"}, c.args...), Streams{In: strings.NewReader(""), Out: out, Err: &errOut, Getenv: func(k string) string { return env[k] }})
		}()
		var u string
		select {
		case u = <-found:
		case code := <-done:
			cancel()
			t.Fatalf("%v: exit %d before it printed a URL: %s", c.args, code, errOut.String())
		case <-time.After(awstest.Scale(time.Minute)):
			cancel()
			<-done
			t.Fatalf("%v: no URL printed", c.args)
		}
		codes := make([]int, 2)
		for i := range codes {
			resp, err := client.Get(u)
			if err != nil {
				cancel()
				<-done
				t.Fatalf("%v: GET %s: %v", c.args, u, err)
			}
			resp.Body.Close()
			codes[i] = resp.StatusCode
		}
		cancel()
		if code := <-done; code != ExitOK {
			t.Errorf("%v: exit %d after Ctrl-C: %s", c.args, code, errOut.String())
		}
		if codes[0] != http.StatusSeeOther || codes[1] != http.StatusForbidden {
			t.Errorf("%v: the printed URL answered %v, want 303 then 403", c.args, codes)
		}
		if got := errOut.String(); (c.warn == "") != (got == "") || !strings.Contains(got, c.warn) {
			t.Errorf("%v: stderr %q, want %q", c.args, got, c.warn)
		}
	}
}
