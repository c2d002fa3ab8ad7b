package cli

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/examples"
	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/workflow"
)

// TestReplayOnTheStack (issue 35, point 3): a worker leaves a workflow in
// flight on the stack (the example kind remind, asleep after its first
// step); `leasehold replay` reads its history from the table and replays
// it through the binary's handlers: ok for the code that recorded it,
// DIVERGED and exit 7 for a build that renamed its step; --out writes
// the history for a test of a build to replay instead; a kind the binary
// has no handler for is refused unless written out. The replays write
// nothing.
func TestReplayOnTheStack(t *testing.T) {
	t.Parallel()
	cfg := awstest.Config(t)
	table, queues := awstest.NewTable(t, cfg), awstest.NewQueues(t, cfg)
	env := map[string]string{EnvTable: table, EnvWorkQueueURL: queues.Work}
	getenv := func(k string) string { return env[k] }

	hs := leasehold.NewHandlers()
	examples.Register(hs)
	w, err := leasehold.NewWorker(leasehold.WorkerConfig{
		AWS: cfg, Table: table, QueueURL: queues.Work, Handlers: hs,
		Logger: slog.New(slog.DiscardHandler), LongPoll: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	c, err := leasehold.NewClient(leasehold.ClientConfig{AWS: cfg, Table: table, QueueURL: queues.Work})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { _ = w.Run(ctx) })
	info, err := c.Enqueue(t.Context(), leasehold.Submission{Kind: "remind", Payload: map[string]any{"name": "ada", "sleep_seconds": 3600}})
	if err != nil {
		stop()
		wg.Wait()
		t.Fatal(err)
	}
	// Wait for the sleep: PENDING with its two operations recorded.
	deadline := time.Now().Add(awstest.Scale(2 * time.Minute))
	var before leasehold.TaskInfo
	for {
		before, err = c.Get(t.Context(), info.ID)
		if err == nil && before.Status == leasehold.StatusPending && len(before.Steps) == 2 {
			break
		}
		if time.Now().After(deadline) {
			stop()
			wg.Wait()
			t.Fatalf("the remind task did not reach its sleep: %+v, %v", before, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	stop()
	wg.Wait()

	run := func(handlers *leasehold.Handlers, args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := Main(t.Context(), append([]string{"replay"}, args...), Streams{In: strings.NewReader(""), Out: &out, Err: &errOut, Getenv: getenv, Handlers: handlers})
		return code, out.String(), errOut.String()
	}
	code, out, errOut := run(nil, "--kind", "remind")
	if code != ExitOK || !strings.Contains(out, "ok       "+info.ID+" (remind): replayed 2 recorded operations; waits: sleep#1 until") {
		t.Fatalf("the recording build: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	changed := leasehold.NewHandlers()
	leasehold.Handle(changed, "remind", func(ctx context.Context, _ *leasehold.Task[struct{}]) (string, error) {
		if _, err := workflow.Step(ctx, "notes", func(context.Context) (string, error) {
			t.Error("the replay ran a step's function")
			return "", nil
		}); err != nil {
			return "", err
		}
		return "sent", nil
	})
	code, out, errOut = run(changed, "--kind", "remind")
	want := `DIVERGED ` + info.ID + ` (remind): diverged from its history at operation 1: recorded step string "note", the code asked for step string "notes"`
	if code != ExitDiverged || !strings.Contains(out, want) || !strings.Contains(errOut, "histories diverge from this build's handlers: 1 of 1") {
		t.Fatalf("a build with the step renamed: exit %d, stdout %q, stderr %q; want exit %d and %q", code, out, errOut, ExitDiverged, want)
	}
	// --out writes the history instead: the recording build replays the
	// file, the changed one diverges from it.
	dir := t.TempDir()
	if code, out, errOut := run(changed, "--kind", "remind", "--out", dir); code != ExitOK || out != "" || !strings.Contains(errOut, "kind remind: 1 history written to "+dir) {
		t.Fatalf("--out: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) != 1 {
		t.Fatalf("--out wrote %v (%v), want one file", files, err)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if line, err := hs.Replay(t.Context(), b); err != nil {
		t.Errorf("the file through the recording build: %q, %v", line, err)
	}
	if _, err := changed.Replay(t.Context(), b); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("the file through the changed build: %v, want %q", err, want)
	}

	if code, _, errOut := run(nil, "--kind", "invoice"); code != ExitUsage || !strings.Contains(errOut, "this binary has no handler for it") {
		t.Errorf("a kind without a handler: exit %d, stderr %q", code, errOut)
	}
	if code, _, errOut := run(nil, "--kind", "invoice", "--out", t.TempDir()); code != ExitOK || !strings.Contains(errOut, "kind invoice: 0 histories written") {
		t.Errorf("a kind without a handler, written out: exit %d, stderr %q", code, errOut)
	}
	after, err := c.Get(t.Context(), info.ID)
	if err != nil || !after.UpdatedAt.Equal(before.UpdatedAt) || after.Attempt != before.Attempt {
		t.Errorf("the replays changed the task: %+v (%v), was %+v", after, err, before)
	}
}
