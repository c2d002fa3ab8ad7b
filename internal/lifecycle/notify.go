package lifecycle

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/leasehold/leasehold/internal/durable"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/token"
)

// StateNotifying: the waiters of a task that ended are told, and its
// chain's next link started, before the message is acknowledged.

// ended exits with ack and reason once the waiters of x.task, which has
// ended (or was released to run again), are told (StateNotifying).
func (x *execution) ended(ack bool, reason string) State {
	x.exit(ack, reason)
	return StateNotifying
}

// runNotifying notifies the waiters of x.task, if it has ended, and starts
// the next link of its chain, before the message is acknowledged.
func (x *execution) runNotifying(ctx context.Context) State {
	if (len(x.task.Waiters) == 0 && len(x.task.Then) == 0) || !x.task.Status.Terminal() {
		return StateExited
	}
	err := x.notifyWaiters(ctx, x.task)
	if err == nil {
		err = x.advanceChain(ctx, x.task)
	}
	if err != nil {
		// Handed back for a backoff, not the queue's long visibility
		// timeout: a parent whose wake failed would sleep as long. Every
		// step is idempotent, so the next delivery does it again.
		hold := backoffHold(x.msg.ReceiveCount)
		x.log.warn("could not notify the tasks waiting for this one or start its chain's next link; the message comes back to retry", "error", err, "retry_in", hold)
		x.keep(x.detached, hold, err.Error())
		x.result.Reason = cmp.Or(x.fate.failReason, err.Error())
	}
	return StateExited
}

// notifyWaiters tells every waiter of t, which has ended, and wakes those
// whose wait is over. An error leaves the message to come back, and its
// next delivery (a finished task's token) notifies again: every step is
// idempotent.
func (x *execution) notifyWaiters(ctx context.Context, t lease.Task) error {
	return x.notifyDepth(ctx, t, 0)
}

// maxCascade bounds how far one execution follows cancellations down a
// chain of dependents; a redelivery of its message goes on from there.
const maxCascade = 32

func (x *execution) notifyDepth(ctx context.Context, t lease.Task, depth int) error {
	if depth > maxCascade {
		return fmt.Errorf("notify: dependents more than %d deep", maxCascade)
	}
	for _, w := range t.Waiters {
		if name, index, c, ok := mapChild(t); ok && w.ID == t.Parent && w.Mode == lease.WaitChildren {
			// A sliding map's child counts itself in its group instead.
			if err := x.slideEnded(ctx, t, name, index, c); err != nil {
				return err
			}
			continue
		}
		if err := x.notifyOne(ctx, w, t, depth); err != nil {
			return err
		}
	}
	return nil
}

// notifyOne tells waiter w that ended has ended.
func (x *execution) notifyOne(ctx context.Context, w lease.Waiter, ended lease.Task, depth int) error {
	cctx, cancel := x.call()
	got, err := x.cfg.Store.Notify(cctx, w, ended)
	cancel()
	var fin *lease.FinishedError
	switch {
	case err == nil, errors.Is(err, lease.ErrNotified):
		// (A repeated notification: got is the waiter as seen.)
	case errors.As(err, &fin):
		got = fin.Task
		if got.Status != lease.StatusCancelled {
			return nil
		}
		// Cancelled, perhaps by this very notification on an earlier
		// delivery: tell its own waiters, idempotently.
	case errors.Is(err, lease.ErrNotFound), errors.Is(err, lease.ErrNotWaiting):
		return nil
	default:
		return fmt.Errorf("notify %s: %w", w.ID, err)
	}
	switch {
	case got.Status == lease.StatusCancelled:
		if err == nil {
			x.log.info("dependent cancelled", "dependent", got.ID, "reason", got.Error)
		}
		return x.notifyDepth(ctx, got, depth+1)
	case lease.Complete(got):
		return x.wake(ctx, got)
	case kidEndedWait(got) && kidEnds(got, ended):
		// A child raced against got's callback ended first.
		return x.notifyKidEnded(ctx, got)
	case firstEnded(got, ended):
		// A race of children that this end decides: the others are
		// cancelled, and the last of them to end wakes got.
		x.log.info("raced child ended first: its siblings are cancelled", "waiter", got.ID)
		return x.cancelRaced(ctx, got, durable.FirstEnded, depth)
	}
	return nil
}

// wake sends a token that resumes waiter t, whose wait is over: its
// worker resumes and claims it in one write (resumeClaim, runResuming). Nothing else is
// written here, so a crash after the send loses nothing, and a crash
// before it leaves this message to come back and notify again.
func (x *execution) wake(ctx context.Context, t lease.Task) error {
	if err := x.sendTo(ctx, t.Queue, token.WakeWith(t.ID, x.carry(nil)), 0); err != nil {
		return fmt.Errorf("wake %s: %w", t.ID, err)
	}
	return nil
}

// advanceChain starts the next link of t's chain once t has SUCCEEDED:
// one inline token, which its worker creates and claims in one write,
// carrying the links after it. If t did not succeed, its later links are
// recorded CANCELLED with the reason, so that none runs and each says
// why. Both are idempotent (the links' ids are fixed), so a redelivery of
// t's message does them again safely.
func (x *execution) advanceChain(ctx context.Context, t lease.Task) error {
	if len(t.Then) == 0 {
		return nil
	}
	if t.Status != lease.StatusSucceeded {
		reason := lease.ChainReason(t)
		for _, l := range t.Then {
			cctx, cancel := x.call()
			_, err := x.cfg.Store.CreateCancelled(cctx, l.ID, "", reason)
			cancel()
			if err != nil && !errors.Is(err, lease.ErrAlreadyExists) {
				return fmt.Errorf("cancel chain link %s: %w", l.ID, err)
			}
		}
		return nil
	}
	next := t.Then[0]
	body, err := token.Token{ID: next.ID, Kind: next.Kind, Payload: next.Payload, MaxAttempts: next.MaxAttempts,
		Queue: next.Queue, Then: t.Then[1:], Prev: t.ID, Metadata: x.carry(t.Metadata)}.Encode()
	if err != nil { // checked when the chain was enqueued
		return fmt.Errorf("chain link %s: %w", next.ID, err)
	}
	return x.sendTo(ctx, cmp.Or(next.Queue, t.Queue), body, 0)
}
