package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/queues"
	"github.com/leasehold/leasehold/internal/token"
)

// StateReceived: the token is decoded and routed, and its task claimed (or
// created and claimed, or found WAITING and handed to StateResuming).

// runReceived decodes the token and routes it: a callback, a task with
// dependencies, or a task to claim, created first for an inline token
// (seed: WaitingForTask).
func (x *execution) runReceived(ctx context.Context) State {
	var (
		tok token.Token
		err error
	)
	if x.in.pre != nil {
		tok, err = x.in.pre.tok, x.in.pre.err
	} else {
		tok, err = token.Decode(x.msg.Body)
	}
	x.in.tok = tok
	if err != nil && !errors.Is(err, token.ErrPayloadTooBig) {
		return x.reject(ctx, err.Error())
	}
	if err != nil && tok.Kind == "" {
		return x.reject(ctx, err.Error())
	}
	x.in.tokenErr = err
	x.startAttempt()
	if x.msg.Paused && x.in.tokenErr == nil {
		// Nothing of a paused queue's starts: not a task, a callback or a
		// wake. (A message that names no task that can run, rejected or
		// over the payload limit, takes its usual way: it runs nothing.)
		x.log.taskID = tok.ID
		return x.holdForPause()
	}
	if tok.IsCallback() {
		return StateCallback
	}
	if tok.IsMessage() {
		return StateMessage
	}
	if tok.Inline() {
		id := tok.ID
		if id == "" {
			id = x.msg.ID
		}
		maxAttempts := tok.MaxAttempts
		if maxAttempts == 0 {
			maxAttempts = x.cfg.DefaultMaxAttempts
		}
		x.log.taskID, x.log.kind = id, tok.Kind
		queue := tok.Queue
		if queue == "" && tok.CreateToken == "" {
			// A token sent before its create names the task's queue as
			// the client stores it ("" is the default work queue); any
			// other records the queue it arrived on.
			queue = x.msg.Queue
		}
		nt := lease.NewTask{ID: id, Kind: tok.Kind, Payload: tok.Payload, MaxAttempts: maxAttempts, Queue: queue, CreateToken: tok.CreateToken, Metadata: tok.Metadata,
			Parent: tok.Parent, After: tok.After, AfterAny: tok.AfterAny, Then: tok.Then, Prev: tok.Prev}
		if x.in.tokenErr != nil {
			// The task is recorded without its payload, so the body goes
			// to the dead-letter queue first: it is never lost with the
			// message.
			nt.After, nt.AfterAny = nil, false
			if x.cfg.DeadLetterURL == "" {
				x.fate.keepMessage = true
			} else if err := x.sendDead(x.in.tokenErr.Error()); err != nil {
				x.log.error("could not forward an over-limit token to the dead-letter queue; the message is kept", "error", err)
				return x.exit(false, x.in.tokenErr.Error())
			}
			return x.createFailed(ctx, nt)
		}
		if len(nt.After) > 0 {
			dep := nt          // its own variable: only a dependent's record moves to the heap
			dep.Carried = true // this message brings it back until it is created and registered
			x.in.dependent = &dep
			return StateAwaitingDependencies
		}
		if st, held := x.heldByWindow(); held {
			return st
		}
		if tok.CreateToken != "" && !token.CreateFirst(tok.CreateToken) {
			// The sender stores this task too, most likely before this
			// token arrives: claim it, and create it only if it is not
			// stored (yet, or ever: the sender stopped after the send).
			fallback := nt // a copy, so that only this path allocates one
			x.in.fallback = &fallback
			return x.claim(ctx, id)
		}
		// A plain inline token, or one whose sender waits for this create
		// (token.CreateFirst) and stores the task itself only if it does
		// not land in time: create it claimed, and claim it if the id is
		// taken (the sender's create came first, under the same token).
		if x.in.pre != nil {
			nt.Listing = x.in.pre.listing
		}
		return x.createClaimed(ctx, nt)
	}
	x.log.taskID = tok.ID
	if tok.Wake {
		return x.resumeClaim(ctx, tok.ID)
	}
	if st, held := x.heldByWindow(); held {
		return st
	}
	return x.claim(ctx, tok.ID)
}

// createClaimed creates the inline task nt already claimed by this
// execution, or claims it when it exists.
func (x *execution) createClaimed(ctx context.Context, nt lease.NewTask) State {
	cctx, cancel := x.call()
	cctx, span := x.startSpan(cctx, "leasehold.claim")
	task, err := x.cfg.Store.CreateClaimed(cctx, nt, x.owner())
	endSpan(span, err)
	cancel()
	switch {
	case err == nil:
		x.task = task
		return StateClaimed
	case errors.Is(err, lease.ErrAlreadyExists) && lease.ClaimedBy(x.owner(), task):
		// The create landed but its response was lost; the SDK's
		// retry met the task this execution had just created.
		x.log.info("create response lost; the task is held by this execution")
		x.task = task
		return StateClaimed
	case (errors.Is(err, lease.ErrConflict) || errors.Is(err, lease.ErrAlreadyExists)) && lease.ChildTaken(task, nt):
		return x.childTaken(ctx, nt) // the child's id names another task
	case errors.Is(err, lease.ErrConflict): // the id names another task
		return x.reject(ctx, err.Error())
	case errors.Is(err, lease.ErrAlreadyExists):
		x.in.fallback = nil
		return x.claim(ctx, nt.ID)
	default:
		x.log.warn("could not create task", "error", err)
		return x.keep(ctx, 0, err.Error())
	}
}

// createFailed records an inline task that names itself but cannot run (an
// over-limit payload, not stored) as FAILED in one write, so no token can
// ever claim and run it without its payload.
func (x *execution) createFailed(ctx context.Context, nt lease.NewTask) State {
	reason := x.in.tokenErr.Error() + "; the message, payload included, is on the dead-letter queue"
	if x.fate.keepMessage {
		reason = x.in.tokenErr.Error() + "; the message, payload included, is left to the queue's redrive policy, which moves it to the dead-letter queue"
	}
	cctx, cancel := x.call()
	defer cancel()
	task, err := x.cfg.Store.CreateFailed(cctx, nt, reason)
	switch {
	case err == nil:
		x.record(task, OutcomeFailed, 0)
		x.log.warn("task rejected", "reason", reason)
		return x.ended(true, reason)
	case errors.Is(err, lease.ErrAlreadyExists):
		// Recorded before (this message's earlier receive, or a create
		// whose response was lost), or submitted otherwise: a finished task
		// is acknowledged, any other is claimed and failed with this reason
		// (runClaimed), never run.
		return x.claim(ctx, nt.ID)
	default:
		x.log.warn("could not create task", "error", err)
		return x.keep(ctx, 0, err.Error())
	}
}

// claim takes the lease of a stored task and sorts out every way that fails.
func (x *execution) claim(ctx context.Context, id string) State {
	cctx, cancel := x.call()
	defer cancel()
	cctx, span := x.startSpan(cctx, "leasehold.claim")
	task, err := x.cfg.Store.Claim(cctx, id, x.owner())
	endSpan(span, err)
	if err == nil {
		x.task = task
		x.log.kind = task.Kind
		return StateClaimed
	}
	var (
		leased    *lease.LeasedError
		notDue    *lease.NotDueError
		exhausted *lease.ExhaustedError
		waiting   *lease.WaitingError
		finished  *lease.FinishedError
	)
	switch {
	case errors.Is(err, lease.ErrNotFound) && x.in.fallback != nil:
		// Not stored yet: the token carries the task, so create it.
		nt := *x.in.fallback
		x.in.fallback = nil
		return x.createClaimed(ctx, nt)
	case errors.Is(err, lease.ErrNotFound):
		return x.reject(ctx, fmt.Sprintf("task %s not found", id))
	case errors.As(err, &leased) && lease.ClaimedBy(x.owner(), leased.Task):
		// The claim landed but its response was lost; the SDK's retry met
		// this execution's own lease.
		x.log.info("claim response lost; the task is held by this execution")
		x.task = leased.Task
		x.log.kind = x.task.Kind
		return StateClaimed
	case errors.As(err, &leased):
		// Someone else holds it: keep this token until the lease can be
		// taken over instead of spinning on it.
		x.log.info("task leased elsewhere; keeping the token for later", "remaining", leased.Remaining)
		return x.keep(ctx, leased.Remaining+x.cfg.VisibilityMargin, err.Error())
	case errors.As(err, &finished):
		x.log.info("duplicate delivery of a finished task acknowledged", "error", err)
		// Its waiters may not have heard yet (the worker that ended it
		// stopped first): tell them again, idempotently.
		x.task = finished.Task
		return x.ended(true, "")
	case errors.As(err, &waiting):
		x.task = waiting.Task
		return StateResuming
	case errors.As(err, &notDue):
		return x.redispatch(ctx, id, notDue.RunAt)
	case errors.As(err, &exhausted):
		// The holder of the last attempt vanished: fail the task for good.
		x.task = exhausted.Task
		msg := fmt.Sprintf("lease of attempt %d of %d expired without a result", exhausted.Task.Attempt, exhausted.Task.MaxAttempts)
		return x.release(ctx, lease.Release{Status: lease.StatusFailed, Error: msg}, OutcomeFailed)
	default:
		x.log.warn("claim failed", "error", err)
		return x.keep(ctx, 0, err.Error())
	}
}

// resumeClaim answers a wake token. It reads the task (a read costs a
// fifth of a write whose condition fails) and, if it still waits and its
// wait is over, resumes and claims it in one write (runResuming). The
// read is also what keeps a forged wake token harmless: a task whose wait
// is not over is not resumed. Anything else is a reference token's claim.
func (x *execution) resumeClaim(ctx context.Context, id string) State {
	cctx, cancel := x.call()
	t, err := x.cfg.Store.Get(cctx, id)
	cancel()
	switch {
	case err == nil && t.Status == lease.StatusWaiting:
		x.task = t
		return StateResuming
	case err != nil && errors.Is(err, lease.ErrBackend):
		return x.keep(ctx, 0, err.Error())
	}
	return x.claim(ctx, id)
}

// redispatch answers a token that arrived before its task is due.
func (x *execution) redispatch(ctx context.Context, id string, runAt time.Time) State {
	wait := x.cfg.Clock.Until(runAt)
	if wait > MaxSQSDelay {
		// Pending tasks always sit in the sweep index; the sweeper
		// dispatches it when due.
		return x.exit(true, "")
	}
	if err := x.send(ctx, token.RefWith(id, x.carry(nil)), wait); err != nil {
		// A queue that is gone leaves the task to the sweep (a PENDING
		// task is always in its index).
		return x.exit(errors.Is(err, queues.ErrNotFound), err.Error())
	}
	return x.exit(true, "")
}
