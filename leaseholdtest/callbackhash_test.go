package leaseholdtest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/token"
	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/workflow"
)

// The table keeps only a hash of a callback token's secret. A token built
// from what the table holds (the task's id, fence, attempt and that hash:
// a backup, an export or the inspector shows them) is no credential:
// CompleteCallback and FailCallback refuse it, on the client and in the
// kit. An operator answers a wait by task, fence and attempt, with
// OperatorComplete, which reads and writes the table itself.
func TestCallbackHashIsNotACredential(t *testing.T) {
	t.Parallel()
	handed := make(chan string, 1)
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "approve", func(ctx context.Context, _ *leasehold.Task[string]) (string, error) {
		tok, err := workflow.CallbackToken(ctx)
		if err != nil {
			return "", err
		}
		handed <- tok
		return "", workflow.AwaitCallback(time.Hour)
	})
	env := leaseholdtest.New(t, hs)
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "approve", Payload: "refund 7"})
	mustRun(t, env)
	real, err := token.ParseCallback(<-handed)
	if err != nil {
		t.Fatal(err)
	}
	forged := token.Callback{ID: real.ID, Fence: real.Fence, Attempt: real.Attempt, Nonce: lease.CallbackHash(real.Nonce)}.String()
	c, ctx := env.Client(), t.Context()
	if _, err := c.CompleteCallback(ctx, forged, "forged"); !errors.Is(err, leasehold.ErrBadCallback) {
		t.Errorf("Client.CompleteCallback with a token built from the table: %v, want ErrBadCallback", err)
	}
	if _, err := c.FailCallback(ctx, forged, "forged"); !errors.Is(err, leasehold.ErrBadCallback) {
		t.Errorf("Client.FailCallback with a token built from the table: %v, want ErrBadCallback", err)
	}
	if err := env.CompleteCallback(forged, "forged"); !errors.Is(err, leasehold.ErrBadCallback) {
		t.Errorf("Env.CompleteCallback with a token built from the table: %v, want ErrBadCallback", err)
	}
	if got := mustTask(t, env, id); got.Status != leasehold.StatusWaiting {
		t.Fatalf("after the forged answers: %s, want still WAITING", got.Status)
	}

	w, err := c.Get(ctx, id)
	if err != nil || w.Fence != real.Fence || w.Attempt != real.Attempt {
		t.Fatalf("Get = %+v, %v; want the waiting attempt's fence %d and attempt %d", w, err, real.Fence, real.Attempt)
	}
	stale := w
	stale.Fence--
	if _, err := c.OperatorComplete(ctx, stale, "stale"); !errors.Is(err, leasehold.ErrBadCallback) || !errors.Is(err, leasehold.ErrNotWaiting) {
		t.Errorf("OperatorComplete of another attempt's wait: %v, want ErrBadCallback and ErrNotWaiting", err)
	}
	if info, err := c.OperatorComplete(ctx, w, "by hand"); err != nil || info.Status != leasehold.StatusSucceeded {
		t.Fatalf("OperatorComplete: %+v, %v", info, err)
	}
	mustRun(t, env)
	if got := mustTask(t, env, id); got.Status != leasehold.StatusSucceeded || string(got.Result) != `"by hand"` {
		t.Fatalf("after the operator's answer: %s %s", got.Status, got.Result)
	}
	if _, err := c.OperatorFail(ctx, w, "again"); !errors.Is(err, leasehold.ErrBadCallback) {
		t.Errorf("a second answer to the same wait: %v, want ErrBadCallback", err)
	}
}
