package cli_test

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/cli"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/inbox"
)

// leasehold send and leasehold event on the stack: a message is sent once
// under its --id, a send to no workflow is exit 3 with the reason, and an
// event prints as JSON (an unset one is exit 3); status counts the inbox.
func TestSendAndEventCommands(t *testing.T) {
	t.Parallel()
	e := setupRun(t)
	env := map[string]string{cli.EnvTable: e.table, cli.EnvWorkQueueURL: e.queues.Work}
	getenv := func(k string) string {
		if v, ok := env[k]; ok {
			return v
		}
		return os.Getenv(k)
	}
	const id = "wf-cli"
	if _, err := e.store.Create(t.Context(), lease.NewTask{ID: id, Kind: "k", Payload: []byte(`1`), MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := cli.Main(t.Context(), args, cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errOut, Getenv: getenv})
		return code, out.String(), errOut.String()
	}
	for range 2 {
		if code, out, errOut := run("send", "--id", "m1", id, "orders", `{"n":1}`); code != 0 || out != "message 1 on orders sent to wf-cli\n" {
			t.Fatalf("send --id m1: exit %d, %q, %q; want message 1, once", code, out, errOut)
		}
	}
	if code, out, _ := run("send", id, "orders", `{"n":2}`); code != 0 || !strings.HasPrefix(out, "message 2 ") {
		t.Fatalf("send: exit %d, %q; want message 2", code, out)
	}
	// status counts the inbox: both messages wait (nothing received them).
	if code, out, errOut := run("status", id); code != 0 || !regexp.MustCompile(`(?m)^inbox:\n  orders  0 delivered  2 waiting$`).MatchString(out) {
		t.Fatalf("status: exit %d, %q, %q; want the inbox's counts", code, out, errOut)
	}
	if code, _, errOut := run("send", "nobody", "orders", `1`); code != cli.ExitNotFound || !strings.Contains(errOut, `no task with id "nobody"`) {
		t.Fatalf("send to no workflow: exit %d, %q; want exit 3 naming it", code, errOut)
	}
	if code, _, errOut := run("send", id, "orders", `{`); code != cli.ExitUsage {
		t.Fatalf("send of bad JSON: exit %d, %q; want %d", code, errOut, cli.ExitUsage)
	}
	if err := e.store.SetEvent(t.Context(), inbox.Event{Task: id, Key: "progress", Value: []byte(`{"done":3}`)}); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := run("event", id, "progress"); code != 0 || out != "{\"done\":3}\n" {
		t.Fatalf("event: exit %d, %q, %q", code, out, errOut)
	}
	if code, _, errOut := run("event", id, "other"); code != cli.ExitNotFound || !strings.Contains(errOut, "not set") || strings.Contains(errOut, "task not found") {
		t.Fatalf("event not set: exit %d, %q; want exit 3 saying the event is not set (the task exists)", code, errOut)
	}
}
