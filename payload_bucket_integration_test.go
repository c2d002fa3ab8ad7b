package leasehold_test

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/settings"
	"github.com/leasehold/leasehold/workflow"
)

// TestLargePayloadAndResultOnTheStack: a 2 MB payload and a 2 MB result
// go through the stack's payload bucket end to end (Enqueue, the worker,
// Result), the task's item and its token carrying references.
func TestLargePayloadAndResultOnTheStack(t *testing.T) {
	t.Parallel()
	e := setupStack(t)
	bucket := os.Getenv(settings.EnvPayloadBucket)
	if bucket == "" {
		if os.Getenv("LEASEHOLD_REQUIRE_STACK") == "1" {
			t.Fatal(settings.EnvPayloadBucket + " is unset: the stack has no payload bucket (scripts/stack.sh env prints it) [LEASEHOLD_REQUIRE_STACK=1]")
		}
		t.Skip(settings.EnvPayloadBucket + " is unset: no payload bucket to test against (make test sets it)")
	}
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "upper", func(ctx context.Context, task *leasehold.Task[string]) (string, error) {
		return strings.ToUpper(task.Payload), nil
	})
	w := e.worker(t, leasehold.WorkerConfig{Handlers: hs, PayloadBucket: bucket})
	c, err := leasehold.NewClient(leasehold.ClientConfig{AWS: e.cfg, Table: e.table, QueueURL: e.queues.Work, PayloadBucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	payload := strings.Repeat("abcdefgh", 2<<20/8)
	info, err := c.Enqueue(ctx, leasehold.Submission{Kind: "upper", Payload: payload})
	if err != nil {
		t.Fatalf("Enqueue of a 2 MB payload: %v", err)
	}
	e.pump(t, w, time.Minute, func() bool { return e.status(t, info.ID).Terminal() })
	stored := e.get(t, info.ID)
	if len(stored.Payload) > 1024 || len(stored.Result) > 1024 {
		t.Fatalf("the item holds a %d-byte payload and a %d-byte result, want references", len(stored.Payload), len(stored.Result))
	}
	got, err := leasehold.Result[string](ctx, c, info.ID)
	if err != nil || got != strings.ToUpper(payload) {
		t.Fatalf("Result: %d bytes, %v; want the 2 MB upper-cased payload", len(got), err)
	}
	back, err := c.Get(ctx, info.ID)
	if err != nil || !bytes.Contains(back.Payload, []byte(payload)) {
		t.Fatalf("Get: %d-byte payload, %v", len(back.Payload), err)
	}
}

// payloadBucket is the stack's payload bucket; a test without one skips
// (or fails, when the stack is required).
func payloadBucket(t *testing.T) string {
	t.Helper()
	bucket := os.Getenv(settings.EnvPayloadBucket)
	if bucket == "" {
		if os.Getenv("LEASEHOLD_REQUIRE_STACK") == "1" {
			t.Fatal(settings.EnvPayloadBucket + " is unset: the stack has no payload bucket (scripts/stack.sh env prints it) [LEASEHOLD_REQUIRE_STACK=1]")
		}
		t.Skip(settings.EnvPayloadBucket + " is unset: no payload bucket to test against (make test sets it)")
	}
	return bucket
}

// TestContinueAsNewLargeInputOnTheStack: a continue-as-new whose next
// input is 300 KB goes through the payload bucket: the item holds a
// reference, and the next run reads the input whole.
func TestContinueAsNewLargeInputOnTheStack(t *testing.T) {
	t.Parallel()
	e := setupStack(t)
	bucket := payloadBucket(t)
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "growing", func(ctx context.Context, task *leasehold.Task[string]) (int, error) {
		if task.Payload == "" {
			return 0, workflow.ContinueAsNew(ctx, strings.Repeat("y", 300_000))
		}
		return len(task.Payload), nil
	})
	w := e.worker(t, leasehold.WorkerConfig{Handlers: hs, PayloadBucket: bucket})
	c, err := leasehold.NewClient(leasehold.ClientConfig{AWS: e.cfg, Table: e.table, QueueURL: e.queues.Work, PayloadBucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := c.Enqueue(ctx, leasehold.Submission{Kind: "growing", ID: "grower", Payload: ""}); err != nil {
		t.Fatal(err)
	}
	e.pump(t, w, time.Minute, func() bool { return e.status(t, "grower").Terminal() })
	if stored := e.get(t, "grower"); stored.Status != "SUCCEEDED" || string(stored.Result) != "300000" || stored.Run != 1 || len(stored.Payload) > 1024 {
		t.Fatalf("grower: %s %s run %d (%q), a %d-byte payload in the item; want SUCCEEDED 300000 in its second run, the input a reference",
			stored.Status, stored.Result, stored.Run, stored.Error, len(stored.Payload))
	}
}
