package cli

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

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
