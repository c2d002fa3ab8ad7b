package lifecycle

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/leasehold/leasehold/internal/durable"
	"github.com/leasehold/leasehold/internal/lease"
)

// A child raced against a callback (workflow.Race or Any of an
// InvokeAsync and a CallbackAsync, durable.AwaitCallbackError.IDs): the
// child is spawned before the callback wait, whose note names it. Its end
// is told to the waiting task (Store.Notify lands on a callback wait as on
// any task not ended) and ends the wait with the answer
// durable.ChildEnded, recorded as the callback's step (raceKidEnded):
// the task runs again, as the same attempt, and waits for the child as a
// child, which then comes first. A child that ends while the task runs,
// before its suspension, is found by the suspension (suspend) or by the
// task's next token (runResuming). An answer that comes first has the
// child cancelled when the task runs again (cancelLosingKids).

// kidEndedWait reports whether t waits for a callback raced against a
// child that has told t of its end: the wait may be over (in an Any,
// only if the child succeeded: kidWon).
func kidEndedWait(t lease.Task) bool {
	if t.Status != lease.StatusWaiting || t.Wait != lease.WaitCallback || t.CallbackStep == "" || len(t.Ended) == 0 {
		return false
	}
	return slices.ContainsFunc(durable.RaceNote(t.WaitNote).Kids(), func(id string) bool { return slices.Contains(t.Ended, id) })
}

// kidEnds reports whether the end of ended, a child raced against t's
// callback, ends t's wait: any end in a Race, a success in an Any (a
// failure leaves the callback to be answered).
func kidEnds(t, ended lease.Task) bool {
	return durable.RaceNote(t.WaitNote).First() != durable.CombineAny || ended.Status == lease.StatusSucceeded
}

// kidWon reports whether a child raced against t's callback, which has
// told t of its end (kidEndedWait), ends t's wait (kidEnds): in an Any
// the children that ended are read to see whether one succeeded.
func (x *execution) kidWon(ctx context.Context, t lease.Task) (bool, error) {
	if !kidEndedWait(t) {
		return false, nil
	}
	if durable.RaceNote(t.WaitNote).First() != durable.CombineAny {
		return true, nil
	}
	for _, id := range durable.RaceNote(t.WaitNote).Kids() {
		if !slices.Contains(t.Ended, id) {
			continue
		}
		cctx, cancel := x.call()
		kid, err := x.cfg.Store.Get(cctx, id)
		cancel()
		switch {
		case errors.Is(err, lease.ErrNotFound):
			continue
		case err != nil:
			return false, err
		case kid.Status == lease.StatusSucceeded:
			return true, nil
		}
	}
	return false, nil
}

// raceKidEnded ends the callback wait of t, whose raced child ended
// first (kidEndedWait): its answer, durable.ChildEnded, is recorded as
// the callback's step, and the task runs again at once, as after a raced
// timer (timerFired). A wait ended otherwise meanwhile is left alone.
func (x *execution) raceKidEnded(ctx context.Context, t lease.Task) State {
	return x.raceWon(ctx, t, durable.ChildEnded, "raced child ended before the callback")
}

// notifyKidEnded is notifyOne's part for a waiter got, told that ended
// ended, that waits for a callback raced against ended: it ends the wait
// (raceKidEnded's write and token), idempotently: a repeated notification
// (the store says so, and hands got back) ends it if it has not ended.
func (x *execution) notifyKidEnded(ctx context.Context, got lease.Task) error {
	e := raceWaitEnd(got, durable.ChildEnded)
	cctx, cancel := x.call()
	_, err := x.cfg.Store.EndWait(cctx, e)
	cancel()
	switch {
	case err == nil:
	case errors.Is(err, lease.ErrFinished), errors.Is(err, lease.ErrNotWaiting), errors.Is(err, lease.ErrBadCallback):
		return nil // answered first, or ended otherwise
	default:
		return err
	}
	x.log.info("raced child ended before the callback", "waiter", got.ID)
	return x.wake(ctx, got)
}

// cancelLosingKids cancels, as a task claimed after its callback's
// answer starts its run, the children raced against that callback (its
// last wait's note names them): the answer came first, so they lost, as
// a child that loses to a timer or message is cancelled. Only when the
// task's last step is that answer, not durable.ChildEnded (then the child
// ended first), and, in an Any, a success. Best effort: a child not cancelled runs on, its outcome
// read by nothing.
func (x *execution) cancelLosingKids(ctx context.Context) {
	t := x.task
	if !strings.Contains(t.WaitNote, "leasehold:kid:") || len(t.Steps) == 0 {
		return
	}
	last := t.Steps[len(t.Steps)-1]
	if !strings.Contains(last.Name, "callback:") || bytes.Contains(last.Result, []byte(durable.ChildEnded)) {
		return
	}
	if durable.RaceNote(t.WaitNote).First() == durable.CombineAny && bytes.HasPrefix(last.Result, []byte(`{"error":`)) {
		return // a failed answer does not decide an Any: the child goes on
	}
	if err := lease.CancelChildren(ctx, kidCanceller{childCanceller{x}}, durable.RacedKids(t), durable.CallbackCame, nil); err != nil {
		x.log.warn("could not cancel the children that lost a race to a callback's answer; they run on", "error", err)
	}
}

// kidCanceller is childCanceller without its StopMap: a child raced
// against a callback is no sliding map's.
type kidCanceller struct{ c childCanceller }

func (k kidCanceller) CreateCancelled(ctx context.Context, id, parent, reason string) (lease.Task, error) {
	return k.c.CreateCancelled(ctx, id, parent, reason)
}

func (k kidCanceller) RequestCancel(ctx context.Context, id string) (lease.Task, error) {
	return k.c.RequestCancel(ctx, id)
}
