package cli

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/smithy-go/logging"

	"github.com/leasehold/leasehold/internal/awstest"
)

// The progress bar is drawn on a terminal only; elsewhere stderr gets a
// plain summary. (The binary tests cover the non-terminal case end to end;
// a terminal is simulated here through Streams.)
func TestProgressBarOnlyOnATerminal(t *testing.T) {
	t.Parallel()
	cfg := awstest.Config(t)
	table, queues := awstest.NewTable(t, cfg), awstest.NewQueues(t, cfg)
	env := map[string]string{EnvTable: table, EnvWorkQueueURL: queues.Work}
	for _, terminal := range []bool{true, false} {
		var lines strings.Builder
		for i := range 30 {
			fmt.Fprintf(&lines, `{"kind":"greet","id":"%t-%02d","delay_seconds":3600}`+"\n", terminal, i)
		}
		var out, errOut bytes.Buffer
		code := Main(t.Context(), []string{"enqueue", "--file", "-"}, Streams{
			In: strings.NewReader(lines.String()), Out: &out, Err: &errOut,
			Getenv: func(k string) string { return env[k] }, ErrIsTerminal: terminal,
		})
		if code != ExitOK {
			t.Fatalf("terminal=%t: exit %d: %s", terminal, code, errOut.String())
		}
		drawn := strings.Contains(errOut.String(), "/30")
		if drawn != terminal || !strings.Contains(errOut.String(), "enqueued 30 of 30 tasks") {
			t.Fatalf("terminal=%t: stderr %q", terminal, errOut.String())
		}
	}
}

// result --wait says it is waiting, on a terminal only.
func TestResultWaitShowsWaitingOnATerminal(t *testing.T) {
	t.Parallel()
	cfg := awstest.Config(t)
	table, queues := awstest.NewTable(t, cfg), awstest.NewQueues(t, cfg)
	env := map[string]string{EnvTable: table, EnvWorkQueueURL: queues.Work}
	getenv := func(k string) string { return env[k] }
	var out, errOut bytes.Buffer
	if code := Main(t.Context(), []string{"enqueue", "--kind", "greet", "--id", "later", "--delay", "1h", "{}"}, Streams{
		In: strings.NewReader(""), Out: &out, Err: &errOut, Getenv: getenv,
	}); code != ExitOK {
		t.Fatalf("enqueue: exit %d: %s", code, errOut.String())
	}
	for _, terminal := range []bool{true, false} {
		var out, errOut bytes.Buffer
		// No --timeout: the test's context ends the wait.
		ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(time.Second))
		code := Main(ctx, []string{"result", "--wait", "later"}, Streams{
			In: strings.NewReader(""), Out: &out, Err: &errOut, Getenv: getenv, ErrIsTerminal: terminal,
		})
		cancel()
		if code == ExitOK {
			t.Fatalf("terminal=%t: a delayed task's result came back: %s", terminal, out.String())
		}
		shown := strings.Contains(errOut.String(), "waiting for task later to finish (no time limit; Ctrl-C stops)")
		if shown != terminal {
			t.Errorf("terminal=%t: stderr %q", terminal, errOut.String())
		}
	}
}

// The SDK's own log lines (WARN "failed to discard remaining HTTP response
// body" and the like) never reach the command's stderr.
func TestSDKLoggerIsOff(t *testing.T) {
	t.Parallel()
	a := newApp(Streams{Getenv: func(string) string { return "" }})
	a.callTimeout, a.region = time.Second, "us-east-1"
	cfg, err := a.loadAWSConfig(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cfg.Logger.(logging.Nop); !ok || cfg.ClientLogMode != 0 {
		t.Errorf("SDK logger %T, log mode %v; want logging.Nop and no client logging", cfg.Logger, cfg.ClientLogMode)
	}
}
