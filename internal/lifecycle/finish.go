package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"

	"github.com/leasehold/leasehold/internal/claimcheck"
	"github.com/leasehold/leasehold/internal/durable"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/queues"
	"github.com/leasehold/leasehold/internal/token"
	"github.com/leasehold/leasehold/internal/tracing"
)

// StateFinishing: the handler's outcome is written under the lease.

// runFinishing records the outcome (seed: WorkerFinishedProcessing).
func (x *execution) runFinishing(ctx context.Context) State {
	var res handlerResult // (zero for a handler abandoned at the deadline)
	if x.running.finished {
		res = x.running.handlerResult
	}
	cause := x.running.cause
	elapsed := x.running.handlerTime
	x.log.timed, x.log.durationMS = true, elapsed.Milliseconds()
	switch {
	case errors.Is(cause, ErrLeaseLost) && x.leaseGone():
		x.log.warn("lease lost; the result of this attempt is discarded")
		x.observe(OutcomeLeaseLost, elapsed)
		return x.lost(ctx, cause)
	case x.running.finished && x.flow.ctx.Diverged() != nil:
		// Whatever the handler returned after a durable call diverged
		// (its error, or success if it dropped it): its task is held.
		return x.hold(ctx, x.flow.ctx.Diverged())
	case x.running.finished && res.err == nil && x.flow.ctx.Unreplayed() != nil:
		// Success before the run called every recorded operation: the
		// code left out what the code that recorded them asked for.
		return x.hold(ctx, x.flow.ctx.Unreplayed())
	case x.running.finished && res.err == nil && x.flow.ctx.UnreturnedWait() != "":
		// A wait asked for and not returned: the handler went on past it,
		// so its success is not the workflow's. A programming error, which
		// every retry would repeat: the task fails, saying which wait.
		msg := fmt.Sprintf("the handler returned success after %s asked the task to wait: return the error the wait returned (the task then waits, and its handler runs again when the wait is over)", x.flow.ctx.UnreturnedWait())
		return x.release(ctx, lease.Release{Status: lease.StatusFailed, Error: msg}, OutcomeFailed)
	case x.running.finished && res.err == nil:
		return x.finish(ctx, res.result, elapsed)
	case errors.Is(cause, ErrCancelRequested):
		return x.release(ctx, lease.Release{Status: lease.StatusCancelled, Error: "cancelled on request"}, OutcomeCancelled)
	case errors.Is(cause, ErrDeadline):
		x.flushDerived()
		return x.retryOrFail(ctx, "invocation deadline reached before the handler finished", 0, OutcomeReleased)
	case res.err == errNotStarted:
		// Nothing ran. The release is fenced: if another worker holds the
		// task now, it fails and the lost lease is handled as any other.
		return x.retryOrFail(ctx, errNotStarted.Error(), 0, OutcomeReleased)
	}
	err := res.err
	if cont := (*durable.ContinueError)(nil); errors.As(err, &cont) {
		return x.continueAsNew(ctx, cont)
	}
	steer, delay := SteerOf(err)
	if steer != SteerCancel && steer != SteerFail {
		// The task goes on: a later run replays what this one derived.
		x.flushDerived()
	}
	var (
		children *durable.AwaitChildrenError
		callback *durable.AwaitCallbackError
	)
	switch {
	case errors.As(err, &children):
		x.flow.children = children
		return StateSpawning
	case errors.As(err, &callback):
		x.flow.callback = callback
		return StateAwaitingCallback
	}
	switch steer {
	case SteerSnooze:
		runAt := x.cfg.Clock.Now().Add(delay)
		return x.reschedule(ctx, lease.Release{Status: lease.StatusPending, RunAt: runAt, Error: err.Error(), RefundAttempt: true}, OutcomeSnoozed)
	case SteerCancel:
		return x.release(ctx, lease.Release{Status: lease.StatusCancelled, Error: err.Error()}, OutcomeCancelled)
	case SteerFail:
		return x.release(ctx, lease.Release{Status: lease.StatusFailed, Error: err.Error()}, OutcomeFailed)
	}
	var panicked *PanicError
	if errors.As(err, &panicked) {
		x.log.error("handler panicked", "panic", fmt.Sprint(panicked.Value), "stack", string(panicked.Stack))
	}
	return x.retryOrFail(ctx, err.Error(), x.cfg.Backoff(x.task.Attempt), OutcomeRetried)
}

// Holding a diverged workflow: the first check again after
// MinDivergedHold, doubling with each hold up to MaxDivergedHold, so that a
// rollback lets held tasks go on within the hour and a task held for days
// costs a claim and a release an hour.
const (
	MinDivergedHold = time.Minute
	MaxDivergedHold = time.Hour
)

// heldCheck reads the number of a held task's last check from its error.
var heldCheck = regexp.MustCompile(`; check (\d+) of the hold, the next at `)

// hold releases a task whose run diverged from its history: PENDING, its
// attempt handed back, with the divergence as its error, checked again
// after a backoff. The run stopped at the divergence, before any side
// effect of the code that diverged; what it derived is left unrecorded.
func (x *execution) hold(ctx context.Context, d *durable.DivergedError) State {
	// The task's error counts its checks while held: the n-th waits
	// MinDivergedHold<<(n-1), at most MaxDivergedHold.
	check := 1
	if m := heldCheck.FindStringSubmatch(x.task.Error); m != nil && strings.HasPrefix(x.task.Error, "held: diverged") {
		if n, err := strconv.Atoi(m[1]); err == nil && n > 0 {
			check = n + 1
		}
	}
	delay := MaxDivergedHold
	if check <= 6 {
		delay = min(MinDivergedHold<<(check-1), MaxDivergedHold)
	}
	runAt := x.cfg.Clock.Now().Add(delay)
	x.log.warn("workflow diverged from its history: held", "position", d.Position, "recorded", d.Recorded, "asked", d.Asked, "check", check, "again_in", delay.String())
	msg := fmt.Sprintf("held: %s; check %d of the hold, the next at %s (deploy code that matches the history, or guard the change with workflow.Version)", d.Error(), check, runAt.UTC().Format(time.RFC3339))
	return x.reschedule(ctx, lease.Release{Status: lease.StatusPending, RunAt: runAt, Error: msg, RefundAttempt: true}, OutcomeDiverged)
}

// flushDerived writes the steps the run derived from its wait and left
// unrecorded (durable.Workflow.Flush), before an ending that lets a later
// run replay them. A failure is logged and the ending goes on: while the
// wait stands a later run derives them again, and a lost lease fails the
// ending's write too.
func (x *execution) flushDerived() {
	if err := x.flow.ctx.Flush(x.detached); err != nil {
		x.log.warn("could not record the outcomes the run read", "error", err)
	}
}

func (x *execution) finish(ctx context.Context, result []byte, elapsed time.Duration) State {
	// A result the store cannot keep will never be kept: fail the task now
	// with the reason instead of re-running the handler until its lease
	// runs out.
	if len(result) > lease.MaxResultBytes && x.cfg.Claims.Enabled() {
		// Over the inline limit: checked whole, then kept in the payload
		// bucket and referenced from the item.
		if err := checkResult(result, claimcheck.MaxValueBytes); err != nil {
			return x.failClaimed(ctx, err.Error())
		}
		ref, err := x.cfg.Claims.Stow(ctx, x.task.ID, claimcheck.WhatResult, result, lease.MaxResultBytes)
		if err != nil {
			x.log.error("could not store the result in the payload bucket", "error", err)
			return x.keep(ctx, 0, err.Error())
		}
		result = ref
	}
	if err := checkResult(result, lease.MaxResultBytes); err != nil {
		return x.failClaimed(ctx, err.Error())
	}
	task, err := x.leaseWrite(lease.StatusSucceeded, "finish response lost; the retried write met this execution's own result",
		func(ctx context.Context, l lease.Lease) (lease.Task, error) {
			return x.cfg.Store.Finish(ctx, l, result)
		})
	switch {
	case err == nil:
		x.record(task, OutcomeSucceeded, elapsed)
		// DEBUG: a success is the common case, and its metrics line
		// (Observer) already names the task, attempt and outcome.
		x.log.debug("task succeeded")
		return x.ended(true, "")
	case errors.Is(err, lease.ErrLeaseLost), errors.Is(err, lease.ErrNotFound):
		x.log.warn("finished, but the lease was lost; another worker took over", "error", err)
		x.observe(OutcomeLeaseLost, elapsed)
		return x.lost(ctx, err)
	case errors.Is(err, lease.ErrInvalid):
		return x.failClaimed(ctx, err.Error())
	default:
		// The result could not be stored. Keep the token: the task will be
		// taken over once the lease expires.
		x.log.error("could not record result", "error", err)
		return x.keep(ctx, 0, err.Error())
	}
}

// checkResult is the store's check of a result plus JSON validity: a result
// is a JSON document (empty means none) of at most limit bytes.
func checkResult(result []byte, limit int) error {
	switch {
	case len(result) > limit:
		return fmt.Errorf("result cannot be stored: %w", &lease.TooLargeError{What: "result", Size: len(result), Limit: limit})
	case len(result) > lease.MaxResultBytes && !utf8.Valid(result):
		return fmt.Errorf("result cannot be stored: %w: result is not UTF-8 text", lease.ErrInvalid)
	case len(result) <= lease.MaxResultBytes:
		if err := lease.CheckResult(result); err != nil {
			return fmt.Errorf("result cannot be stored: %w", err)
		}
	}
	if len(result) > 0 {
		if p := lease.JSONProblem(result); p != "" {
			if p != lease.TooDeep {
				p = "is not a JSON document"
			}
			return fmt.Errorf("result cannot be stored: %w: result %s", lease.ErrInvalid, p)
		}
	}
	return nil
}

// leaseWrite makes write, a write of status under the task's lease, within
// one call's time. A write whose response was lost, met by the SDK's retry
// (ownWriteLanded), has landed: leaseWrite returns the item the retry saw
// and no error, and logs landed, if it is not empty.
func (x *execution) leaseWrite(status lease.Status, landed string, write func(ctx context.Context, l lease.Lease) (lease.Task, error)) (lease.Task, error) {
	cctx, cancel := x.call()
	defer cancel()
	cctx, span := x.startSpan(cctx, "leasehold.finish")
	if span != nil {
		span.SetAttributes(attribute.String(tracing.AttrStatus, string(status)))
	}
	l := x.task.LeaseOf()
	task, err := write(cctx, l)
	endSpan(span, err)
	if obs, ok := ownWriteLanded(err, l, status); ok {
		if landed != "" {
			x.log.info(landed)
		}
		return obs, nil
	}
	return task, err
}

// ownWriteLanded reports whether err, from a write of status under l, says
// the lease was lost only because the write had already landed: the SDK's
// retry met this execution's own write. It returns the item the failed write
// saw.
func ownWriteLanded(err error, l lease.Lease, status lease.Status) (lease.Task, bool) {
	if err == nil || !errors.Is(err, lease.ErrLeaseLost) {
		return lease.Task{}, false // (and no allocation for a nil error)
	}
	obs, ok := lease.Observed(err)
	return obs, ok && lease.Landed(l, status, obs)
}

// leaseWriteFailed answers a write under the lease that failed with err:
// a lease that is gone (lost, after logging gone), or any other failure,
// which keeps the message (after logging failed).
func (x *execution) leaseWriteFailed(ctx context.Context, err error, gone, failed string) State {
	if errors.Is(err, lease.ErrLeaseLost) || errors.Is(err, lease.ErrNotFound) {
		x.log.warn(gone, "error", err)
		return x.lost(ctx, err)
	}
	x.log.error(failed, "error", err)
	return x.keep(ctx, 0, err.Error())
}

// retryOrFail schedules another attempt after delay, or fails the task when
// it has no attempts left.
func (x *execution) retryOrFail(ctx context.Context, msg string, delay time.Duration, outcome Outcome) State {
	if x.task.Attempt >= x.task.MaxAttempts {
		return x.release(ctx, lease.Release{Status: lease.StatusFailed, Error: msg}, OutcomeFailed)
	}
	runAt := x.cfg.Clock.Now().Add(delay)
	return x.reschedule(ctx, lease.Release{Status: lease.StatusPending, RunAt: runAt, Error: msg}, outcome)
}

// reschedule releases the task to PENDING and arranges its next dispatch: a
// fresh delayed token when SQS can hold the wait, else the sweeper. Sending a
// fresh token keeps retries from burning the queue's maxReceiveCount.
func (x *execution) reschedule(ctx context.Context, r lease.Release, outcome Outcome) State {
	wait := x.cfg.Clock.Until(r.RunAt)
	if wait > MaxSQSDelay {
		r.DispatchAt = r.RunAt
	}
	st := x.release(ctx, r, outcome)
	if !x.result.Ack || wait > MaxSQSDelay || x.fate.replaced || x.task.Status.Terminal() {
		// (A token sent at the claim already stands for the task; arriving
		// early, it is sent again with the time still to wait.)
		return st
	}
	if err := x.send(ctx, token.RefWith(x.task.ID, x.carry(nil)), wait); err != nil {
		if errors.Is(err, queues.ErrNotFound) {
			// The task's queue is gone. The task is PENDING in the sweep
			// index, which dispatches it once the queue exists again;
			// this message is done with.
			return x.exit(true, err.Error())
		}
		// The task is safe in the table; let this message come back and
		// redo the dispatch, with the sweeper as the last resort.
		return x.exit(false, err.Error())
	}
	return st
}

// release gives the lease up as r says.
func (x *execution) release(ctx context.Context, r lease.Release, outcome Outcome) State {
	task, err := x.leaseWrite(r.Status, "release response lost; the retried write met this execution's own release",
		func(ctx context.Context, l lease.Lease) (lease.Task, error) { return x.cfg.Store.Release(ctx, l, r) })
	if err != nil {
		return x.leaseWriteFailed(ctx, err, "could not release: lease already lost", "could not release lease")
	}
	if task.Status == lease.StatusPending && task.CancelRequested {
		if ended, ok := x.cancelFlagged(task); ok {
			task, outcome = ended, OutcomeCancelled
		}
	}
	x.record(task, outcome, x.running.handlerTime)
	x.log.info("task released", "outcome", string(outcome), "status", string(task.Status), "error", r.Error)
	return x.ended(true, "")
}

// failClaimed fails a task this execution holds without running it.
func (x *execution) failClaimed(ctx context.Context, reason string) State {
	x.log.warn("task rejected", "reason", reason)
	st := x.release(ctx, lease.Release{Status: lease.StatusFailed, Error: reason}, OutcomeFailed)
	x.result.Reason = reason
	x.fate.failReason = reason
	return st
}

// record takes task, as the write that settled this message left it, and
// outcome, how the message ended, and reports them to the Observer (d: how
// long the handler ran).
func (x *execution) record(task lease.Task, outcome Outcome, d time.Duration) {
	x.task = task
	x.result.Outcome = outcome
	x.observe(outcome, d)
}

func (x *execution) observe(o Outcome, d time.Duration) {
	if x.cfg.Observer == nil {
		return
	}
	e := Ended{Task: x.task, Outcome: o, HandlerTime: d}
	if x.claimed.hasClaim {
		e.Claim = &x.claimed.claimInfo
	}
	x.cfg.Observer.Ended(e)
}

// continueAsNew ends the run of a workflow whose handler returned
// workflow.ContinueAsNew: its history is archived (ArchiveRun, with the
// steps this run derived and did not write), then the task is released as
// its next run, due now, with the new input and no history. A retried
// continue (the release's answer lost, or the lease lost between the two
// writes) archives the same run again under its own fence.
func (x *execution) continueAsNew(ctx context.Context, c *durable.ContinueError) State {
	arch := x.cfg.caps.runs
	if arch == nil {
		return x.release(ctx, lease.Release{Status: lease.StatusFailed, Error: fmt.Sprintf("continue as new: the store (%T) does not keep archived runs", x.cfg.Store)}, OutcomeFailed)
	}
	run := x.task
	if !run.Spilled {
		// The run's whole history, with what it derived and did not
		// write; a spilled one keeps its frozen head, and its tail stays
		// where the run wrote it (Task.TailID reads it for the archive).
		run.Steps = x.flow.ctx.Steps()
	}
	if id := lease.RunID(run.ID, int(run.Run)+1); lease.CheckID(id) != nil {
		// (The next run's archive id, the longer: its tail is kept under it.)
		return x.release(ctx, lease.Release{Status: lease.StatusFailed, Error: fmt.Sprintf("continue as new: the archived run's id: %v (a task id that continues as new must leave room for @runN)", lease.CheckID(id))}, OutcomeFailed)
	}
	input, st, ok := x.continueInput(ctx, c.Payload)
	if !ok {
		return st
	}
	cctx, cancel := context.WithTimeout(x.detached, x.cfg.CallTimeout)
	_, err := arch.ArchiveRun(cctx, x.task.LeaseOf(), run)
	cancel()
	switch {
	case errors.Is(err, lease.ErrConflict):
		return x.release(ctx, lease.Release{Status: lease.StatusFailed, Error: "continue as new: " + err.Error()}, OutcomeFailed)
	case err != nil:
		return x.retryOrFail(ctx, "continue as new: could not archive the run: "+err.Error(), x.cfg.Backoff(x.task.Attempt), OutcomeRetried)
	}
	return x.reschedule(ctx, lease.Release{
		Status: lease.StatusPending, RunAt: x.cfg.Clock.Now(),
		Error:    fmt.Sprintf("continued as new: run %d; run %d is %s", run.Run+2, run.Run+1, lease.RunID(run.ID, int(run.Run))),
		Continue: input,
	}, OutcomeSnoozed)
}

// continueInput is the next run's input as the task's item keeps it: the
// payload itself within the inline limit, else a reference to it in the
// payload bucket (claimcheck, under the task's own prefix, as an enqueued
// payload is: its worker reads it back before the handler runs). Without a
// bucket the task fails with the inline limit, as an enqueue is refused;
// ok false gives the state the task went to.
func (x *execution) continueInput(ctx context.Context, payload []byte) (input []byte, st State, ok bool) {
	if len(payload) <= lease.MaxPayloadBytes {
		return payload, 0, true
	}
	if !x.cfg.Claims.Enabled() {
		tl := &lease.TooLargeError{What: "payload", Size: len(payload), Limit: lease.MaxPayloadBytes}
		return nil, x.release(ctx, lease.Release{Status: lease.StatusFailed, Error: "continue as new: " + tl.Error()}, OutcomeFailed), false
	}
	cctx, cancel := context.WithTimeout(x.detached, x.cfg.CallTimeout)
	defer cancel()
	ref, err := x.cfg.Claims.Stow(cctx, x.task.ID, claimcheck.WhatPayload, payload, lease.MaxPayloadBytes)
	if err != nil {
		return nil, x.retryOrFail(ctx, "continue as new: "+err.Error(), x.cfg.Backoff(x.task.Attempt), OutcomeRetried), false
	}
	return ref, 0, true
}
