package leaseholdtest_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/workflow"
)

// invokeEnv has a parent kind "parent" that invokes one child of kind
// "child" (whose handler is child) as "calc", and returns its result plus
// one; invoked gets Invoke's error each time it is not nil.
func invokeEnv(t *testing.T, child func(context.Context, *leasehold.Task[int]) (int, error), invoked func(error)) *leaseholdtest.Env {
	t.Helper()
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "parent", func(ctx context.Context, task *leasehold.Task[int]) (int, error) {
		v, err := workflow.Invoke[int](ctx, "calc", workflow.Child{Kind: "child", Payload: task.Payload, MaxAttempts: 1})
		if err != nil {
			invoked(err)
			return 0, err
		}
		return v + 1, nil
	})
	leasehold.Handle(hs, "child", child)
	return leaseholdtest.New(t, hs)
}

// Invoke spawns one child, waits for it, and hands its result to the
// parent decoded: the parent's result is the child's plus one.
func TestInvokeReturnsTheChildsTypedResult(t *testing.T) {
	env := invokeEnv(t, func(_ context.Context, task *leasehold.Task[int]) (int, error) { return task.Payload * 2, nil }, func(error) {})
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "parent", Payload: 20})
	mustRun(t, env)
	got := mustTask(t, env, id)
	if got.Status != leasehold.StatusSucceeded || string(got.Result) != "41" {
		t.Fatalf("parent: %s %s (%q), want SUCCEEDED 41", got.Status, got.Result, got.Error)
	}
	kid := mustTask(t, env, workflow.ChildIDIn(id, "calc", 0))
	if kid.Status != leasehold.StatusSucceeded || string(kid.Result) != "40" || kid.Parent != id {
		t.Errorf("child: %s %s of %q, want SUCCEEDED 40 of the parent", kid.Status, kid.Result, kid.Parent)
	}
}

// A child that fails: Invoke returns a *ChildFailedError naming the child
// and carrying its error, as a permanent failure of the parent.
func TestInvokeOfAFailedChild(t *testing.T) {
	var mu sync.Mutex
	var seen error
	env := invokeEnv(t, func(context.Context, *leasehold.Task[int]) (int, error) {
		return 0, leasehold.Fail(errors.New("out of stock"))
	}, func(err error) {
		mu.Lock()
		defer mu.Unlock()
		seen = err // the last: the first is the wait
	})
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "parent", Payload: 1, MaxAttempts: 3})
	mustRun(t, env)
	got := mustTask(t, env, id)
	kidID := workflow.ChildIDIn(id, "calc", 0)
	want := `invoke "calc": child ` + kidID + ` ended FAILED: out of stock`
	if got.Status != leasehold.StatusFailed || got.Error != want || got.Attempt != 1 {
		t.Fatalf("parent: %s attempt %d (%q), want FAILED in attempt 1 with %q", got.Status, got.Attempt, got.Error, want)
	}
	mu.Lock()
	defer mu.Unlock()
	var failed *workflow.ChildFailedError
	if !errors.As(seen, &failed) || failed.ID != kidID || failed.Name != "calc" || failed.Status != leasehold.StatusFailed || failed.Reason != "out of stock" {
		t.Errorf("Invoke's error %#v, want a *ChildFailedError for %s", seen, kidID)
	}
}

// The parent's cancel reaches the child it invoked: the child, waiting
// for a callback, is cancelled with its parent.
func TestInvokeCancelReachesTheChild(t *testing.T) {
	env := invokeEnv(t, func(ctx context.Context, _ *leasehold.Task[int]) (int, error) {
		return workflow.WaitForCallback[int](ctx, "answer", time.Hour, func(context.Context, string) error { return nil })
	}, func(error) {})
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "parent", Payload: 1})
	mustRun(t, env)
	kidID := workflow.ChildIDIn(id, "calc", 0)
	if kid := mustTask(t, env, kidID); kid.Status != leasehold.StatusWaiting {
		t.Fatalf("child: %s, want WAITING for its callback", kid.Status)
	}
	if _, err := env.Client().Cancel(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	mustRun(t, env)
	if p := mustTask(t, env, id); p.Status != leasehold.StatusCancelled {
		t.Errorf("parent: %s, want CANCELLED", p.Status)
	}
	if kid := mustTask(t, env, kidID); kid.Status != leasehold.StatusCancelled {
		t.Errorf("child: %s (%q), want CANCELLED with its parent", kid.Status, kid.Error)
	}
}
