package rules

import (
	"fmt"
	"slices"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
)

// AppendHistory returns history with entry appended, its error cut to
// MaxHistoryErrorBytes, keeping the newest MaxHistory entries, and how many
// old entries were dropped. An attempt keeps one WAITING entry, its
// latest: a suspension that follows a suspension of the same attempt (a
// map's next wave, a poll's next round, a sleep after a fan-in) replaces
// it, so that a task that suspends a thousand times in one attempt keeps
// a short history and a small item (SuspendReplaces).
func AppendHistory(history []lease.Attempt, entry lease.Attempt) ([]lease.Attempt, int) {
	entry.Error = lease.Truncate(entry.Error, lease.MaxHistoryErrorBytes)
	if lease.SuspendReplaces(history, entry) {
		out := slices.Clone(history)
		out[len(out)-1] = entry
		return out, 0
	}
	// One new array, sized for the entries kept (MaxHistory >= 1, so drop
	// never passes len(history)); it never shares history's.
	drop := max(len(history)+1-lease.MaxHistory, 0)
	out := make([]lease.Attempt, 0, len(history)+1-drop)
	out = append(out, history[drop:]...)
	return append(out, entry), drop
}

// ClassifyClaim explains why a claim of id at now did not land, from the item
// the conditional write saw (nil when there was none). Both stores use it, so
// they classify alike.
func ClassifyClaim(id string, old *lease.Task, now time.Time, skew time.Duration) error {
	if old == nil {
		return fmt.Errorf("claim %s: %w", id, lease.ErrNotFound)
	}
	switch {
	case old.Status.Terminal():
		return &lease.FinishedError{TaskID: id, Status: old.Status, Task: *old}
	case old.Status == lease.StatusWaiting:
		return &lease.WaitingError{Task: *old}
	case old.Status == lease.StatusPending && old.RunAt.After(now):
		return &lease.NotDueError{TaskID: id, RunAt: old.RunAt}
	case old.Status == lease.StatusRunning && !old.LeaseUntil.Add(skew).Before(now):
		return &lease.LeasedError{TaskID: id, Owner: old.LeaseOwner, Until: old.LeaseUntil, Remaining: old.LeaseUntil.Add(skew).Sub(now), Task: *old}
	case old.Attempt >= old.MaxAttempts:
		return &lease.ExhaustedError{Task: *old}
	}
	// The condition failed, yet the item seen would have passed: it changed
	// between evaluation and report. Treat it as taken by someone else.
	return &lease.LeasedError{TaskID: id, Owner: old.LeaseOwner, Until: old.LeaseUntil, Task: *old}
}

// ClassifyHeld explains why a renew, finish or release under l did not land.
func ClassifyHeld(op string, l lease.Lease, old *lease.Task) error {
	if old == nil {
		return fmt.Errorf("%s %s: %w", op, l.TaskID, lease.ErrNotFound)
	}
	if Holds(*old, l) {
		// The lease is still held, so another part of the condition failed:
		// the history the write meant to trim changed under the lease.
		return fmt.Errorf("%s %s: %w: the task's history changed while the lease was held", op, l.TaskID, lease.ErrBackend)
	}
	return &lease.LeaseLostError{Op: op, Lease: l, Task: *old}
}

// SameCreate answers a create of want that found old stored under its own
// create token: old is this task. A plain create succeeds with old. A
// CreateClaimed succeeds only when old is held under want's own lease (its
// own earlier put, whose answer was lost); when the other holder of the
// token stored it first, the lease is not this caller's, and it gets old
// with ErrAlreadyExists so that it claims the task instead.
func SameCreate(want, old lease.Task, n lease.NewTask) (lease.Task, error) {
	if want.Status == lease.StatusRunning && !(lease.ClaimedBy(want.LeaseOwner, old) && old.Fence == want.Fence) {
		return old, fmt.Errorf("create %s: %w", n.ID, lease.ErrAlreadyExists)
	}
	return old, nil
}

// Claimable reports whether a claim of t at now may land: the condition
// both stores evaluate.
func Claimable(t lease.Task, now time.Time, skew time.Duration) bool {
	if t.Attempt >= t.MaxAttempts {
		return false
	}
	switch t.Status {
	case lease.StatusPending:
		return !t.RunAt.After(now)
	case lease.StatusRunning:
		return t.LeaseUntil.Add(skew).Before(now)
	}
	return false
}

// Holds reports whether l is the lease t is held under. The attempt never
// changes while a lease is held, so comparing it only guards the history
// entry an ending write records against a lease built by hand.
func Holds(t lease.Task, l lease.Lease) bool {
	return t.Status == lease.StatusRunning && t.LeaseOwner == l.Owner && t.Fence == l.Fence && t.Attempt == l.Attempt
}

// HolderWaits reports whether the sweep, at now, still leaves t to its
// holder: t is RUNNING and its lease expiry plus skew plus grace is after
// now. Claims and renewals leave a task's sweep entry where it is, so the
// entry can come due while the lease is live; the sweep then moves it to
// that time instead of dispatching the task.
func HolderWaits(t lease.Task, now time.Time, skew, grace time.Duration) bool {
	return t.Status == lease.StatusRunning && t.LeaseUntil.Add(skew+grace).After(now)
}
