package leaseholdtest_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leaseholdtest"
)

type blob struct {
	Data string `json:"data"`
}

// TestLargePayloadAndResultThroughTheBucket: a 300 KB payload (over the
// 128 KiB inline limit) and a 200 KB result (over 64 KiB) go through the
// Env's payload bucket as through a deployed one, the task's item keeping
// references; small ones make no call to it.
func TestLargePayloadAndResultThroughTheBucket(t *testing.T) {
	t.Parallel()
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "echo", func(ctx context.Context, task *leasehold.Task[blob]) (blob, error) {
		if strings.HasPrefix(task.Payload.Data, "big") && len(task.Payload.Data) != 300<<10 {
			return blob{}, errors.New("payload not read back whole")
		}
		if strings.HasPrefix(task.Payload.Data, "big") {
			return blob{Data: strings.Repeat("r", 200<<10)}, nil
		}
		return task.Payload, nil
	})
	env := leaseholdtest.New(t, hs)

	small := mustEnqueue(t, env, leasehold.Submission{Kind: "echo", Payload: blob{Data: strings.Repeat("s", 60<<10)}})
	mustRun(t, env)
	if got := mustTask(t, env, small); got.Status != leasehold.StatusSucceeded {
		t.Fatalf("small task %s: %s", got.Status, got.Error)
	}
	if n := env.BlobCalls(); n != 0 {
		t.Fatalf("%d calls to the payload bucket for a 60 KB payload and result, want 0", n)
	}

	big := mustEnqueue(t, env, leasehold.Submission{Kind: "echo", Payload: blob{Data: "big" + strings.Repeat("b", 300<<10-3)}})
	mustRun(t, env)
	got := mustTask(t, env, big)
	if got.Status != leasehold.StatusSucceeded {
		t.Fatalf("300 KB payload: %s (%s), want SUCCEEDED", got.Status, got.Error)
	}
	if len(got.Payload) < 300<<10 || len(got.Result) < 200<<10 {
		t.Fatalf("read back a %d-byte payload and a %d-byte result", len(got.Payload), len(got.Result))
	}
	payload, result, err := env.StoredPayload(big)
	if err != nil {
		t.Fatal(err)
	}
	if len(payload) > 1024 || len(result) > 1024 || !bytes.Contains(payload, []byte("leasehold-blob")) || !bytes.Contains(result, []byte("leasehold-blob")) {
		t.Fatalf("the item holds a %d-byte payload and a %d-byte result, want references", len(payload), len(result))
	}
	info, err := env.Client().Get(context.Background(), big)
	if err != nil || len(info.Payload) < 300<<10 || len(info.Result) < 200<<10 {
		t.Fatalf("Client.Get: %d-byte payload, %d-byte result, %v; want them read through the bucket", len(info.Payload), len(info.Result), err)
	}
	r, err := leasehold.Result[blob](context.Background(), env.Client(), big)
	if err != nil || len(r.Data) != 200<<10 {
		t.Fatalf("leasehold.Result: %d bytes, %v", len(r.Data), err)
	}
	if _, err := env.Enqueue(leasehold.Submission{Kind: "echo", Payload: blob{Data: strings.Repeat("x", 11<<20)}}); !errors.Is(err, leasehold.ErrTooLarge) {
		t.Fatalf("an 11 MB payload: %v, want ErrTooLarge", err)
	}
}
