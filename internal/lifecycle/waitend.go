package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/leasehold/leasehold/internal/durable"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/token"
)

// Every wait ends (docs/states.md): at its deadline, found in the sweep
// index, or sooner when it can never be over. Nothing here re-sends a
// token for a wait that goes on, so a forged or duplicate token causes at
// most one further message.

// MaxWaitTimeout bounds Config.WaitTimeout and durable.AwaitChildrenError.Timeout.
const MaxWaitTimeout = durable.MaxCallbackTimeout

// earlyTimerTolerance is how early a token may come for a callback wait and
// still be kept, hidden until the deadline, rather than dropped: the
// timeout's own token, delayed by SQS by the whole timeout, may arrive a
// moment before the deadline by another worker's clock.
const earlyTimerTolerance = time.Minute

// earlyCallbackToken answers a token for a task waiting for a callback whose
// deadline has not come. The wait's end is already provided for: the
// timeout's token (a wait SQS can delay it for) and the sweep entry at the
// deadline. So this token is acknowledged and sends nothing, unless the
// deadline is a moment away: then this very message is hidden until it (no
// new message; from the replace count on, one fresh token replaces it).
func (x *execution) earlyCallbackToken(ctx context.Context, t lease.Task, now time.Time) State {
	left := t.WaitUntil.Sub(now)
	switch {
	case t.DispatchAt.IsZero() && left > earlyTimerTolerance:
		// Suspended by a version that kept the time with a chain of
		// tokens and wrote no sweep entry: this token may be the chain,
		// the wait's only end. Pass it on, as that version did.
		if err := x.send(ctx, token.RefWith(t.ID, x.carry(nil)), min(left, MaxSQSDelay)); err != nil {
			return x.exit(false, err.Error())
		}
		return x.exit(true, "")
	case left > earlyTimerTolerance:
		x.log.info("token for a task waiting for a callback acknowledged; its timeout's token or sweep entry ends the wait", "wait_until", t.WaitUntil)
		return x.exit(true, "")
	}
	return x.keep(ctx, left, "callback wait's deadline not reached yet")
}

// waitTimedOut fails t, whose wait for children or dependencies reached its
// deadline before everything it waits for ended; a wait for dependencies
// that is part of a cycle is cancelled instead, with a reason naming it.
// The children of a wait for children that have not ended are cancelled
// first (placeholders for those with no item yet), as endWaiting does, so
// none is created or runs after t failed; a failed cancel keeps the
// message, and t fails only once every child is cancelled. Dependencies
// are not t's own and are left alone.
func (x *execution) waitTimedOut(ctx context.Context, t lease.Task) State {
	if dependencyWait(t) {
		cycle, err := x.findCycle(ctx, t)
		if err != nil {
			return x.keep(ctx, 0, err.Error())
		}
		if cycle != nil {
			return x.abandonWait(ctx, t, lease.StatusCancelled, cycleReason(cycle))
		}
	}
	missing := unended(t)
	what := "dependencies"
	if t.Wait == lease.WaitChildren {
		what = "children"
	}
	waited := "until " + t.WaitUntil.UTC().Format(time.RFC3339)
	if start, ok := waitStart(t); ok {
		waited = t.WaitUntil.Sub(start).String()
	}
	reason := fmt.Sprintf("waited %s for %s %s (%d not ended); the wait's deadline passed", waited, what, strings.Join(t.WaitFor, ", "), len(missing))
	var kids []lease.Task
	if len(lease.UnendedChildren(t)) > 0 {
		err := lease.CancelChildren(ctx, childCanceller{x}, t, lease.ParentEndedReason(t.ID, lease.StatusFailed, reason),
			func(k lease.Task) { kids = append(kids, k) })
		if err != nil {
			x.log.warn("could not cancel the children of a parent whose wait's deadline passed; the message comes back to retry", "error", err)
			return x.keep(ctx, 0, err.Error())
		}
	}
	return x.abandonWait(ctx, t, lease.StatusFailed, reason, kids...)
}

// childTimerFired answers the deadline of t, which waits for children
// raced against a timer (durable.AwaitChildrenError.Timer): the timer won
// (reason durable.TimerFired); or a message for a receive raced against
// them (endRacedWait, reason durable.MessageCame).
// The children not ended are cancelled, as at a wait's deadline
// (placeholders for those with no item yet), but t does not fail: each
// child that has ended is told to t, which wakes t once all have (a child
// still running tells it when its cancel ends it), and t's handler runs
// again, as the same attempt, and finds the children cancelled after the
// timer's deadline closed by it. Every step is idempotent: a failed call
// keeps the message, which does it all again.
func (x *execution) childTimerFired(ctx context.Context, t lease.Task, reason string) State {
	if err := x.cancelRaced(ctx, t, reason, 0); err != nil {
		x.log.warn("could not cancel the children of a task whose raced timer or message came first; the message comes back to retry", "error", err)
		return x.keep(ctx, 0, err.Error())
	}
	x.log.info("raced timer or message came before the children", "reason", reason)
	return x.exit(true, "")
}

// cancelRaced cancels the children of t that have not ended, for reason
// (a raced timer, message or child came first), and tells t of each that
// has ended, which wakes t once all have (a child still running tells it
// when its cancel ends it). Every step is idempotent.
func (x *execution) cancelRaced(ctx context.Context, t lease.Task, reason string, depth int) error {
	unendedKids := lease.UnendedChildren(t)
	if err := lease.CancelChildren(ctx, childCanceller{x}, t, reason, nil); err != nil {
		return err
	}
	for _, id := range unendedKids {
		cctx, cancel := x.call()
		kid, err := x.cfg.Store.Get(cctx, id)
		cancel()
		switch {
		case errors.Is(err, lease.ErrNotFound):
			continue
		case err != nil:
			return err
		case !kid.Status.Terminal():
			continue // running: its end tells t
		}
		if err := x.notifyOne(ctx, lease.Waiter{ID: t.ID, Mode: lease.WaitChildren}, kid, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// firstEnded reports whether ended, a child of t that t was just told
// of, ends t's race of children (durable.AwaitChildrenError.First): t
// still waits, for others, and ended is the first to end (Race) or
// succeed (Any). A child cancelled for the race (its placeholder's reason
// FirstEnded) ends nothing more.
func firstEnded(t, ended lease.Task) bool {
	if t.Status != lease.StatusWaiting || t.Wait != lease.WaitChildren || ended.Error == durable.FirstEnded {
		return false
	}
	switch durable.RaceNote(t.WaitNote).First() {
	case durable.CombineRace:
		return true
	case durable.CombineAny:
		return ended.Status == lease.StatusSucceeded
	}
	return false
}

// waitStart is when t's wait began: its creation for dependencies, its
// suspension (the newest history entry, WAITING) for children.
func waitStart(t lease.Task) (time.Time, bool) {
	switch {
	case t.Wait == lease.WaitAfter || t.Wait == lease.WaitAfterAny:
		return t.CreatedAt, !t.CreatedAt.IsZero()
	case len(t.History) > 0 && t.History[len(t.History)-1].Status == lease.StatusWaiting:
		return t.History[len(t.History)-1].At, true
	}
	return time.Time{}, false
}

// abandonWait ends the wait of t with status and reason, then tells its
// waiters and those of kids, its children cancelled just before, before the
// message is acknowledged.
func (x *execution) abandonWait(ctx context.Context, t lease.Task, status lease.Status, reason string, kids ...lease.Task) State {
	cctx, cancel := x.call()
	task, err := x.cfg.Store.AbandonWait(cctx, lease.WaitAbandon{ID: t.ID, Fence: t.Fence, Status: status, Error: reason})
	cancel()
	var fin *lease.FinishedError
	switch {
	case err == nil:
	case errors.As(err, &fin):
		// Ended otherwise (or by this write, whose answer was lost): its
		// waiters may not have heard yet.
		x.task = fin.Task
		return x.endedAfterChildren(ctx, t.ID, kids)
	case errors.Is(err, lease.ErrNotWaiting), errors.Is(err, lease.ErrNotFound):
		return x.exit(true, "") // resumed, or gone: nothing to end
	default:
		return x.keep(ctx, 0, err.Error())
	}
	x.record(task, waitOutcome(status), 0)
	x.log.warn("wait ended before it was over", "status", string(status), "reason", reason)
	return x.endedAfterChildren(ctx, t.ID, kids)
}

// waitsFor reports whether dep, as a Watch left it, waits for id: the
// dependent id registering on dep closes a cycle.
func waitsFor(dep lease.Task, id string) bool {
	return dep.Status == lease.StatusWaiting && dep.Wait != lease.WaitCallback &&
		slices.Contains(dep.WaitFor, id) && !slices.Contains(dep.Ended, id)
}

// dependencyWait reports whether t waits for dependencies (After or
// AfterAny), the only waits a cycle can hold.
func dependencyWait(t lease.Task) bool {
	return t.Status == lease.StatusWaiting && (t.Wait == lease.WaitAfter || t.Wait == lease.WaitAfterAny)
}

// unended lists what t waits for that has not ended, in t's order.
func unended(t lease.Task) []string {
	var ids []string
	for _, id := range t.WaitFor {
		if !slices.Contains(t.Ended, id) {
			ids = append(ids, id)
		}
	}
	return ids
}

// maxCycleReads bounds the reads findCycle makes for one deadline.
const maxCycleReads = 32

// findCycle looks, breadth first, for a path of unended dependency waits
// from t back to t, reading each task on the way with the store's Get, at
// most maxCycleReads of them. It returns the cycle's ids in order, t
// first (the shortest such cycle), or nil when none is found within the
// bound. It runs only at a deadline, never on the way of a wait that ends.
// A task that is gone, has ended or waits for something else is not
// followed; a failed read is returned.
func (x *execution) findCycle(ctx context.Context, t lease.Task) ([]string, error) {
	from := map[string]string{t.ID: ""} // each id reached, with the id that waits for it
	queue := unended(t)
	for _, id := range queue {
		from[id] = t.ID
	}
	path := func(last string) []string {
		var ids []string
		for id := last; id != ""; id = from[id] {
			ids = append(ids, id)
		}
		slices.Reverse(ids)
		return ids
	}
	for reads := 0; len(queue) > 0 && reads < maxCycleReads; reads++ {
		id := queue[0]
		queue = queue[1:]
		cctx, cancel := x.call()
		dep, err := x.cfg.Store.Get(cctx, id)
		cancel()
		switch {
		case errors.Is(err, lease.ErrNotFound):
			continue
		case err != nil:
			return nil, fmt.Errorf("look for a dependency cycle through %s: %w", t.ID, err)
		case !dependencyWait(dep):
			continue
		}
		for _, next := range unended(dep) {
			if next == t.ID {
				return path(id), nil
			}
			if _, seen := from[next]; !seen {
				from[next] = id
				queue = append(queue, next)
			}
		}
	}
	return nil, nil
}

// cycleReason names a dependency cycle in order: ids[0] waits for ids[1],
// ..., and the last waits for ids[0]. The store cuts a long one to
// lease.MaxErrorBytes.
func cycleReason(ids []string) string {
	var b strings.Builder
	b.WriteString("dependency cycle: ")
	b.WriteString(lease.DisplayID(ids[0]))
	for i, id := range append(ids[1:len(ids):len(ids)], ids[0]) {
		if i == 0 {
			b.WriteString(" waits for ")
		} else {
			b.WriteString(", which waits for ")
		}
		b.WriteString(lease.DisplayID(id))
	}
	return b.String()
}
