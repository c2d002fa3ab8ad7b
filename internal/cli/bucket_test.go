package cli

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/settings"
	"github.com/leasehold/leasehold/workflow"
)

// TestResultThroughTheBucketOnTheStack (issue 36): a task whose 300 KB
// result is kept in the stack's payload bucket: `leasehold result` and
// `leasehold status` read it through the bucket LEASEHOLD_PAYLOAD_BUCKET
// names; without it, result says which variable is missing.
func TestResultThroughTheBucketOnTheStack(t *testing.T) {
	t.Parallel()
	cfg := awstest.Config(t)
	bucket := os.Getenv(settings.EnvPayloadBucket)
	if bucket == "" {
		if os.Getenv("LEASEHOLD_REQUIRE_STACK") == "1" {
			t.Fatal(settings.EnvPayloadBucket + " is unset: the stack has no payload bucket (scripts/stack.sh env prints it) [LEASEHOLD_REQUIRE_STACK=1]")
		}
		t.Skip(settings.EnvPayloadBucket + " is unset: no payload bucket to test against")
	}
	table, queues := awstest.NewTable(t, cfg), awstest.NewQueues(t, cfg)

	big := strings.Repeat("r", 300<<10)
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "big", func(context.Context, *leasehold.Task[int]) (string, error) { return big, nil })
	w, err := leasehold.NewWorker(leasehold.WorkerConfig{
		AWS: cfg, Table: table, QueueURL: queues.Work, Handlers: hs, PayloadBucket: bucket,
		Logger: slog.New(slog.DiscardHandler), LongPoll: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	c, err := leasehold.NewClient(leasehold.ClientConfig{AWS: cfg, Table: table, QueueURL: queues.Work, PayloadBucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { _ = w.Run(ctx) })
	info, err := c.Enqueue(t.Context(), leasehold.Submission{Kind: "big", Payload: 1})
	if err == nil {
		wctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(2*time.Minute))
		info, err = c.Wait(wctx, info.ID)
		cancel()
	}
	stop()
	wg.Wait()
	if err != nil || info.Status != leasehold.StatusSucceeded {
		t.Fatalf("the task: %s, %v", info.Status, err)
	}

	run := func(env map[string]string, args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := Main(t.Context(), args, Streams{In: strings.NewReader(""), Out: &out, Err: &errOut, Getenv: func(k string) string { return env[k] }})
		return code, out.String(), errOut.String()
	}
	env := map[string]string{EnvTable: table, EnvWorkQueueURL: queues.Work, settings.EnvPayloadBucket: bucket}
	if code, out, errOut := run(env, "result", info.ID); code != ExitOK || out != `"`+big+`"`+"\n" {
		t.Fatalf("leasehold result: exit %d, %d bytes on stdout, stderr %q; want the 300 KB result", code, len(out), errOut)
	}
	if code, out, errOut := run(env, "status", info.ID); code != ExitOK || !strings.Contains(out, strings.Repeat("r", 1000)) {
		t.Fatalf("leasehold status: exit %d, stdout %.300q, stderr %q; want the result shown", code, out, errOut)
	}
	delete(env, settings.EnvPayloadBucket)
	if code, _, errOut := run(env, "result", info.ID); code == ExitOK || !strings.Contains(errOut, settings.EnvPayloadBucket) {
		t.Fatalf("leasehold result without a bucket: exit %d, stderr %q; want an error naming %s", code, errOut, settings.EnvPayloadBucket)
	}
}

// TestReplayThroughTheBucketOnTheStack (issue 36): a workflow in flight
// whose payload (200 KB) and first step's result (200 KB) are in the
// stack's payload bucket. `leasehold replay` with LEASEHOLD_PAYLOAD_BUCKET
// reads them (GetObject only) and replays the history; --out writes them
// into the file, which replays with no bucket at all; without the
// variable, the replay fails naming it.
func TestReplayThroughTheBucketOnTheStack(t *testing.T) {
	t.Parallel()
	cfg := awstest.Config(t)
	bucket := os.Getenv(settings.EnvPayloadBucket)
	if bucket == "" {
		if os.Getenv("LEASEHOLD_REQUIRE_STACK") == "1" {
			t.Fatal(settings.EnvPayloadBucket + " is unset: the stack has no payload bucket (scripts/stack.sh env prints it) [LEASEHOLD_REQUIRE_STACK=1]")
		}
		t.Skip(settings.EnvPayloadBucket + " is unset: no payload bucket to test against")
	}
	table, queues := awstest.NewTable(t, cfg), awstest.NewQueues(t, cfg)
	payload, result := strings.Repeat("p", 200<<10), strings.Repeat("s", 200<<10)
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "bigflow", func(ctx context.Context, task *leasehold.Task[string]) (int, error) {
		if task.Payload != payload {
			return 0, fmt.Errorf("payload of %d bytes", len(task.Payload))
		}
		r, err := workflow.Step(ctx, "fetch", func(context.Context) (string, error) { return result, nil })
		if err != nil {
			return 0, err
		}
		if r != result {
			return 0, fmt.Errorf("step result of %d bytes", len(r))
		}
		return len(r), workflow.Sleep(ctx, time.Hour)
	})
	w, err := leasehold.NewWorker(leasehold.WorkerConfig{
		AWS: cfg, Table: table, QueueURL: queues.Work, Handlers: hs, PayloadBucket: bucket,
		Logger: slog.New(slog.DiscardHandler), LongPoll: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	c, err := leasehold.NewClient(leasehold.ClientConfig{AWS: cfg, Table: table, QueueURL: queues.Work, PayloadBucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { _ = w.Run(ctx) })
	info, err := c.Enqueue(t.Context(), leasehold.Submission{Kind: "bigflow", Payload: payload})
	deadline := time.Now().Add(awstest.Scale(2 * time.Minute))
	for err == nil {
		var got leasehold.TaskInfo
		got, err = c.Get(t.Context(), info.ID)
		if err == nil && got.Status == leasehold.StatusPending && len(got.Steps) == 2 {
			break
		}
		if err == nil && time.Now().After(deadline) {
			err = fmt.Errorf("the task did not reach its sleep: %s %q", got.Status, got.Error)
		}
		time.Sleep(100 * time.Millisecond)
	}
	stop()
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}

	env := map[string]string{EnvTable: table, EnvWorkQueueURL: queues.Work, settings.EnvPayloadBucket: bucket}
	run := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := Main(t.Context(), append([]string{"replay", "--kind", "bigflow"}, args...),
			Streams{In: strings.NewReader(""), Out: &out, Err: &errOut, Getenv: func(k string) string { return env[k] }, Handlers: hs})
		return code, out.String(), errOut.String()
	}
	if code, out, errOut := run(); code != ExitOK || !strings.Contains(out, "ok       "+info.ID+" (bigflow): replayed 2 recorded operations") {
		t.Fatalf("replay with the bucket: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	dir := t.TempDir()
	if code, _, errOut := run("--out", dir); code != ExitOK {
		t.Fatalf("--out: exit %d, stderr %q", code, errOut)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) != 1 {
		t.Fatalf("--out wrote %v (%v), want one file", files, err)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if line, err := hs.Replay(t.Context(), b); err != nil || !strings.Contains(line, "replayed 2 recorded operations") {
		t.Errorf("the written file, replayed without a bucket: %q, %v", line, err)
	}
	delete(env, settings.EnvPayloadBucket)
	if code, out, _ := run(); code != ExitDiverged || !strings.Contains(out, settings.EnvPayloadBucket) {
		t.Errorf("replay without the bucket: exit %d, stdout %q; want exit %d naming %s", code, out, ExitDiverged, settings.EnvPayloadBucket)
	}
}
