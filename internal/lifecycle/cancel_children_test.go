package lifecycle_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/durable"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lifecycle"
	"github.com/leasehold/leasehold/internal/token"
)

// kidHandlers registers "kid", counting its runs, and a parent kind that
// spawns n kids after calling before.
func kidHandlers(e *env, n int, before func(ctx context.Context, task lease.Task)) *atomic.Int32 {
	var runs atomic.Int32
	e.handlers["kid"] = func(_ context.Context, task lease.Task) ([]byte, error) {
		runs.Add(1)
		return []byte(`1`), nil
	}
	e.handlers["fan"] = func(ctx context.Context, task lease.Task) ([]byte, error) {
		if _, ok := durable.WaitResultsOf(ctx); ok {
			return []byte(`"joined"`), nil
		}
		if before != nil {
			before(ctx, task)
		}
		kids := make([]durable.Child, n)
		for i := range kids {
			kids[i] = durable.Child{Kind: "kid", Payload: []byte(fmt.Sprint(i))}
		}
		return nil, &durable.AwaitChildrenError{Children: kids}
	}
	return &runs
}

// wantCancelledWithParent checks that id is CANCELLED naming its parent.
func (e *env) wantCancelledWithParent(t *testing.T, id, parent string) {
	t.Helper()
	got, err := e.store.Get(t.Context(), id)
	if err != nil {
		t.Fatalf("%s: %v; want it CANCELLED", id, err)
	}
	if got.Status != lease.StatusCancelled || !strings.Contains(got.Error, "parent "+parent) {
		t.Fatalf("%s: %s %q; want CANCELLED with a reason naming %s", id, got.Status, got.Error, parent)
	}
}

// The cancel's flag lands while the parent's attempt runs, after its last
// renewal: the handler returns AwaitChildren, the children's tokens go out,
// and the suspension lands with the flag set. The worker then cancels the
// children (none has an item yet) and the parent; the queued tokens run
// nothing.
func TestCancelFlagBeforeSuspendCancelsChildren(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	runs := kidHandlers(e, 3, func(ctx context.Context, task lease.Task) {
		if _, err := e.store.RequestCancel(context.WithoutCancel(ctx), task.ID); err != nil {
			t.Error(err)
		}
	})
	res := e.exec.Process(t.Context(), nil, msg("p", inline(t, "fan", "p", "", 0)))
	if !res.Ack {
		t.Fatalf("parent's message: %+v", res)
	}
	e.drainSent(t, 0)
	if got := e.get(t, "p"); got.Status != lease.StatusCancelled {
		t.Fatalf("parent: %s, want CANCELLED", got.Status)
	}
	if n := runs.Load(); n != 0 {
		t.Fatalf("%d children ran after their parent's cancel", n)
	}
	for i := range 3 {
		e.wantCancelledWithParent(t, durable.ChildID("p", i), "p")
	}
}

// A worker died after such a suspension landed: the parent's redelivered
// token finishes the cancel.
func TestRedeliveredTokenOfFlaggedWaitingParentCancels(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	runs := kidHandlers(e, 2, nil)
	ctx := t.Context()
	if _, err := e.store.CreateClaimed(ctx, lease.NewTask{ID: "p", Kind: "fan", MaxAttempts: 3}, "gone"); err != nil {
		t.Fatal(err)
	}
	flagged, err := e.store.RequestCancel(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Suspend(ctx, flagged.LeaseOf(), lease.Wait{Mode: lease.WaitChildren, For: []string{"p/0", "p/1"}}); err != nil {
		t.Fatal(err)
	}
	if res := e.exec.Process(ctx, nil, msg("p-again", token.Ref("p"))); !res.Ack {
		t.Fatalf("redelivered parent token: %+v", res)
	}
	if got := e.get(t, "p"); got.Status != lease.StatusCancelled {
		t.Fatalf("parent: %s, want CANCELLED", got.Status)
	}
	for i := range 2 {
		body, err := token.Token{ID: durable.ChildID("p", i), Kind: "kid", MaxAttempts: 1, Parent: "p"}.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if res := e.exec.Process(ctx, nil, msg(fmt.Sprint("c", i), body)); !res.Ack {
			t.Fatalf("child token: %+v", res)
		}
		e.wantCancelledWithParent(t, durable.ChildID("p", i), "p")
	}
	if n := runs.Load(); n != 0 {
		t.Fatalf("%d children ran", n)
	}
}

// A child id already taken by another task fails the parent with a reason
// naming the id; it does not leave the parent waiting for ever. The other
// task is left alone, and so is a duplicate of the child (same kind and
// payload) that is not the parent's.
func TestChildIDTakenFailsParent(t *testing.T) {
	t.Parallel()
	for _, taken := range []lease.NewTask{
		{ID: "p/1", Kind: "other", MaxAttempts: 1},                     // another kind
		{ID: "p/1", Kind: "kid", Payload: []byte(`1`), MaxAttempts: 1}, // the same kind and payload, no parent
	} {
		t.Run(taken.Kind, func(t *testing.T) {
			t.Parallel()
			e := setup(t, nil)
			runs := kidHandlers(e, 3, nil)
			if _, err := e.store.Create(t.Context(), taken); err != nil {
				t.Fatal(err)
			}
			e.exec.Process(t.Context(), nil, msg("p", inline(t, "fan", "p", "", 0)))
			e.drainSent(t, 0)
			got := e.get(t, "p")
			if got.Status != lease.StatusFailed || got.Error != "child id p/1 is taken by another task" {
				t.Fatalf("parent: %s %q; want FAILED naming the child id", got.Status, got.Error)
			}
			if other := e.get(t, "p/1"); other.Status != lease.StatusPending || other.Parent != "" {
				t.Fatalf("the task holding p/1 was touched: %s parent %q", other.Status, other.Parent)
			}
			// p/0 ran before p/1's token came; p/2, whose token came after
			// the parent failed, never runs.
			if n := runs.Load(); n != 1 {
				t.Fatalf("%d children ran, want 1 (p/0, before the collision was found)", n)
			}
			e.wantCancelledWithParent(t, "p/2", "p")
		})
	}
}

// The colliding child's token may come before its parent's suspension
// lands: it is kept, and fails the parent once it waits.
func TestChildIDTakenBeforeSuspendIsKept(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	kidHandlers(e, 1, nil)
	ctx := t.Context()
	if _, err := e.store.Create(ctx, lease.NewTask{ID: "p/0", Kind: "other", MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	p, err := e.store.CreateClaimed(ctx, lease.NewTask{ID: "p", Kind: "fan", MaxAttempts: 3}, "elsewhere")
	if err != nil {
		t.Fatal(err)
	}
	body, err := token.Token{ID: "p/0", Kind: "kid", MaxAttempts: 1, Parent: "p"}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if res := e.exec.Process(ctx, nil, msg("c0", body)); res.Ack {
		t.Fatalf("child token before the parent waits: %+v, want it kept", res)
	}
	if _, err := e.store.Suspend(ctx, p.LeaseOf(), lease.Wait{Mode: lease.WaitChildren, For: []string{"p/0"}}); err != nil {
		t.Fatal(err)
	}
	if res := e.exec.Process(ctx, nil, msg("c0", body)); !res.Ack {
		t.Fatalf("child token once the parent waits: %+v", res)
	}
	if got := e.get(t, "p"); got.Status != lease.StatusFailed || !strings.Contains(got.Error, "child id p/0 is taken") {
		t.Fatalf("parent: %s %q", got.Status, got.Error)
	}
}

// A dependent whose dependency was cancelled before the dependent's token
// was taken never runs: it is created and cancelled with the reason.
func TestDependentOfCancelledTaskNeverRuns(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	var ran atomic.Int32
	e.handlers["step"] = func(context.Context, lease.Task) ([]byte, error) { ran.Add(1); return nil, nil }
	ctx := t.Context()
	if _, err := e.store.Create(ctx, lease.NewTask{ID: "a", Kind: "step", MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.RequestCancel(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	body, err := token.Token{ID: "b", Kind: "step", After: []string{"a"}}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	e.exec.Process(ctx, nil, msg("b", body))
	e.exec.Process(ctx, nil, msg("b-again", body))
	if got := e.get(t, "b"); got.Status != lease.StatusCancelled || !strings.Contains(got.Error, "dependency a ended CANCELLED") || ran.Load() != 0 {
		t.Fatalf("dependent: %s %q after %d runs", got.Status, got.Error, ran.Load())
	}
}

// A spawn whose later batch of tokens fails on the last attempt fails the
// parent; the children whose tokens went out never run after it.
func TestSpawnFailingOnLastAttemptCancelsSentChildren(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.sqs.sendBatchesOK = 1 // the first ten tokens go out, the last two do not
	runs := kidHandlers(e, 12, nil)
	e.exec.Process(t.Context(), nil, msg("p", inline(t, "fan", "p", "", 1)))
	if got := e.get(t, "p"); got.Status != lease.StatusFailed {
		t.Fatalf("parent: %s %q, want FAILED", got.Status, got.Error)
	}
	e.drainSent(t, 0)
	if n := runs.Load(); n != 0 {
		t.Fatalf("%d children ran after their parent failed", n)
	}
	for i := range 10 {
		e.wantCancelledWithParent(t, durable.ChildID("p", i), "p")
	}
}

// failFirstPlaceholder fails the first CreateCancelled, as a throttled
// table would.
type failFirstPlaceholder struct {
	lease.Store
	failed atomic.Bool
}

func (f *failFirstPlaceholder) CreateCancelled(ctx context.Context, id, parent, reason string) (lease.Task, error) {
	if !f.failed.Swap(true) {
		return lease.Task{}, fmt.Errorf("cancel child %s: %w: throttled", id, lease.ErrBackend)
	}
	return f.Store.CreateCancelled(ctx, id, parent, reason)
}

// A spawn that fails on the last attempt after some tokens went out, and
// whose first placeholder write fails too, does not fail the parent: a
// child whose token went out and has no placeholder could then be created
// and run after its parent ended. The attempt is handed back instead; the
// next one spawns again, fails again, writes every placeholder and fails
// the parent. The tokens sent the first time then run nothing.
func TestSpawnFailingOnLastAttemptWaitsForEveryPlaceholder(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *lifecycle.Config) { c.Store = &failFirstPlaceholder{Store: c.Store} })
	e.sqs.sendBatchesOK = 1 // the first ten tokens go out, then no batch does
	runs := kidHandlers(e, 12, nil)
	if res := e.exec.Process(t.Context(), nil, msg("p", inline(t, "fan", "p", "", 1))); !res.Ack || res.Outcome != lifecycle.OutcomeRetried {
		t.Fatalf("parent's message: %+v, want acknowledged and retried", res)
	}
	got := e.get(t, "p")
	if got.Status != lease.StatusPending || got.Attempt != 0 || !strings.Contains(got.Error, "cannot fail before its children are cancelled") {
		t.Fatalf("parent after a failed placeholder: %s attempt %d %q; want PENDING with its attempt handed back", got.Status, got.Attempt, got.Error)
	}
	if _, err := e.store.Get(t.Context(), "p/0"); !errors.Is(err, lease.ErrNotFound) {
		t.Fatalf("p/0 after its placeholder write failed: %v, want no item", err)
	}
	// The retry, due after its backoff, before any child's token is taken.
	e.clock.Advance(time.Hour)
	if res := e.exec.Process(t.Context(), nil, msg("p-retry", token.Ref("p"))); !res.Ack || res.Outcome != lifecycle.OutcomeFailed {
		t.Fatalf("parent's retry: %+v, want it failed", res)
	}
	if got := e.get(t, "p"); got.Status != lease.StatusFailed || !strings.Contains(got.Error, "could not send the children's tokens") {
		t.Fatalf("parent: %s %q, want FAILED", got.Status, got.Error)
	}
	e.drainSent(t, 0)
	if n := runs.Load(); n != 0 {
		t.Fatalf("%d children ran after their parent failed", n)
	}
	for i := range 10 {
		e.wantCancelledWithParent(t, durable.ChildID("p", i), "p")
	}
}
