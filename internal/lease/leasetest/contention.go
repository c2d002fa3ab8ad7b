package leasetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
)

// Sizes of CancelUnderContention: per round (one task each), the workers
// churning the task, the cancels, and how many moves the workers make
// before the cancels start.
const (
	churnRounds  = 10
	churnWorkers = 6
	churnCancels = 4
	churnWarmup  = 12
)

// testCancelUnderContention: no amount of other writers makes a cancel
// fail (issue 33). Workers churn a task as the lifecycle does (claims,
// renewals, checkpoints, retries and snoozes back to PENDING, suspensions
// for a callback that is answered at once) while several cancels run.
// Every cancel succeeds, or finds the task already CANCELLED by an earlier
// cancel's effect; a cancel that returns leaves the task flagged; and the
// task ends CANCELLED, by the cancels' writes or by the workers, which
// honour the flag as the lifecycle does: a claim of a flagged task
// releases it CANCELLED without running it, a renewal that reports the
// flag ends the attempt CANCELLED, a suspension that finds it ends the
// wait cancelled.
func testCancelUnderContention(t *testing.T, a *adminEnv) {
	for round := range churnRounds {
		a.cancelUnderChurn(t, uint64(round))
	}
}

// churn is one round's task and what its workers and cancels share.
type churn struct {
	a     *adminEnv
	t     *testing.T
	id    string
	moves atomic.Int64  // landed writes of the workers that moved the task
	ready chan struct{} // closed once moves reached churnWarmup
	once  sync.Once
	steps atomic.Int64 // names of checkpoints and callback steps
}

func (a *adminEnv) cancelUnderChurn(t *testing.T, round uint64) {
	ctx, stop := context.WithTimeout(a.ctx, time.Minute)
	defer stop()
	n := a.newTask()
	n.MaxAttempts = lease.MaxAttemptsLimit
	c := &churn{a: a, t: t, id: a.create(n).ID, ready: make(chan struct{})}

	var workers, cancels sync.WaitGroup
	for w := range churnWorkers {
		rng := rand.New(rand.NewPCG(round, uint64(w)))
		owner := fmt.Sprintf("w%d", w)
		workers.Go(func() { c.work(ctx, owner, rng) })
	}
	type result struct {
		task lease.Task
		err  error
	}
	results := make([]result, churnCancels)
	for i := range churnCancels {
		cancels.Go(func() {
			select {
			case <-c.ready:
			case <-ctx.Done():
				results[i].err = context.Cause(ctx)
				return
			}
			results[i].task, results[i].err = a.admin.RequestCancel(ctx, c.id)
		})
	}
	cancels.Wait()

	succeeded, finished := 0, 0
	for i, r := range results {
		var fe *lease.FinishedError
		switch {
		case r.err == nil:
			succeeded++
			if !r.task.CancelRequested {
				t.Errorf("round %d: cancel %d returned the task %s without the cancel flag", round, i, r.task.Status)
			}
		case errors.As(r.err, &fe) && fe.Status == lease.StatusCancelled:
			// It came after the task had ended, by an earlier
			// cancel's effect.
			finished++
		default:
			t.Errorf("round %d: cancel %d: %v; want success (never a backend error under contention)", round, i, r.err)
		}
	}
	if succeeded == 0 {
		stop() // nothing flagged the task: the workers would churn on
		workers.Wait()
		t.Fatalf("round %d: no cancel succeeded", round)
	}
	workers.Wait()
	if ctx.Err() != nil {
		t.Fatalf("round %d did not end within its time (%d moves): the flagged task was never ended", round, c.moves.Load())
	}
	final, err := a.store.Get(a.ctx, c.id)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if final.Status != lease.StatusCancelled || !final.CancelRequested {
		t.Fatalf("round %d: after the cancels the task is %s, flag %t; want CANCELLED with the flag", round, final.Status, final.CancelRequested)
	}
	if h := final.History; len(h) == 0 || h[len(h)-1].Status != lease.StatusCancelled {
		t.Fatalf("round %d: history %+v, want it to end with the cancel", round, h)
	}
	t.Logf("round %d: %d worker moves; of %d cancels %d succeeded, %d found the task cancelled",
		round, c.moves.Load(), churnCancels, succeeded, finished)
}

// moved counts a landed move of the task and lets the cancels go once
// the workers have made churnWarmup of them.
func (c *churn) moved() {
	if c.moves.Add(1) >= churnWarmup {
		c.once.Do(func() { close(c.ready) })
	}
}

// work is one worker: it takes the task whenever it can and does what a
// handler and the lifecycle would, until the task has ended.
func (c *churn) work(ctx context.Context, owner string, rng *rand.Rand) {
	for n := 0; ctx.Err() == nil; n++ {
		held, err := c.a.store.Claim(ctx, c.id, fmt.Sprintf("%s#%d", owner, n))
		var (
			fe      *lease.FinishedError
			leased  *lease.LeasedError
			waiting *lease.WaitingError
		)
		switch {
		case errors.As(err, &fe):
			return
		case errors.As(err, &leased), errors.As(err, &waiting):
			continue // another worker holds it, or waits for its callback
		case err != nil:
			c.fail("claim", err)
			return
		}
		c.moved()
		if c.run(ctx, held, rng) {
			return
		}
	}
}

// run is one attempt under the lease of held. It reports whether the task
// has ended.
func (c *churn) run(ctx context.Context, held lease.Task, rng *rand.Rand) bool {
	if held.CancelRequested {
		return c.cancelHeld(ctx, held) // as runClaimed does
	}
	for range rng.IntN(2) {
		switch {
		case rng.IntN(2) == 0 && len(held.Steps) < lease.MaxSteps/2:
			step := fmt.Sprintf("s%d", c.steps.Add(1))
			if _, err := c.a.store.Checkpoint(ctx, held.LeaseOf(), lease.Step{Name: step, Result: []byte(`1`)}); err != nil {
				c.fail("checkpoint", err)
				return true
			}
		default:
			renewed, err := c.a.store.Renew(ctx, held.LeaseOf())
			if err != nil {
				c.fail("renew", err)
				return true
			}
			if renewed.CancelRequested {
				return c.cancelHeld(ctx, held) // as the renewer does
			}
		}
	}
	now := c.a.now()
	switch rng.IntN(3) {
	case 0: // a snooze
		_, err := c.a.store.Release(ctx, held.LeaseOf(), lease.Release{Status: lease.StatusPending, RunAt: now, Error: "snoozed", RefundAttempt: true})
		return c.released(err)
	case 1: // a retry
		_, err := c.a.store.Release(ctx, held.LeaseOf(), lease.Release{Status: lease.StatusPending, RunAt: now, Error: "failed"})
		return c.released(err)
	}
	// A suspension for a callback whose answer comes at once.
	step := fmt.Sprintf("cb%d", c.steps.Add(1))
	nonce := lease.ResumableNonce(fmt.Sprintf("secret%d", rng.Uint64()), step)
	waiting, err := c.a.store.Suspend(ctx, held.LeaseOf(), lease.Wait{Mode: lease.WaitCallback, Until: now.Add(time.Hour), Nonce: nonce, Step: step})
	if err != nil {
		c.fail("suspend", err)
		return true
	}
	c.moved()
	if waiting.CancelRequested {
		// As the lifecycle's suspension does: the cancel came while the
		// attempt ran; end the wait at once.
		_, err := c.a.store.EndWaiting(ctx, waiting, lease.StatusCancelled, "cancelled on request")
		return c.ended("end waiting", err)
	}
	_, err = c.a.store.EndWait(ctx, lease.WaitEnd{ID: c.id, Fence: waiting.Fence, Attempt: waiting.Attempt, Nonce: nonce,
		Status: lease.StatusSucceeded, Result: []byte(`"answer"`)})
	var fe *lease.FinishedError
	switch {
	case errors.As(err, &fe):
		return true // a cancel ended the wait first
	case err != nil:
		c.fail("answer the callback", err)
		return true
	}
	c.moved()
	return false
}

// cancelHeld ends the attempt under held CANCELLED, as the lifecycle does
// for a flagged task.
func (c *churn) cancelHeld(ctx context.Context, held lease.Task) bool {
	_, err := c.a.store.Release(ctx, held.LeaseOf(), lease.Release{Status: lease.StatusCancelled, Error: "cancelled on request"})
	return c.ended("release cancelled", err)
}

// released reports whether a release to PENDING ended the worker's part
// (it failed), counting its move.
func (c *churn) released(err error) bool {
	if err != nil {
		c.fail("release", err)
		return true
	}
	c.moved()
	return false
}

// ended checks the write that ended the task: it lands, or finds the task
// ended by a cancel first.
func (c *churn) ended(op string, err error) bool {
	var fe *lease.FinishedError
	if err != nil && !errors.As(err, &fe) {
		c.fail(op, err)
	}
	return true
}

func (c *churn) fail(op string, err error) {
	c.t.Errorf("worker %s of %s: %v", op, c.id, err)
}
