package rules

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
)

// AbandonLands reports whether AbandonWait(a) may land on t: the condition
// both stores evaluate. A callback wait ends only through EndWait.
func AbandonLands(a lease.WaitAbandon, t lease.Task) bool {
	return t.Status == lease.StatusWaiting && t.Wait != lease.WaitCallback && t.Fence == a.Fence
}

// ClassifyAbandon explains why AbandonWait(a) did not land on old.
func ClassifyAbandon(a lease.WaitAbandon, old *lease.Task) error {
	return classifyWait("abandon wait", a.ID, old, func(t lease.Task) error {
		if t.Status == lease.StatusWaiting && t.Wait == lease.WaitCallback {
			return fmt.Errorf("%w: a callback wait ends by its token or its timeout", lease.ErrNotWaiting)
		}
		return lease.ErrNotWaiting
	})
}

// ClassifyWatch explains why Watch on id did not land on old: a task that
// has not ended was refused by MaxWaiters.
func ClassifyWatch(id string, old *lease.Task) error {
	if old != nil && !old.Status.Terminal() {
		return waiterLimitError(id, len(old.Waiters))
	}
	return classifyWait("watch", id, old, func(lease.Task) error { return lease.ErrNotWaiting })
}

// waiterLimitError is the error of a Watch refused by MaxWaiters.
func waiterLimitError(id string, n int) error {
	return fmt.Errorf("watch %s: %w: %d tasks wait for it already, the limit is %d", id, lease.ErrWaiterLimit, n, lease.MaxWaiters)
}

// CallbackAnswer is the step result a resumable callback wait records:
// {"result": result} for a completed callback, {"error": reason} for a
// failed one.
func CallbackAnswer(status lease.Status, result []byte, reason string) []byte {
	if status == lease.StatusSucceeded {
		if len(result) == 0 {
			result = []byte("null")
		}
		return append(append([]byte(`{"result":`), result...), '}')
	}
	b, _ := json.Marshal(struct {
		Error string `json:"error"`
	}{reason})
	return b
}

// classifyWait explains a failed wait transition from the item it saw.
func classifyWait(op, id string, old *lease.Task, why func(lease.Task) error) error {
	if old == nil {
		return fmt.Errorf("%s %s: %w", op, id, lease.ErrNotFound)
	}
	if old.Status.Terminal() {
		return &lease.FinishedError{TaskID: id, Status: old.Status, Task: *old}
	}
	return &lease.WaitError{Op: op, TaskID: id, Err: why(*old), Task: *old}
}

// ClassifyEndWait explains why EndWait(e) did not land on old.
func ClassifyEndWait(e lease.WaitEnd, old *lease.Task) error {
	return classifyWait("callback", e.ID, old, func(t lease.Task) error {
		if t.Status == lease.StatusWaiting && t.Wait == lease.WaitCallback && t.Fence == e.Fence &&
			(subtle.ConstantTimeCompare([]byte(t.CallbackHash), []byte(e.CallbackHash())) != 1 || t.CallbackStep != e.ResumeStep()) {
			return fmt.Errorf("%w: it does not match the task", lease.ErrBadCallback)
		}
		if t.Fence > e.Fence {
			return fmt.Errorf("%w: the token is for attempt fence %d; the task has moved on to fence %d", lease.ErrNotWaiting, e.Fence, t.Fence)
		}
		return lease.ErrNotWaiting
	})
}

// EndWaitLands reports whether EndWait(e) may land on t: the condition both
// stores evaluate. The hash is compared in constant time.
func EndWaitLands(e lease.WaitEnd, t lease.Task) bool {
	return t.Status == lease.StatusWaiting && t.Wait == lease.WaitCallback && t.Fence == e.Fence && t.Attempt == e.Attempt &&
		subtle.ConstantTimeCompare([]byte(t.CallbackHash), []byte(e.CallbackHash())) == 1 && t.CallbackStep == e.ResumeStep()
}

// NotifyCancels reports whether ended's end cancels w instead of counting
// as one of its ended tasks: a strict dependency that did not succeed.
func NotifyCancels(w lease.Waiter, ended lease.Task) bool {
	return w.Mode == lease.WaitAfter && ended.Status != lease.StatusSucceeded
}

// DependencyReason is the error a dependent cancelled by ended's end keeps.
func DependencyReason(ended lease.Task) string {
	if ended.Status == "" {
		return lease.Truncate(fmt.Sprintf("dependency %s does not exist", ended.ID), lease.MaxErrorBytes)
	}
	msg := fmt.Sprintf("dependency %s ended %s", ended.ID, ended.Status)
	if ended.Error != "" {
		msg += ": " + ended.Error
	}
	return lease.Truncate(msg, lease.MaxErrorBytes)
}

// Notifiable reports whether a notify of w by ended may add to t's ended
// set: t is not terminal and has not heard of ended yet. A strict
// dependency's failure needs t WAITING instead (it cancels t).
func Notifiable(t lease.Task, w lease.Waiter, ended lease.Task) bool {
	if NotifyCancels(w, ended) {
		return t.Status == lease.StatusWaiting
	}
	return !t.Status.Terminal() && !slices.Contains(t.Ended, ended.ID)
}

// ClassifyNotify explains why a notify of w by ended did not land on old.
func ClassifyNotify(w lease.Waiter, ended lease.Task, old *lease.Task) error {
	return classifyWait("notify", w.ID, old, func(t lease.Task) error {
		if slices.Contains(t.Ended, ended.ID) {
			return lease.ErrNotified
		}
		return lease.ErrNotWaiting
	})
}

// ClassifyResume explains why a resume of id under fence did not land.
func ClassifyResume(id string, old *lease.Task) error {
	return classifyWait("resume", id, old, func(lease.Task) error { return lease.ErrNotWaiting })
}

// ApplyWaits sets the wait fields of t, the new record of n: both stores
// create alike.
func ApplyWaits(t *lease.Task, n lease.NewTask) {
	if n.Parent != "" {
		t.Parent = n.Parent
		t.Waiters = []lease.Waiter{{ID: n.Parent, Mode: lease.WaitChildren}}
	}
	if len(n.After) > 0 {
		t.Status = lease.StatusWaiting
		t.Wait = n.WaitModeOf()
		t.WaitFor = slices.Clone(n.After)
		applyWaitDeadline(t, n)
	}
	if n.Prev != "" { // its dependency ended already: no wait
		t.Wait, t.WaitFor = lease.WaitAfter, []string{n.Prev}
	}
	t.Then = lease.CloneThen(n.Then)
}

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

// CheckEndWaiting validates the arguments of Store.EndWaiting.
func CheckEndWaiting(prev lease.Task, status lease.Status) error {
	switch {
	case lease.CheckID(prev.ID) != nil:
		return lease.CheckID(prev.ID)
	case status != lease.StatusCancelled && status != lease.StatusFailed:
		return fmt.Errorf("%w: a wait is ended as CANCELLED or FAILED, not %q", lease.ErrInvalid, status)
	case prev.Status != lease.StatusWaiting:
		return fmt.Errorf("%w: end waiting %s: the task seen is %s, not WAITING", lease.ErrInvalid, prev.ID, prev.Status)
	}
	return nil
}

// ClassifyEndWaiting explains why EndWaiting of prev did not land on old.
func ClassifyEndWaiting(prev lease.Task, old *lease.Task) error {
	return classifyWait("end waiting", prev.ID, old, func(lease.Task) error { return lease.ErrNotWaiting })
}

// EndWaitingLands reports whether EndWaiting of prev may land on t: it still
// waits under prev's fence and attempt (the history entry records them).
func EndWaitingLands(prev, t lease.Task) bool {
	return t.Status == lease.StatusWaiting && t.Fence == prev.Fence && t.Attempt == prev.Attempt
}

// Placeholder is the record CreateCancelled stores, and the submission its
// put stands for (both stores build it here).
func Placeholder(id, parent, reason string, now time.Time, retention time.Duration) (lease.Task, lease.NewTask, error) {
	switch {
	case lease.CheckID(id) != nil:
		return lease.Task{}, lease.NewTask{}, fmt.Errorf("cancel child: %w", lease.CheckID(id))
	case parent != "" && lease.CheckID(parent) != nil:
		return lease.Task{}, lease.NewTask{}, fmt.Errorf("cancel child %s: %w: parent: %w", lease.DisplayID(id), lease.ErrInvalid, lease.CheckID(parent))
	case id == parent:
		return lease.Task{}, lease.NewTask{}, fmt.Errorf("cancel child %s: %w: a task is not its own child", lease.DisplayID(id), lease.ErrInvalid)
	}
	n := lease.NewTask{ID: id, Parent: parent}
	t := lease.Task{ID: id, Status: lease.StatusCancelled, RunAt: now, CreatedAt: now, UpdatedAt: now, FinishedAt: now,
		Error: lease.Truncate(reason, lease.MaxErrorBytes), CancelRequested: true}
	ApplyWaits(&t, n)
	if retention > 0 {
		t.ExpiresAt = time.Unix(now.Add(retention).Unix(), 0).UTC()
	}
	return t, n, nil
}

// applyWaitDeadline sets the deadline of t, created WAITING from n, and its
// sweep entry at it.
func applyWaitDeadline(t *lease.Task, n lease.NewTask) {
	t.WaitUntil = n.WaitUntil
	if t.WaitUntil.IsZero() {
		t.WaitUntil = t.CreatedAt.Add(lease.DefaultWaitTimeout)
	}
	t.WaitUntil = lease.Millis(t.WaitUntil)
	t.DispatchAt = t.WaitUntil
}
