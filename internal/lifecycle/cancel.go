package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/leasehold/leasehold/internal/durable"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/mapstate"
)

// CancelledOnRequest is the error of a task cancelled by a client's request.
const CancelledOnRequest = "cancelled on request"

// endWaiting ends t, a WAITING task as seen, as status with reason: first
// its children that have not ended (placeholders for those whose token is
// still queued, so none is created or started after the parent ended),
// then t itself, then the tasks waiting for any of them. A failure keeps
// this message, whose next delivery does it again: every step is
// idempotent.
func (x *execution) endWaiting(ctx context.Context, t lease.Task, status lease.Status, reason string) State {
	x.task = t
	var cancelled []lease.Task
	if len(lease.UnendedChildren(t)) > 0 {
		err := lease.CancelChildren(ctx, childCanceller{x}, t, lease.ParentEndedReason(t.ID, status, reason),
			func(k lease.Task) { cancelled = append(cancelled, k) })
		if err != nil {
			x.log.warn("could not cancel the children of an ending parent; the message comes back to retry", "error", err)
			return x.keep(ctx, 0, err.Error())
		}
	}
	if len(lease.UnendedChildren(durable.RacedKids(t))) > 0 {
		// A child raced against its callback is its child too.
		err := lease.CancelChildren(ctx, kidCanceller{childCanceller{x}}, durable.RacedKids(t), lease.ParentEndedReason(t.ID, status, reason),
			func(k lease.Task) { cancelled = append(cancelled, k) })
		if err != nil {
			x.log.warn("could not cancel the child raced against an ending parent's callback; the message comes back to retry", "error", err)
			return x.keep(ctx, 0, err.Error())
		}
	}
	cctx, cancel := x.call()
	ended, err := x.cfg.Store.EndWaiting(cctx, t, status, reason)
	cancel()
	switch {
	case err == nil:
	case errors.Is(err, lease.ErrFinished):
		// Ended since it was read: whoever ended it may have stopped
		// before telling its waiters; its children cancelled here first
		// have waiters too.
		if fin := (*lease.FinishedError)(nil); errors.As(err, &fin) && fin.Task.ID != "" {
			x.task = fin.Task
			return x.endedAfterChildren(ctx, t.ID, cancelled)
		}
		return x.exit(true, "")
	case errors.Is(err, lease.ErrNotWaiting), errors.Is(err, lease.ErrNotFound):
		// It moved on (resumed) since it was read: whoever moved it
		// answers for it.
		x.log.info("waiting task moved on before it could be ended", "status", string(status), "error", err)
		return x.exit(true, "")
	default:
		return x.keep(ctx, 0, err.Error())
	}
	x.record(ended, waitOutcome(status), 0)
	x.log.info("waiting task ended", "status", string(status), "reason", reason)
	return x.endedAfterChildren(ctx, t.ID, cancelled)
}

// waitOutcome is the outcome of a wait this execution ended as status:
// FAILED, or CANCELLED.
func waitOutcome(status lease.Status) Outcome {
	if status == lease.StatusFailed {
		return OutcomeFailed
	}
	return OutcomeCancelled
}

// endedAfterChildren is the last step of a waiting task parent that has
// ended: tell the waiters of kids, its children cancelled before it ended,
// then acknowledge the message; a notification that fails keeps it, so the
// redelivery tells them.
func (x *execution) endedAfterChildren(ctx context.Context, parent string, kids []lease.Task) State {
	if err := x.notifyCancelledChildren(ctx, parent, kids); err != nil {
		x.result.Ack, x.result.Reason = false, err.Error()
		return x.exit(false, err.Error())
	}
	return x.ended(true, "")
}

// notifyCancelledChildren tells the waiters of kids, children of parent
// cancelled before it ended, of their end: all but parent, which has ended.
func (x *execution) notifyCancelledChildren(ctx context.Context, parent string, kids []lease.Task) error {
	for _, k := range kids {
		k.Waiters = slices.DeleteFunc(slices.Clone(k.Waiters), func(w lease.Waiter) bool { return w.ID == parent })
		if err := x.notifyWaiters(ctx, k); err != nil {
			return err
		}
	}
	return nil
}

// childTaken answers the token of child n, whose id names another task:
// its parent, once it waits for it, fails with the reason instead of
// waiting for ever.
func (x *execution) childTaken(ctx context.Context, n lease.NewTask) State {
	reason := lease.ChildTakenReason(n.ID)
	cctx, cancel := x.call()
	p, err := x.cfg.Store.Get(cctx, n.Parent)
	cancel()
	switch {
	case errors.Is(err, lease.ErrNotFound):
		x.log.warn("child id taken by another task; its parent does not exist", "parent", n.Parent)
		return x.exit(true, reason)
	case err != nil:
		return x.keep(ctx, 0, err.Error())
	case p.Status == lease.StatusWaiting && p.Wait == lease.WaitChildren && slices.Contains(p.WaitFor, n.ID):
		x.log.warn("child id taken by another task; failing its parent", "parent", n.Parent)
		return x.endWaiting(ctx, p, lease.StatusFailed, reason)
	case p.Status == lease.StatusRunning:
		// Its suspension has not landed yet: look again shortly.
		return x.keep(ctx, x.cfg.VisibilityMargin, reason)
	}
	// The parent ended, or does not wait for this child (an earlier
	// attempt's token): nothing waits on this id.
	x.log.warn("child id taken by another task; its parent does not wait for it", "parent", n.Parent, "parent_status", string(p.Status))
	return x.exit(true, reason)
}

// childCanceller is the store as CancelChildren uses it, each call bounded
// by the call timeout. A store without RequestCancel (a test's wrapper)
// leaves existing children to run on.
type childCanceller struct{ x *execution }

func (c childCanceller) CreateCancelled(ctx context.Context, id, parent, reason string) (lease.Task, error) {
	cctx, cancel := c.x.call()
	defer cancel()
	return c.x.cfg.Store.CreateCancelled(cctx, id, parent, reason)
}

func (c childCanceller) RequestCancel(ctx context.Context, id string) (lease.Task, error) {
	rc := c.x.cfg.caps.cancels
	if rc == nil {
		c.x.log.warn("store cannot cancel a running child; it runs on", "child", id)
		return lease.Task{}, nil
	}
	cctx, cancel := c.x.call()
	defer cancel()
	return rc.RequestCancel(cctx, id)
}

// StopMap stops the sliding map the parent waits in, if any, and cancels
// its running children (mapstate.StopChildren), each call bounded as
// above. A store without maps has none to stop.
func (c childCanceller) StopMap(ctx context.Context, parent lease.Task, reason string, cancelled func(lease.Task)) error {
	ms := c.x.cfg.caps.maps
	if ms == nil {
		return nil
	}
	return mapstate.StopChildren(ctx, boundedMaps{ms, c.x}, c, parent, reason, cancelled)
}

// boundedMaps is the map store with its Stop bounded by the call timeout
// (StopMap's only call to it).
type boundedMaps struct {
	mapstate.Store
	x *execution
}

func (b boundedMaps) Stop(ctx context.Context, id, reason string) (mapstate.Group, error) {
	cctx, cancel := b.x.call()
	defer cancel()
	return b.Store.Stop(cctx, id, reason)
}

// cancelFlagged ends task CANCELLED, as this execution's write left it:
// PENDING with the cancel flag set, because a cancel landed after the last
// renewal (or after the read that found the task waiting) and the attempt
// was released, or the wait ended, to run again. The flag dooms the task,
// and its next claim would cancel it, but only once it is due: after a
// backoff, a snooze or a long hold. So the cancel is finished now, with
// the store's own cancel, which ends a flagged PENDING task at once. It
// returns the task ended and true, or task and false when it could not
// end it: a store without RequestCancel (a test's wrapper), a store error,
// or another writer's move. The next claim then ends it.
func (x *execution) cancelFlagged(task lease.Task) (lease.Task, bool) {
	rc := x.cfg.caps.cancels
	if rc == nil {
		return task, false
	}
	cctx, cancel := x.call()
	defer cancel()
	ended, err := rc.RequestCancel(cctx, task.ID)
	switch {
	case err == nil && ended.Status == lease.StatusCancelled:
		x.log.info("cancellation requested as the attempt ended; task cancelled instead of run again")
		return ended, true
	case errors.Is(err, lease.ErrFinished):
		return task, false // ended meanwhile by another writer, which tells its waiters
	}
	x.log.warn("cancellation requested as the attempt ended; the task could not be cancelled now, its next claim cancels it",
		"error", err, "status", string(ended.Status))
	return task, false
}

// cancelUnspawned writes a CANCELLED placeholder for each of ids, the
// children of the held task, which is about to fail with reason after some
// of their tokens went out: a token taken later finds its child ended. A
// child created already was created before its parent ended and runs on.
// It stops at the first write that fails and returns its error: the parent
// must not end then, or that child could be created and run after it.
func (x *execution) cancelUnspawned(ctx context.Context, ids []string, reason string) error {
	why := lease.ParentEndedReason(x.task.ID, lease.StatusFailed, reason)
	for _, id := range ids {
		if _, err := (childCanceller{x}).CreateCancelled(ctx, id, x.task.ID, why); err != nil && !errors.Is(err, lease.ErrAlreadyExists) {
			return fmt.Errorf("cancel child %s: %w", lease.DisplayID(id), err)
		}
	}
	return nil
}
