package lease

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/leasehold/leasehold/settings"
)

// Store is the lease store: every method is one conditional write (Get is one
// read). A failed condition is classified from the item the write saw, into
// the errors of errors.go; anything else wraps ErrBackend.
type Store interface {
	// Create persists a PENDING task. It is idempotent: when a task with
	// this id, kind and payload exists, it returns the stored task and
	// ErrAlreadyExists; when the id is taken by another kind or payload, it
	// returns the stored task and a *ConflictError (see CheckDuplicate).
	Create(ctx context.Context, t NewTask) (Task, error)
	// CreateClaimed persists a task already RUNNING under a lease held by
	// owner (attempt 1, fence 1), so an inline task costs one write to start.
	// When the id exists it returns the stored task and ErrAlreadyExists
	// (the caller falls back to Claim) or a *ConflictError, as Create does.
	// The task gets no sweep entry (DispatchAt stays zero): the message it
	// arrived in is still live and brings it back if the worker dies, and a
	// worker replaces that message with a fresh token before it could reach
	// the dead-letter queue. So an inline task moves no index key.
	CreateClaimed(ctx context.Context, t NewTask, owner string) (Task, error)
	// CreateFailed persists a task already FAILED with reason, never to run
	// (attempt 0, no lease): a submission that names a task but cannot be
	// run, such as an over-limit payload, is recorded in one write, with no
	// moment at which another token could claim and run it. When the id
	// exists it returns the stored task and ErrAlreadyExists.
	CreateFailed(ctx context.Context, t NewTask, reason string) (Task, error)
	// Claim takes the lease of a PENDING task that is due, or of a RUNNING
	// task whose lease expired more than the skew bound ago. It returns the
	// whole task, payload included. It leaves DispatchAt as it was.
	Claim(ctx context.Context, id, owner string) (Task, error)
	// Renew extends a held lease by the lease duration. The returned task
	// carries CancelRequested.
	Renew(ctx context.Context, l Lease) (Task, error)
	// Finish records the result and marks the task SUCCEEDED, only while l
	// is still the task's lease.
	Finish(ctx context.Context, l Lease, result []byte) (Task, error)
	// Release gives the lease up: back to PENDING for a later attempt, or to
	// a terminal FAILED or CANCELLED.
	Release(ctx context.Context, l Lease, r Release) (Task, error)
	// Get reads one task (strongly consistent).
	Get(ctx context.Context, id string) (Task, error)

	// Suspend ends the attempt held under l and parks the task WAITING for
	// w, without a lease and without a sweep entry (the messages that end
	// the wait are sent before it). A wait for children is progress, not
	// a failure: the count of attempts starts again
	// (Attempt 0), so MaxAttempts bounds the attempts between two
	// suspensions and the resumed run is attempt 1. A callback wait keeps
	// its attempt until it ends (EndWait). A history entry records it.
	// The task's Error, an earlier attempt's, is cleared (the history
	// keeps it).
	Suspend(ctx context.Context, l Lease, w Wait) (Task, error)
	// Watch registers w on task id, to be notified when id ends. A task
	// that has ended gives *FinishedError with the task (the caller
	// notifies w itself); a missing one ErrNotFound.
	Watch(ctx context.Context, id string, w Waiter) (Task, error)
	// Notify tells waiter w that ended has ended and returns w's task
	// after the write. It adds ended.ID to the waiter's Ended set, or, for a
	// strict dependency that did not succeed, cancels the WAITING waiter
	// with the reason. A waiter that heard of it already gives a
	// *WaitError matching ErrNotified, a terminal one *FinishedError, both
	// with the task.
	Notify(ctx context.Context, w Waiter, ended Task) (Task, error)
	// Resume ends the wait of a WAITING task whose wait is over (the
	// caller checked Complete on the task it saw), only while it still
	// waits under fence. With owner "" the task becomes PENDING, due now
	// and carried by a token the caller sent before (no sweep entry);
	// otherwise it is claimed for owner at once, as Claim would.
	Resume(ctx context.Context, id string, fence int64, owner string) (Task, error)
	// EndWait ends a callback wait with the token's fence and nonce: the
	// task SUCCEEDS with the result, FAILS, or is released for a retry.
	// Exactly one EndWait per wait lands; the rest get a *WaitError or a
	// *FinishedError.
	EndWait(ctx context.Context, e WaitEnd) (Task, error)
	// Checkpoint records a step's result under l, only while l is held:
	// the handler's later attempts find it (Task.Steps) and skip the step.
	Checkpoint(ctx context.Context, l Lease, step string, result []byte) (Task, error)

	// CreateCancelled persists a placeholder for id, a child of parent
	// that has no item yet: CANCELLED with reason, no kind, no payload,
	// the parent as its waiter (see IsPlaceholder). A parent that ends
	// before its children's tokens are taken writes one per child, so a
	// token that comes later finds its task ended and never creates or
	// runs it. parent may be empty: a chain's link whose predecessor did
	// not succeed is one too. When the id exists it returns the stored
	// task and ErrAlreadyExists, whatever that task is.
	CreateCancelled(ctx context.Context, id, parent, reason string) (Task, error)
	// EndWaiting ends prev, a WAITING task as the caller saw it, as
	// CANCELLED or FAILED with reason, only while it still waits under
	// prev's fence and attempt; a history entry records it. A task that
	// moved on gives a *WaitError matching ErrNotWaiting, a terminal one
	// *FinishedError, both with the task.
	EndWaiting(ctx context.Context, prev Task, status Status, reason string) (Task, error)
	WaitAbandoner
}

// ManyGetter reads many tasks in few calls: both stores implement it; a
// caller falls back to Get for a Store that does not.
type ManyGetter interface {
	// GetMany reads the tasks ids (strongly consistent), in the order of
	// ids; a task that does not exist has only its ID. Repeated ids are
	// read once and returned at each place.
	GetMany(ctx context.Context, ids []string) ([]Task, error)
}

// ManyInOrder lays found out in the order of ids, a task not found as one
// with only its ID.
func ManyInOrder(ids []string, found map[string]Task) []Task {
	out := make([]Task, len(ids))
	for i, id := range ids {
		t, ok := found[id]
		if !ok {
			t = Task{ID: id}
		}
		out[i] = t
	}
	return out
}

// Release says how a lease is given up.
type Release struct {
	// Status is StatusPending (try again at RunAt), StatusFailed or
	// StatusCancelled.
	Status Status
	// RunAt is the earliest start of the next attempt (StatusPending only).
	RunAt time.Time
	// DispatchAt is when the sweeper should dispatch the task if no claim
	// happened by then (StatusPending only). Zero means RunAt plus the
	// dispatch grace: the releaser sends a delayed message itself, and the
	// sweep is only the safety net.
	DispatchAt time.Time
	// Error is the reason, kept on the task and in its history.
	Error string
	// RefundAttempt hands the attempt back (a snooze is not a failure).
	RefundAttempt bool
	// UnknownKind: the worker has no handler for the task's kind
	// (StatusPending only). The attempt is handed back without counting as
	// a snooze, and Task.UnknownKindSince is set unless already set. Every
	// other ending clears UnknownKindSince.
	UnknownKind bool
}

// Validate checks that r describes a possible transition.
func (r Release) Validate() error {
	switch r.Status {
	case StatusPending:
		if r.RunAt.IsZero() {
			return fmt.Errorf("%w: release to PENDING needs a run-at time", ErrInvalid)
		}
	case StatusFailed, StatusCancelled:
		if r.UnknownKind {
			return fmt.Errorf("%w: an unknown-kind release goes back to PENDING", ErrInvalid)
		}
	default:
		return fmt.Errorf("%w: cannot release to status %q", ErrInvalid, r.Status)
	}
	return nil
}

// Defaults for Options.
const (
	DefaultLeaseDuration = settings.DefaultLeaseDuration
	DefaultSkew          = settings.DefaultClockSkew
	DefaultDispatchGrace = settings.DefaultDispatchGrace
	DefaultRetention     = settings.DefaultRetention
)

// ParseListing reads a LEASEHOLD_LISTING value: "on" (listed, the default
// when empty) or "off" (Options.Unlisted).
func ParseListing(v string) (unlisted bool, err error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "", "on":
		return false, nil
	case "off":
		return true, nil
	}
	return false, fmt.Errorf("%w: listing %q is neither on nor off", ErrInvalid, v)
}

// Options configure a store. The zero value of each field takes its default.
type Options struct {
	// Clock is the time source; tests inject a fake one.
	Clock clockwork.Clock
	// LeaseDuration is how long a claim or renewal holds the lease.
	LeaseDuration time.Duration
	// Skew bounds the clock difference between workers: an expired lease is
	// taken over only once it has been expired for this long.
	Skew time.Duration
	// DispatchGrace is how long past its expected start a task may go
	// unclaimed before the sweeper treats its message as lost.
	DispatchGrace time.Duration
	// Retention is how long a finished task is kept before DynamoDB's TTL
	// removes it. Negative keeps finished tasks forever.
	Retention time.Duration
	// CallTimeout bounds each call to the backing service.
	CallTimeout time.Duration
	// Unlisted creates tasks without a listing entry: no index write at
	// all, and List does not see them (Get still does). It saves one write
	// unit per task; docs/performance.md has the numbers.
	Unlisted bool
}

// WithDefaults returns o with every unset field at its default.
func (o Options) WithDefaults() Options {
	if o.Clock == nil {
		o.Clock = clockwork.NewRealClock()
	}
	if o.LeaseDuration <= 0 {
		o.LeaseDuration = DefaultLeaseDuration
	}
	if o.Skew <= 0 {
		o.Skew = DefaultSkew
	}
	if o.DispatchGrace <= 0 {
		o.DispatchGrace = DefaultDispatchGrace
	}
	if o.Retention == 0 {
		o.Retention = DefaultRetention
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = settings.DefaultCallTimeout
	}
	return o
}

// ClassifyClaim explains why a claim of id at now did not land, from the item
// the conditional write saw (nil when there was none). Both stores use it, so
// they classify alike.
func ClassifyClaim(id string, old *Task, now time.Time, skew time.Duration) error {
	if old == nil {
		return fmt.Errorf("claim %s: %w", id, ErrNotFound)
	}
	switch {
	case old.Status.Terminal():
		return &FinishedError{TaskID: id, Status: old.Status, Task: *old}
	case old.Status == StatusWaiting:
		return &WaitingError{Task: *old}
	case old.Status == StatusPending && old.RunAt.After(now):
		return &NotDueError{TaskID: id, RunAt: old.RunAt}
	case old.Status == StatusRunning && !old.LeaseUntil.Add(skew).Before(now):
		return &LeasedError{TaskID: id, Owner: old.LeaseOwner, Until: old.LeaseUntil, Remaining: old.LeaseUntil.Add(skew).Sub(now), Task: *old}
	case old.Attempt >= old.MaxAttempts:
		return &ExhaustedError{Task: *old}
	}
	// The condition failed, yet the item seen would have passed: it changed
	// between evaluation and report. Treat it as taken by someone else.
	return &LeasedError{TaskID: id, Owner: old.LeaseOwner, Until: old.LeaseUntil, Task: *old}
}

// ClassifyHeld explains why a renew, finish or release under l did not land.
func ClassifyHeld(op string, l Lease, old *Task) error {
	if old == nil {
		return fmt.Errorf("%s %s: %w", op, l.TaskID, ErrNotFound)
	}
	if Holds(*old, l) {
		// The lease is still held, so another part of the condition failed:
		// the history the write meant to trim changed under the lease.
		return fmt.Errorf("%s %s: %w: the task's history changed while the lease was held", op, l.TaskID, ErrBackend)
	}
	return &LeaseLostError{Op: op, Lease: l, Task: *old}
}

// Landed reports whether observed, the item a failed finish or release
// under l saw, shows that an ending write under l to status has already
// landed: the caller's own earlier try, whose response was lost before the
// SDK retried. Only the holder of l can end the attempt under its fence, so a
// history entry naming that fence and attempt with that status is the
// caller's own write, even when the task has moved on since (released to
// PENDING and claimed again).
func Landed(l Lease, status Status, observed Task) bool {
	if observed.ID != l.TaskID {
		return false
	}
	for _, a := range slices.Backward(observed.History) {
		if a.Fence == l.Fence && a.Attempt == l.Attempt && a.Status == status {
			return true
		}
	}
	return false
}

// ClaimedBy reports whether observed, the item a failed claim by owner saw,
// is held by owner itself: a claim (or create-and-claim) whose response was
// lost landed, and the SDK's retry met its own lease. Owner names must be
// unique per claimant for this to mean anything.
func ClaimedBy(owner string, observed Task) bool {
	return owner != "" && observed.Status == StatusRunning && observed.LeaseOwner == owner
}

// SameCreate answers a create of want that found old stored under its own
// create token: old is this task. A plain create succeeds with old. A
// CreateClaimed succeeds only when old is held under want's own lease (its
// own earlier put, whose answer was lost); when the other holder of the
// token stored it first, the lease is not this caller's, and it gets old
// with ErrAlreadyExists so that it claims the task instead.
func SameCreate(want, old Task, n NewTask) (Task, error) {
	if want.Status == StatusRunning && !(ClaimedBy(want.LeaseOwner, old) && old.Fence == want.Fence) {
		return old, fmt.Errorf("create %s: %w", n.ID, ErrAlreadyExists)
	}
	return old, nil
}

// Claimable reports whether a claim of t at now may land: the condition
// both stores evaluate.
func Claimable(t Task, now time.Time, skew time.Duration) bool {
	if t.Attempt >= t.MaxAttempts {
		return false
	}
	switch t.Status {
	case StatusPending:
		return !t.RunAt.After(now)
	case StatusRunning:
		return t.LeaseUntil.Add(skew).Before(now)
	}
	return false
}

// Holds reports whether l is the lease t is held under. The attempt never
// changes while a lease is held, so comparing it only guards the history
// entry an ending write records against a lease built by hand.
func Holds(t Task, l Lease) bool {
	return t.Status == StatusRunning && t.LeaseOwner == l.Owner && t.Fence == l.Fence && t.Attempt == l.Attempt
}

// HolderWaits reports whether the sweep, at now, still leaves t to its
// holder: t is RUNNING and its lease expiry plus skew plus grace is after
// now. Claims and renewals leave a task's sweep entry where it is, so the
// entry can come due while the lease is live; the sweep then moves it to
// that time instead of dispatching the task.
func HolderWaits(t Task, now time.Time, skew, grace time.Duration) bool {
	return t.Status == StatusRunning && t.LeaseUntil.Add(skew+grace).After(now)
}

// WaitAbandoner is the Store method that ends a wait that is not over. It
// is part of Store; it is declared apart so that its documentation sits
// with the rule it serves (docs/states.md, "Every wait ends").
type WaitAbandoner interface {
	// AbandonWait ends the wait of a task WAITING for children or
	// dependencies under a.Fence, FAILED or CANCELLED with a.Error,
	// whether or not what it waits for has ended: its deadline passed, or
	// the wait can never be over. It removes the task's sweep entry. A
	// task that no longer waits under that fence gives a *WaitError
	// matching ErrNotWaiting, a finished one *FinishedError, both with the
	// task.
	AbandonWait(ctx context.Context, a WaitAbandon) (Task, error)
}
