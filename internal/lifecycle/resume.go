package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/internal/durable"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/query"
	"github.com/leasehold/leasehold/internal/token"
)

// StateResuming: a token whose task is WAITING resumes and claims it when
// its wait is over, or ends the wait at its deadline or on a cancel.

// runResuming answers a token whose task is WAITING (x.task, as read).
func (x *execution) runResuming(ctx context.Context) State {
	t := x.task
	x.log.kind = t.Kind
	if t.CancelRequested {
		// Flagged while running, then suspended (its worker stopped before
		// ending the wait): finish the cancel.
		return x.endWaiting(ctx, t, lease.StatusCancelled, CancelledOnRequest)
	}
	now := x.cfg.Clock.Now()
	if kidEndedWait(t) {
		// A child raced against the callback ended, perhaps before the
		// suspension, and its notification did not end the wait.
		switch won, err := x.kidWon(ctx, t); {
		case err != nil:
			return x.keep(ctx, 0, err.Error())
		case won:
			return x.raceKidEnded(ctx, t)
		}
	}
	switch {
	case t.Wait == lease.WaitCallback && !now.Before(callbackDeadline(t)):
		return x.callbackTimedOut(ctx, t)
	case t.Wait == lease.WaitCallback && t.HeartbeatTimeout > 0:
		return x.heartbeatCheck(ctx, t, now)
	case t.Wait == lease.WaitCallback:
		return x.earlyCallbackToken(ctx, t, now)
	case lease.Complete(t):
		// Its wait is over (the last ending sent a wake token, or this is
		// another token of the task): resume and claim in one write.
		cctx, cancel := x.call()
		cctx, span := x.startSpan(cctx, "leasehold.claim")
		task, err := x.cfg.Store.Resume(cctx, t.ID, t.Fence, x.owner())
		endSpan(span, err)
		cancel()
		switch {
		case err == nil:
			x.task, x.claimed.resumed = task, true
			return StateClaimed
		case errors.Is(err, lease.ErrNotWaiting):
			// Another token's worker resumed it first, or it left WAITING
			// otherwise (its callback's timeout made it PENDING, say):
			// claim it if it can be claimed.
			return x.claim(ctx, t.ID)
		case errors.Is(err, lease.ErrFinished):
			// Ended since it was read: its waiters may not have heard.
			if st, ok := x.endedElsewhere(err, ""); ok {
				return st
			}
			return x.exit(true, "")
		case errors.Is(err, lease.ErrAttemptsExhausted):
			return x.exit(true, "")
		}
		return x.keep(ctx, 0, err.Error())
	case t.Wait == lease.WaitChildren && durable.RaceNote(t.WaitNote).Timer() && !t.WaitUntil.IsZero() && !now.Before(t.WaitUntil):
		return x.childTimerFired(ctx, t, durable.TimerFired)
	case !t.WaitUntil.IsZero() && !now.Before(t.WaitUntil) && dependencyWait(t):
		return x.dependencyDeadline(ctx, t)
	case !t.WaitUntil.IsZero() && !now.Before(t.WaitUntil):
		return x.waitTimedOut(ctx, t)
	case dependencyWait(t) && !t.DispatchAt.IsZero() && t.DispatchAt.Before(t.WaitUntil):
		return x.checkRegistrations(ctx, t)
	}
	// Still waiting: its children's or dependencies' ends wake it, or its
	// deadline's sweep entry. This token is a duplicate or forged: it is
	// acknowledged and nothing is sent.
	x.log.info("token for a waiting task acknowledged; the end of what it waits for wakes it", "wait", string(t.Wait))
	return x.exit(true, "")
}

// callbackTimedOut fails the waiting attempt of t, whose callback did not
// come in time: retried after backoff, or failed for good on the last
// attempt.
func (x *execution) callbackTimedOut(ctx context.Context, t lease.Task) State {
	if durable.RaceNote(t.WaitNote).Timer() && t.CallbackStep != "" {
		return x.timerFired(ctx, t)
	}
	reason := fmt.Sprintf("callback not received by %s", t.WaitUntil.UTC().Format(time.RFC3339))
	if at, beat := t.CallbackDeadline(); beat {
		reason = fmt.Sprintf("callback heartbeat timed out after %s: no heartbeat since %s", t.HeartbeatTimeout,
			at.Add(-t.HeartbeatTimeout).UTC().Format(time.RFC3339))
	}
	e := lease.WaitEnd{ID: t.ID, Fence: t.Fence, Attempt: t.Attempt, Hash: lease.OperatorNonce(t), Error: reason, Status: lease.StatusFailed, TimedOut: true}
	delay := x.cfg.Backoff(t.Attempt)
	if t.Attempt < t.MaxAttempts {
		e.Status, e.RunAt = lease.StatusPending, x.cfg.Clock.Now().Add(delay)
	}
	task, st, done := x.endCallbackWait(ctx, e)
	if done {
		return st
	}
	outcome := OutcomeRetried
	switch {
	case task.Status == lease.StatusFailed:
		outcome = OutcomeFailed
	case task.Status == lease.StatusPending && task.CancelRequested:
		// Cancelled after the read that found it waiting.
		if ended, ok := x.cancelFlagged(task); ok {
			task, outcome = ended, OutcomeCancelled
		}
	}
	x.record(task, outcome, 0)
	x.log.info("callback timed out", "status", string(task.Status))
	if task.Status == lease.StatusPending && delay <= MaxSQSDelay {
		if err := x.send(ctx, token.RefWith(t.ID, x.carry(nil)), delay); err != nil {
			return x.exit(false, err.Error()) // the sweep entry is the safety net
		}
	}
	return x.ended(true, "")
}

// timerFired ends the callback wait of t, whose deadline is a timer raced
// against the callback (durable.AwaitCallbackError.Timer): the timer won.
func (x *execution) timerFired(ctx context.Context, t lease.Task) State {
	return x.raceWon(ctx, t, durable.TimerFired, "raced timer fired before the callback")
}

// raceWon ends the callback wait of t because what it was raced against
// won (a timer, a message, a child): answer, one of durable's reserved
// answers, is recorded as the callback's step, and the task runs again at
// once, as the same attempt, as after an answer. A wait ended otherwise
// meanwhile is left alone (endCallbackWait).
func (x *execution) raceWon(ctx context.Context, t lease.Task, answer, what string, attrs ...any) State {
	task, st, done := x.endCallbackWait(ctx, raceWaitEnd(t, answer))
	if done {
		return st
	}
	x.task = task
	x.log.info(what, append([]any{"step", t.CallbackStep}, attrs...)...)
	if err := x.send(ctx, token.RefWith(t.ID, x.carry(nil)), 0); err != nil {
		x.log.warn("could not send the token that resumes the task whose race was won; the sweep dispatches it", "error", err)
	}
	return x.ended(true, "")
}

// raceWaitEnd is the end of t's callback wait with a reserved answer.
func raceWaitEnd(t lease.Task, answer string) lease.WaitEnd {
	return lease.WaitEnd{ID: t.ID, Fence: t.Fence, Attempt: t.Attempt, Hash: lease.OperatorNonce(t), Status: lease.StatusFailed, Error: answer}
}

// checkRegistrations answers the sweep's token at a dependent's
// registration check (lease.ArmRegistrationCheck): t is still WAITING, so
// its own token may have been lost (dead-lettered) before it registered t
// on every dependency, and nothing would then wake t before its deadline.
// It registers t again on each dependency it has not heard of, which ends
// the wait if they ended meanwhile, then moves t's sweep entry to the
// deadline. A check that fails keeps the message: it comes back.
func (x *execution) checkRegistrations(ctx context.Context, t lease.Task) State {
	if st, done := x.registerOn(ctx, t, unended(t)); !done {
		return st
	}
	if m := x.cfg.caps.marker; m != nil {
		cctx, cancel := x.call()
		_, err := m.MarkDispatched(cctx, t.ID, t.DispatchAt, t.WaitUntil)
		cancel()
		if err != nil && !errors.Is(err, query.ErrDispatchRaced) {
			// The entry stays where the sweep put it: the check comes again.
			x.log.warn("could not move a dependent's sweep entry to its deadline", "error", err)
		}
	}
	x.log.info("dependent's registrations checked", "dependencies", len(t.WaitFor))
	return x.exit(true, "")
}

// dependencyDeadline answers the sweep's token at the deadline of t, which
// still waits for dependencies. Its registrations are checked first, as at
// its registration check (checkRegistrations): a wait shorter than the
// dispatch grace gets no such check before its deadline, so a dependent
// whose own token was lost before it registered on every dependency would
// otherwise fail at its deadline although its dependencies had ended. A
// dependency that ended meanwhile is told to t now (which wakes t if its
// wait is over); t is then read again, and times out only if it still
// waits for something that has not ended.
func (x *execution) dependencyDeadline(ctx context.Context, t lease.Task) State {
	if st, done := x.registerOn(ctx, t, unended(t)); !done {
		return st
	}
	cctx, cancel := x.call()
	now, err := x.cfg.Store.Get(cctx, t.ID)
	cancel()
	switch {
	case errors.Is(err, lease.ErrNotFound):
		return x.exit(true, "")
	case err != nil:
		return x.keep(ctx, 0, err.Error())
	case now.Status != lease.StatusWaiting || now.Fence != t.Fence || lease.Complete(now):
		// Its wait ended (a strict dependency's failure cancelled it), or
		// is over: the notification that completed it sent its wake token.
		x.log.info("dependent's registrations checked at its deadline: it need not time out", "status", string(now.Status))
		return x.exit(true, "")
	}
	return x.waitTimedOut(ctx, now)
}

// endCallbackWait ends t's callback wait with e, the worker's own end of it
// (a timeout, or a raced timer that fired), and returns the task as
// written; done, with the state to go to, when the wait was not there to
// end: the callback came after all (the task ended, its waiters told again
// if the callback's worker stopped first, or it no longer waits), or a
// store error keeps the message for another try.
func (x *execution) endCallbackWait(ctx context.Context, e lease.WaitEnd) (task lease.Task, st State, done bool) {
	cctx, cancel := x.call()
	task, err := x.cfg.Store.EndWait(cctx, e)
	cancel()
	switch {
	case err == nil:
		return task, 0, false
	case errors.Is(err, lease.ErrFinished):
		if st, ok := x.endedElsewhere(err, ""); ok {
			return task, st, true
		}
		return task, x.exit(true, ""), true
	case errors.Is(err, lease.ErrNotWaiting), errors.Is(err, lease.ErrBadCallback):
		return task, x.exit(true, ""), true
	default:
		return task, x.keep(ctx, 0, err.Error()), true
	}
}
