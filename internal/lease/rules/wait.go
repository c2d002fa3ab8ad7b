package rules

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

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
	t.Metadata = maps.Clone(n.Metadata)
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
