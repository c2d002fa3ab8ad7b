package lease

import (
	"fmt"
	"time"

	"github.com/leasehold/leasehold/internal/defaults"
)

// Every wait has a deadline (docs/states.md, "Every wait ends"): a
// callback wait its timeout, a wait for children or dependencies
// DefaultWaitTimeout unless its creator names another. A waiting task sits
// in the sweep index at its deadline (Task.DispatchAt), so the sweep sends
// it one token when the deadline passes, and the worker that takes it
// ends the wait. No message chain keeps a wait's time.

// DefaultWaitTimeout is the deadline of a wait for children or
// dependencies that names none.
const DefaultWaitTimeout = defaults.WaitTimeout

// ErrWaiterLimit: a Watch found MaxWaiters tasks waiting for the task
// already. It matches ErrInvalid too.
var ErrWaiterLimit = fmt.Errorf("%w: too many waiters", ErrInvalid)

// Times returns the deadline and the sweep-index time of w suspended at
// now: Until, or now plus DefaultWaitTimeout when it is zero; DispatchAt,
// or the deadline when it is zero, or zero (no entry) when Carried.
func (w Wait) Times(now time.Time) (until, dispatchAt time.Time) {
	until = w.Until
	if until.IsZero() {
		until = now.Add(DefaultWaitTimeout)
	}
	dispatchAt = w.DispatchAt
	switch {
	case w.Carried:
		return Millis(until), time.Time{}
	case dispatchAt.IsZero() && w.Heartbeat > 0 && w.BeatUntil(now).Before(until):
		dispatchAt = w.BeatUntil(now)
	case dispatchAt.IsZero():
		dispatchAt = until
	}
	return Millis(until), Millis(dispatchAt)
}

// BeatUntil is the first heartbeat deadline of w suspended at now: now
// plus its heartbeat timeout, or zero for a wait without heartbeats.
func (w Wait) BeatUntil(now time.Time) time.Time {
	if w.Heartbeat <= 0 {
		return time.Time{}
	}
	return Millis(now.Add(w.Heartbeat))
}

// CallbackDeadline is when t's callback wait ends unless it is answered:
// the earlier of its deadline (WaitUntil) and, for a wait with a heartbeat
// timeout, its heartbeat deadline (BeatUntil). heartbeat reports that the
// heartbeat deadline is the one that binds.
func (t Task) CallbackDeadline() (at time.Time, heartbeat bool) {
	if t.HeartbeatTimeout > 0 && !t.BeatUntil.IsZero() && t.BeatUntil.Before(t.WaitUntil) {
		return t.BeatUntil, true
	}
	return t.WaitUntil, false
}

// ArmRegistrationCheck moves the sweep entry of t, just created WAITING for
// its dependencies, from its deadline to its creation plus grace (the
// store's dispatch grace) when that comes first. A dependent is registered
// on its dependencies by its own token after the create; should that token
// be lost (dead-lettered after its receives ran out) before it registered
// on every one, nothing would wake the task before its deadline. The
// sweep's token at the check registers it again and moves the entry on to
// the deadline (lifecycle). A dependent that resumes first leaves the index
// with its resume, so the check costs nothing then.
func ArmRegistrationCheck(t *Task, grace time.Duration) {
	if at := Millis(t.CreatedAt.Add(grace)); t.Status == StatusWaiting && !t.DispatchAt.IsZero() && at.Before(t.DispatchAt) {
		t.DispatchAt = at
	}
}

// WaitAbandon ends a wait for children or dependencies that is not over
// (Store.AbandonWait): its deadline passed, or it can never be over (a
// dependency cycle, a dependency it could not register on).
type WaitAbandon struct {
	ID string
	// Fence is the waiting task's fence, as read: the write lands only
	// while the task still waits under it.
	Fence int64
	// Status is StatusFailed or StatusCancelled.
	Status Status
	// Error is the reason the task keeps.
	Error string
}

// Validate checks a.
func (a WaitAbandon) Validate() error {
	switch {
	case CheckID(a.ID) != nil:
		return CheckID(a.ID)
	case a.Status != StatusFailed && a.Status != StatusCancelled:
		return fmt.Errorf("%w: an abandoned wait ends FAILED or CANCELLED, not %q", ErrInvalid, a.Status)
	case a.Error == "":
		return fmt.Errorf("%w: an abandoned wait needs a reason", ErrInvalid)
	}
	return nil
}
