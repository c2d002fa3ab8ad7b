package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/jonboulle/clockwork"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold/internal/claimcheck"
	"github.com/leasehold/leasehold/internal/durable"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/mapstate"
)

// StateClaimed and StateRunning: the handler and the renewer start, and the
// loop waits for the handler; the executor's side of the durable calls
// (durable.Attempt) is here too.

// runClaimed starts the handler and the renewer (seed: TaskClaimed).
func (x *execution) runClaimed(ctx context.Context) State {
	x.log.claimed, x.log.attempt, x.log.fence = true, int32(x.task.Attempt), x.task.Fence
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
	if claimcheck.IsRef(x.task.Payload) {
		// A payload over the inline limit, in the payload bucket: read
		// back before the handler runs. A failed read is an attempt's
		// failure, so a bucket that stays unreadable ends in FAILED.
		payload, err := x.fetch(x.task.ID, x.task.Payload)
		if err != nil {
			return x.retryOrFail(ctx, "payload: "+err.Error(), x.cfg.Backoff(x.task.Attempt), OutcomeRetried)
		}
		x.task.Payload = payload
	}
	x.cancelLosingKids(ctx)
	results, err := x.loadWaitResults()
	if err != nil {
		return x.retryOrFail(ctx, err.Error(), x.cfg.Backoff(x.task.Attempt), OutcomeRetried)
	}
	if err := x.startWorkflow(ctx, results); err != nil {
		return x.retryOrFail(ctx, err.Error(), x.cfg.Backoff(x.task.Attempt), OutcomeRetried)
	}

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
	if dl, ok := ctx.Deadline(); ok {
		ms := dl.Add(-x.cfg.DeadlineMargin).Sub(x.running.startedAt).Milliseconds()
		x.running.deadlineMS = int32(min(max(ms, 1), math.MaxInt32))
	}
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
		// The children of a named await whose outcomes are recorded (durable.AllOf)
		// are not read again.
		if name := durable.AwaitNameOf(t.ID, t.WaitFor[0]); name != "" {
			_, all := t.StepResult("children:" + name)
			_, mapped := t.StepResult("map:" + name)
			if all || mapped {
				return nil, nil
			}
		}
	}
	if _, ok := mapstate.WaitedMap(t); ok {
		// A sliding map's parent waits for its wake id, which no task
		// has: what a read would return, without the read.
		return &durable.WaitResults{Mode: t.Wait, Tasks: []lease.Task{{ID: t.WaitFor[0]}}}, nil
	}
	tasks, err := readTasks(x.detached, x.cfg, t.WaitFor)
	if err != nil {
		return nil, fmt.Errorf("%w, which %s waited for", err, t.ID)
	}
	// Children's outcomes become a step of the parent (workflow.All), which
	// keeps their references; durable reads them back for the handler.
	for i := range tasks {
		if t.Wait == lease.WaitChildren {
			break
		}
		if tasks[i].Result, err = x.fetch(tasks[i].ID, tasks[i].Result); err != nil {
			return nil, fmt.Errorf("result of %s, which %s waited for: %w", tasks[i].ID, t.ID, err)
		}
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

// fetch is v, a value of task id, read back from the payload bucket when it
// is a reference there, else v itself, with no call. A reference to
// another task's value (a forged inline token) is refused unread.
func (x *execution) fetch(id string, v []byte) ([]byte, error) {
	if !claimcheck.IsRef(v) {
		return v, nil
	}
	return x.cfg.Claims.FetchOwn(x.detached, id, v)
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
	// The handler's branches (workflow.Go, Parallel) end before its run:
	// none records under an attempt whose run is over.
	defer x.flow.ctx.Join()
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
func (x *execution) Checkpoint(ctx context.Context, l lease.Lease, st lease.Step) (lease.Task, error) {
	stepping(true)
	defer stepping(false)
	cctx, cancel := context.WithTimeout(ctx, x.cfg.CallTimeout)
	defer cancel()
	return x.cfg.Store.Checkpoint(cctx, l, st)
}

// StowStep keeps the result of the step at position n in the payload
// bucket (durable.Stower); ok is false without a bucket.
func (x *execution) StowStep(ctx context.Context, n int, out []byte) ([]byte, bool, error) {
	if !x.cfg.Claims.Enabled() {
		return nil, false, nil
	}
	ref, err := x.cfg.Claims.Stow(ctx, x.task.ID, claimcheck.WhatStep(n), out, 0)
	return ref, true, err
}

// FetchOf reads back a value of task id kept in the payload bucket
// (durable.Stower), only under that task's own prefix.
func (x *execution) FetchOf(ctx context.Context, id string, ref []byte) ([]byte, error) {
	return x.cfg.Claims.FetchOwn(ctx, id, ref)
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

// The renewer, which runs alongside the handler in StateRunning.

// lostError is the cause the renewer cancels a handler with. It matches
// ErrLeaseLost. definite tells a lease known to be gone (another claim,
// release or finish) from one merely not confirmed in time.
type lostError struct {
	definite bool
	err      error
}

func (e *lostError) Error() string {
	if e.definite {
		return "lease lost: " + e.err.Error()
	}
	return "lease lost: not renewed before it expired: " + e.err.Error()
}

func (e *lostError) Is(target error) bool { return target == ErrLeaseLost }

func (e *lostError) Unwrap() error { return e.err }

// renewer keeps the lease and the message's visibility alive while the
// handler runs. It is owned by its execution, which stops and joins it before
// writing the outcome.
type renewer struct {
	x     *execution
	lease lease.Lease
	// trustUntil is when this worker stops trusting the lease: the moment
	// the last successful renewal was sent plus the lease duration. The
	// store stamped the lease from a clock reading taken after that, and a
	// takeover waits another skew bound on top, so the handler is always
	// stopped before anyone else can hold the task.
	trustUntil time.Time
	// trusted is trustUntil in Unix nanoseconds, for the handler's
	// goroutine (execution.trusted), which reads it while this writes it.
	// Both are set only by trust.
	trusted atomic.Int64
}

// trust sets when this worker stops trusting its lease.
func (r *renewer) trust(until time.Time) {
	r.trustUntil = until
	r.trusted.Store(until.UnixNano())
}

// retryInterval is how soon a failed renewal is tried again.
func (r *renewer) retryInterval() time.Duration {
	return max(r.x.cfg.RenewBefore/4, 100*time.Millisecond)
}

// firstRenewal is when the first renewal is due.
func (r *renewer) firstRenewal() time.Time {
	return r.trustUntil.Add(-r.x.cfg.RenewBefore)
}

// trusted returns nil while this worker may still trust its lease by its
// own clock, and otherwise the cause it cancels the handler with (ctx is
// the handler's context). A process paused after its claim or between two
// renewals (a long stop of the world, SIGSTOP) wakes up with its lease
// possibly taken over; the renewer notices at its next timer, but the
// handler's goroutine may run first. So a handler is not started, and no
// step's function called, on a lease that has run out.
//
// Other ends of the handler's context (the deadline, a cancellation
// request) are the handler's to see, as before.
func (x *execution) trusted(ctx context.Context) error {
	if cause := context.Cause(ctx); errors.Is(cause, ErrLeaseLost) {
		return cause
	}
	if x.cfg.Clock.Now().UnixNano() < x.running.renewer.trusted.Load() {
		return nil
	}
	err := &lostError{err: errPausedPastLease}
	x.running.cancelHandler(err)
	return err
}

var (
	// errPausedPastLease is the trusted lease that ran out before the
	// handler or a step began.
	errPausedPastLease = errors.New("it ran out before the handler or a step could start (was the process paused?)")
	// errNotStarted is the result of a handler that was not started
	// because the lease had run out (runHandler).
	errNotStarted = fmt.Errorf("handler not started: %w", &lostError{err: errPausedPastLease})
)

// run renews from the first renewal on, until ctx is done or the lease is
// lost. runClaimed arms a timer that starts it at firstRenewal: a handler
// that returns before then never has a renewer goroutine.
func (r *renewer) run(ctx context.Context) {
	cfg := r.x.cfg
	for {
		if ctx.Err() != nil {
			return
		}
		now := cfg.Clock.Now()
		if !now.Before(r.trustUntil) {
			r.x.running.cancelHandler(&lostError{err: errors.New("renewals kept failing")})
			r.x.log.warn("lease expired locally before a renewal landed; handler cancelled")
			return
		}
		var next time.Time
		err := r.renew(ctx, now)
		switch {
		case err == nil:
			next = r.trustUntil.Add(-cfg.RenewBefore)
		case errors.Is(err, lease.ErrLeaseLost), errors.Is(err, lease.ErrNotFound):
			r.x.running.cancelHandler(&lostError{definite: true, err: err})
			r.x.log.warn("lease lost; handler cancelled", "error", err)
			return
		case ctx.Err() != nil:
			return
		default:
			r.x.log.warn("lease renewal failed; will retry", "error", err)
			next = now.Add(r.retryInterval())
		}
		wait := min(cfg.Clock.Until(next), cfg.Clock.Until(r.trustUntil))
		t := cfg.Clock.NewTimer(max(wait, 0))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.Chan():
		}
	}
}

// renew extends the lease, then the message's visibility, and passes a
// cancellation request on to the handler.
func (r *renewer) renew(ctx context.Context, sent time.Time) error {
	cfg := r.x.cfg
	// The call may not outlive the lease it is trying to keep.
	budget := min(cfg.CallTimeout, r.trustUntil.Sub(sent))
	cctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	cctx, span := r.x.startSpan(cctx, "leasehold.renew")
	task, err := cfg.Store.Renew(cctx, r.lease)
	endSpan(span, err)
	if err != nil {
		return err
	}
	r.trust(sent.Add(cfg.LeaseDuration))
	r.lease.Until = task.LeaseUntil
	if task.CancelRequested && r.x.running.handlerCtx.Err() == nil { // once: cancelled, it stays so
		r.x.log.info("cancellation requested; handler cancelled")
		r.x.running.cancelHandler(ErrCancelRequested)
	}
	if r.x.fate.replaced {
		return nil // the message is gone; a fresh token stands for the task
	}
	var verr error
	if r.x.running.vis != nil {
		verr = r.x.running.vis.extend(ctx, r.x)
	} else {
		vctx, vcancel := context.WithTimeout(ctx, cfg.CallTimeout)
		_, verr = cfg.SQS.ChangeMessageVisibility(vctx, &sqs.ChangeMessageVisibilityInput{
			QueueUrl:          aws.String(r.x.msgQueueURL()),
			ReceiptHandle:     aws.String(r.x.msg.ReceiptHandle),
			VisibilityTimeout: visibilitySeconds(cfg.LeaseDuration + cfg.VisibilityMargin),
		})
		vcancel()
	}
	if verr != nil && ctx.Err() == nil {
		// The lease, not the message, is what guards the task; a message
		// that reappears early meets a live lease and is hidden again. (A
		// renewer stopped mid-call has nothing to report.)
		r.x.log.warn("could not extend message visibility", "error", verr)
	}
	return nil
}
