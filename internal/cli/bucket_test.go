package cli

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/settings"
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
