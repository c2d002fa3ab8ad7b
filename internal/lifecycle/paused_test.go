package lifecycle_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/durable"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lifecycle"
	"github.com/leasehold/leasehold/internal/token"
)

// A worker process paused (a long stop of the world, SIGSTOP) right after
// its claim, or between two steps, wakes up with its lease run out and
// perhaps held by another worker, which may have recorded the very step it
// is about to run. Its renewer notices at its next timer, but the handler's
// goroutine can run first: the handler must not start, and no step's
// function be called, on a lease the worker's own clock says has run out.
// (A make chaos run saw a step's function run again under a stale fence
// this way: step_rerun.)

// pausedAfterClaim lets the clock jump past the lease and its skew right
// after a claim succeeds, as if the process had been paused there.
type pausedAfterClaim struct {
	lease.Store
	pause func()
}

func (p pausedAfterClaim) Claim(ctx context.Context, id, owner string) (lease.Task, error) {
	t, err := p.Store.Claim(ctx, id, owner)
	if err == nil {
		p.pause()
	}
	return t, err
}

func TestHandlerIsNotStartedOnALeaseThatRanOutAfterItsClaim(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	var started atomic.Bool
	e.handlers["side-effect"] = func(context.Context, lease.Task) ([]byte, error) {
		started.Store(true)
		return []byte(`"done"`), nil
	}
	if _, err := e.store.Create(t.Context(), lease.NewTask{ID: "t", Kind: "side-effect", MaxAttempts: 3}); err != nil {
		t.Fatal(err)
	}
	paused := e.another(t, func(c *lifecycle.Config) {
		c.Store = pausedAfterClaim{Store: e.store, pause: func() { e.clock.Advance(25 * time.Second) }}
	})
	res := paused.Process(t.Context(), nil, msg("m", token.Ref("t")))
	if started.Load() {
		t.Fatal("the handler started on a lease that had run out (by the worker's own clock) before it began")
	}
	// Nobody took the task over here, so the release lands: the task is
	// offered again at once, with the reason.
	if res.Outcome != lifecycle.OutcomeReleased {
		t.Errorf("outcome %s, want %s", res.Outcome, lifecycle.OutcomeReleased)
	}
	if got := e.get(t, "t"); got.Status != lease.StatusPending || !strings.Contains(got.Error, "handler not started") {
		t.Errorf("task %s (%q), want PENDING with the reason", got.Status, got.Error)
	}

	// Taken over meanwhile: the stale holder's release fails on the fence,
	// and the new holder's attempt is untouched.
	if _, err := e.store.Create(t.Context(), lease.NewTask{ID: "u", Kind: "side-effect", MaxAttempts: 3}); err != nil {
		t.Fatal(err)
	}
	paused = e.another(t, func(c *lifecycle.Config) {
		c.Store = pausedAfterClaim{Store: e.store, pause: func() {
			e.clock.Advance(25 * time.Second)
			if _, err := e.store.Claim(t.Context(), "u", "taker"); err != nil {
				t.Errorf("take over: %v", err)
			}
		}}
	})
	res = paused.Process(t.Context(), nil, msg("m2", token.Ref("u")))
	if started.Load() {
		t.Fatal("the handler started on a lease taken over")
	}
	if got := e.get(t, "u"); got.Status != lease.StatusRunning || got.LeaseOwner != "taker" {
		t.Errorf("task %s held by %q, want the taker's RUNNING attempt untouched (outcome %s)", got.Status, got.LeaseOwner, res.Outcome)
	}
}

func TestStepIsNotStartedOnALeaseThatRanOutBetweenSteps(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	var secondRan atomic.Bool
	e.handlers["steps"] = func(ctx context.Context, task lease.Task) ([]byte, error) {
		if _, err := durable.StepOf(ctx, "a", func(context.Context) ([]byte, error) { return []byte(`1`), nil }); err != nil {
			return nil, err
		}
		// Paused here past the lease and the skew: the renewer is as
		// frozen as the handler, and another worker may take over.
		e.clock.Advance(25 * time.Second)
		return durable.StepOf(ctx, "b", func(context.Context) ([]byte, error) {
			secondRan.Store(true)
			return []byte(`2`), nil
		})
	}
	res := e.exec.Process(t.Context(), nil, msg("m", inline(t, "steps", "s", "", 3)))
	if secondRan.Load() {
		t.Fatal("step b's function ran on a lease that had run out (by the worker's own clock) before it began")
	}
	if res.Outcome == lifecycle.OutcomeSucceeded {
		t.Errorf("outcome %s, want the attempt ended without its result", res.Outcome)
	}
	if got := e.get(t, "s"); len(got.Steps) != 1 {
		t.Errorf("steps recorded: %+v, want only a", got.Steps)
	}
}
