package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/leasehold/leasehold/internal/durable"
	"github.com/leasehold/leasehold/internal/lease"
	"go.opentelemetry.io/otel/trace"
)

// StateClaimed and StateRunning: the handler and the renewer start, and the
// loop waits for the handler; the executor's side of the durable calls
// (durable.Attempt) is here too.

// runClaimed starts the handler and the renewer (seed: TaskClaimed).
func (x *execution) runClaimed(ctx context.Context) State {
	x.log.claimed, x.log.attempt, x.log.fence = true, x.task.Attempt, x.task.Fence
	x.claimedSpan()
	if x.cfg.Observer != nil {
		x.claimed.claimInfo = Claim{
			Attempt: x.task.Attempt, CreatedAt: x.task.CreatedAt, RunAt: x.task.RunAt,
			SinceEnqueue: x.cfg.Clock.Since(x.task.CreatedAt),
		}
		x.claimed.hasClaim = true
	}
	if x.task.CancelRequested {
		// Cancelled while a worker that has since vanished held it.
		return x.release(ctx, lease.Release{Status: lease.StatusCancelled, Error: "cancelled on request"}, OutcomeCancelled)
	}
	if x.in.tokenErr != nil {
		// An over-limit payload was recorded without its bytes: never run
		// it, however the task came to be claimed.
		return x.failClaimed(ctx, x.in.tokenErr.Error())
	}
	if x.msg.ReceiveCount >= x.cfg.ReplaceAtReceiveCount {
		// A crash during this attempt would bring the message back once
		// more, perhaps past maxReceiveCount into the dead-letter queue.
		// Hand the task to a fresh token now, due when a takeover would be
		// possible, and delete this message.
		x.replace(ctx, x.cfg.LeaseDuration+x.cfg.VisibilityMargin, "")
	}
	h, ok := x.cfg.Handlers(x.task.Kind)
	if !ok {
		return x.unknownKind(ctx)
	}
	if st, held := x.holdForSlot(ctx); held {
		return st
	}
	if st, held := x.holdForRate(ctx); held {
		return st
	}
	x.running.handler = h
	results, err := x.loadWaitResults()
	if err != nil {
		return x.retryOrFail(ctx, err.Error(), x.cfg.Backoff(x.task.Attempt), OutcomeRetried)
	}
	x.flow.ctx.Start(x, x.task.LeaseOf(), x.task.Steps, x.task.WaitNote, results)

	// The handler's context: cancelled with a cause when the lease is lost,
	// the task is cancelled, or the invocation deadline draws near. It is
	// detached from shutdown of the invocation's context so that a graceful
	// stop lets a running handler finish within its own deadline.
	x.running.handlerParent = durable.Scope{Context: x.detached, Workflow: &x.flow.ctx}
	hctx, cancel := context.WithCancelCause(&x.running.handlerParent)
	x.running.handlerCtx, x.running.cancelHandler = hctx, cancel

	x.running.renewer = renewer{x: x, lease: x.task.LeaseOf()}
	x.running.renewer.trust(x.task.LeaseUntil)
	if x.running.vis != nil && !x.fate.replaced {
		x.running.vis.join(x)
	}
	// The renewer's goroutine (and its context) start at the first renewal,
	// from runRunning's wait, so a handler that returns before then (most
	// do) costs no goroutine and no wake-up for it.

	x.running.handlerDone = make(chan struct{})
	x.running.startedAt = x.cfg.Clock.Now()
	x.running.handlerStarted.Add(1)
	go x.runHandler()
	return StateRunning
}

// loadWaitResults reads the tasks a claimed task waited for, for its
// handler.
func (x *execution) loadWaitResults() (*durable.WaitResults, error) {
	t := x.task
	if len(t.WaitFor) == 0 || (t.Wait != lease.WaitChildren && t.Wait != lease.WaitAfter && t.Wait != lease.WaitAfterAny) {
		return nil, nil
	}
	if t.Wait == lease.WaitChildren {
		// The children of a named await whose outcomes are recorded (AllOf)
		// are not read again.
		rest, _ := strings.CutPrefix(t.WaitFor[0], t.ID+"/")
		name, _, _ := strings.Cut(rest, "/")
		_, all := t.StepResult("children:" + name)
		_, mapped := t.StepResult("map:" + name)
		if (all || mapped) && durable.CheckAwaitName(name) == nil && strings.HasPrefix(t.WaitFor[0], t.ID+"/"+name+"/") {
			return nil, nil
		}
	}
	tasks, err := readTasks(x.detached, x.cfg, t.WaitFor)
	if err != nil {
		return nil, fmt.Errorf("%w, which %s waited for", err, t.ID)
	}
	return &durable.WaitResults{Mode: t.Wait, Tasks: tasks}, nil
}

// readTasks reads the tasks ids: with the store's GetMany when it has one
// (one BatchGetItem call per 100 ids on DynamoDB, each under the store's
// call timeout), else one Get each under the call timeout. A task that does
// not exist (its record expired) has only its ID.
func readTasks(ctx context.Context, cfg *Config, ids []string) ([]lease.Task, error) {
	if mg := cfg.caps.many; mg != nil {
		out, err := mg.GetMany(ctx, ids)
		if err != nil {
			return nil, fmt.Errorf("read %d tasks: %w", len(ids), err)
		}
		return out, nil
	}
	out := make([]lease.Task, len(ids))
	for i, id := range ids {
		cctx, cancel := context.WithTimeout(ctx, cfg.CallTimeout)
		got, err := cfg.Store.Get(cctx, id)
		cancel()
		switch {
		case errors.Is(err, lease.ErrNotFound):
			got = lease.Task{ID: id}
		case err != nil:
			return nil, fmt.Errorf("read %s: %w", id, err)
		}
		out[i] = got
	}
	return out, nil
}

// runHandler is the handler's goroutine. It leaves the result in
// handlerResult and then closes handlerDone; nothing else touches
// handlerResult, so a handler abandoned at the deadline races with nobody.
// It reads x.task, x.running.handler and x.running.handlerCtx only before it marks
// handlerStarted done; none of them is written before that.
func (x *execution) runHandler() {
	h, ctx, task := x.running.handler, x.running.handlerCtx, x.task
	x.running.handlerStarted.Done()
	defer func() {
		if v := recover(); v != nil {
			x.running.handlerResult = handlerResult{err: &PanicError{Value: v, Stack: debug.Stack()}}
		}
		close(x.running.handlerDone)
	}()
	if x.trusted(ctx) != nil {
		x.running.handlerResult.err = errNotStarted
		return
	}
	x.running.handlerResult.result, x.running.handlerResult.err = h(ctx, task)
}

// unknownKind answers a claimed task whose kind has no handler here. The
// kind is not the task's fault: another fleet on the queue may know it (a
// rolling deploy, a second worker on a shared queue), or a worker for it may
// come. So the task is released without using an attempt, with the reason,
// and offered again after a wait that grows with the time since the kind was
// first found unknown. Only once the kind has stayed unknown for
// UnknownKindLimit does the task fail, so bad input is never retried for
// ever.
func (x *execution) unknownKind(ctx context.Context) State {
	now := x.cfg.Clock.Now()
	since := x.task.UnknownKindSince
	if since.IsZero() {
		since = now
	}
	unknownFor := now.Sub(since)
	if unknownFor >= x.cfg.UnknownKindLimit {
		reason := fmt.Sprintf("unknown task kind %q: no worker had a handler for it in %s (since %s)",
			x.task.Kind, x.cfg.UnknownKindLimit, since.UTC().Format(time.RFC3339))
		return x.failClaimed(ctx, reason)
	}
	wait := min(max(unknownFor, x.cfg.UnknownKindBackoffMin), x.cfg.UnknownKindBackoffMax)
	// Jitter within [wait/2, wait] (never below the minimum), so tasks
	// found unknown together do not come back together.
	if half := wait / 2; half > 0 {
		wait = max(half+rand.N(wait-half+1), min(x.cfg.UnknownKindBackoffMin, wait))
	}
	reason := fmt.Sprintf("unknown task kind %q: no handler on this worker; offered again in %s without using an attempt",
		x.task.Kind, wait.Round(time.Second))
	x.log.warn("no handler for the task's kind; task released without using an attempt",
		"reason", reason, "unknown_since", since, "retry_in", wait, "queue", x.task.Queue)
	x.result.Reason = reason
	return x.reschedule(ctx, lease.Release{
		Status: lease.StatusPending, RunAt: now.Add(wait), Error: reason, UnknownKind: true,
	}, OutcomeUnknownKind)
}

// runRunning waits for the handler, enforcing the deadline (seed:
// WorkerStarted). It starts the renewer at the first renewal; the renewer
// runs alongside and cancels the handler's context itself when the lease is
// lost or cancellation is requested.
//
// One timer, from the Executor's pool, wakes the wait for whichever comes
// first of the renewer's start, the deadline and, past the deadline, the end
// of the handler's grace.
func (x *execution) runRunning(ctx context.Context) State {
	clock := x.cfg.Clock
	renewAt := x.running.renewer.firstRenewal()
	var deadline, graceUntil time.Time // zero: none, or not yet
	if dl, ok := ctx.Deadline(); ok {  // the invocation's deadline, as runClaimed saw it
		deadline = dl.Add(-x.cfg.DeadlineMargin)
	}
	var (
		timer       clockwork.Timer
		stopRenewer context.CancelFunc // set once the renewer runs
	)
wait:
	for {
		// The next moment to wake at, if any.
		var next time.Time
		if stopRenewer == nil {
			next = renewAt
		}
		if graceUntil.IsZero() && !deadline.IsZero() && (next.IsZero() || deadline.Before(next)) {
			next = deadline
		}
		if !graceUntil.IsZero() && (next.IsZero() || graceUntil.Before(next)) {
			next = graceUntil
		}
		var wake <-chan time.Time
		if !next.IsZero() {
			timer = x.armTimer(timer, max(clock.Until(next), 0))
			wake = timer.Chan()
		}
		select {
		case <-x.running.handlerDone:
			x.running.finished = true
			break wait
		case <-wake:
		}
		now := clock.Now()
		if now.Before(next) {
			// The timer ran its course (it counts on the monotonic clock):
			// what it was armed for is due, even if the wall clock was set
			// back meanwhile.
			now = next
		}
		if stopRenewer == nil && !now.Before(renewAt) {
			var rctx context.Context
			rctx, stopRenewer = context.WithCancel(x.detached)
			x.running.renewerRunning.Add(1)
			go func() {
				defer x.running.renewerRunning.Done()
				x.running.renewer.run(rctx)
			}()
		}
		switch {
		case graceUntil.IsZero() && !deadline.IsZero() && !now.Before(deadline):
			x.running.cancelHandler(ErrDeadline)
			// Give the handler half the margin to wind down, then move on
			// without it: its writes are fenced, so it can do no harm.
			graceUntil = now.Add(x.cfg.DeadlineMargin / 2)
		case !graceUntil.IsZero() && !now.Before(graceUntil):
			x.log.warn("handler ignored its cancelled context; abandoning it")
			x.running.handlerStarted.Wait() // it no longer reads x.task
			break wait
		}
	}
	if timer != nil {
		x.releaseTimer(timer)
	}
	x.running.handlerTime = clock.Since(x.running.startedAt)
	x.running.cause = context.Cause(x.running.handlerCtx)
	// Stop and join the renewer before the outcome is written: a renewal
	// racing the finish write would only fail harmlessly, but a joined
	// renewer keeps every goroutine owned by this invocation.
	if stopRenewer != nil {
		stopRenewer()
		x.running.renewerRunning.Wait()
	}
	if x.running.vis != nil {
		x.running.vis.leave(x) // waits for a batch call still extending the message
	}
	x.running.cancelHandler(context.Canceled)
	return StateFinishing
}

// armTimer sets t (nil: one from the pool, or a new one) to fire after d,
// with no earlier expiry left in its channel, and returns it.
func (x *execution) armTimer(t clockwork.Timer, d time.Duration) clockwork.Timer {
	if t == nil {
		if pooled, ok := x.running.timers.Get().(clockwork.Timer); ok {
			t = pooled
		} else {
			return x.cfg.Clock.NewTimer(d)
		}
	}
	stopTimer(t)
	t.Reset(d)
	return t
}

// releaseTimer stops t and returns it to the pool. Only runRunning's wait
// uses it, and that has ended.
func (x *execution) releaseTimer(t clockwork.Timer) {
	stopTimer(t)
	x.running.timers.Put(t)
}

// stopTimer stops t and drops an expiry left unread in its channel (a fake
// clock's timer keeps one; Go's own keep none since Go 1.23).
func stopTimer(t clockwork.Timer) {
	if !t.Stop() {
		select {
		case <-t.Chan():
		default:
		}
	}
}

// leaseGone reports whether the renewer learnt for certain that the lease is
// someone else's (as opposed to merely unconfirmed).
func (x *execution) leaseGone() bool {
	var lost *lostError
	return errors.As(context.Cause(x.running.handlerCtx), &lost) && lost.definite
}

// Checkpoint records a step of the running handler under this attempt's
// lease (durable.Attempt), in StateStepping.
func (x *execution) Checkpoint(ctx context.Context, l lease.Lease, name string, result []byte) (lease.Task, error) {
	stepping(true)
	defer stepping(false)
	cctx, cancel := context.WithTimeout(ctx, x.cfg.CallTimeout)
	defer cancel()
	return x.cfg.Store.Checkpoint(cctx, l, name, result)
}

// ReadTasks reads the tasks ids for the running handler (durable.Attempt).
func (x *execution) ReadTasks(ctx context.Context, ids []string) ([]lease.Task, error) {
	return readTasks(ctx, x.cfg, ids)
}

// Clock is the worker's clock (durable.Attempt).
func (x *execution) Clock() clockwork.Clock { return x.cfg.Clock }

// Tracer is the worker's tracer, nil for none (durable.Attempt).
func (x *execution) Tracer() trace.Tracer { return x.cfg.Tracer }

// Trusted is trusted, for the running handler's steps (durable.Attempt).
func (x *execution) Trusted(ctx context.Context) error { return x.trusted(ctx) }
