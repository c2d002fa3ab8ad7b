package lease

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/leasehold/leasehold/internal/defaults"
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
	Checkpoint(ctx context.Context, l Lease, st Step) (Task, error)

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
	waitAbandoner
	historian
}

// historian is the Store methods of a history's spilled tail. They are part
// of Store; they are declared apart so that their documentation sits with
// the layout they keep (docs/workflows.md, "History beyond the item").
type historian interface {
	// Spill freezes the inline head of the task held under l at its n
	// steps, only while l is held and the head has n steps: no Checkpoint
	// adds to it afterwards (they are refused with ErrInvalid), and the
	// history goes on in step items (PutStep, from position n). A head
	// frozen at n already is left as it is. It returns the task.
	Spill(ctx context.Context, l Lease, n int) (Task, error)
	// PutStep records st as the operation at position pos of task id's
	// history, in an item of its own (StepKey), if that position holds
	// none: the first writer wins. It returns the operation recorded
	// there: st, or the one an earlier write recorded. It does not check
	// a lease (docs/workflows.md says why that is safe): the caller wrote
	// or replayed every position before pos, over a frozen head.
	PutStep(ctx context.Context, id string, pos int, st Step) (Step, error)
	// ReadSteps reads the operations of task id's tail at positions from,
	// from+1, ..., at most n of them (n ≤ MaxStepsPage), strongly
	// consistent, and returns those before the first position that holds
	// none.
	ReadSteps(ctx context.Context, id string, from, n int) ([]Step, error)
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
	// Continue starts the workflow's next run (continue-as-new;
	// StatusPending only): the task's payload becomes Continue, its
	// recorded steps and its wait are cleared, Run grows by one and the
	// count of attempts starts again (Attempt 0), as after a wait. The
	// caller archives the ending run first (the stores' ArchiveRun).
	Continue []byte
}

// RunID is the id of run (0-based) of the task id once archived: id,
// "@run" and the run's 1-based number.
func RunID(id string, run int) string { return id + "@run" + strconv.Itoa(run+1) }

// Validate checks that r describes a possible transition.
func (r Release) Validate() error {
	switch r.Status {
	case StatusPending:
		if r.RunAt.IsZero() {
			return fmt.Errorf("%w: release to PENDING needs a run-at time", ErrInvalid)
		}
	case StatusFailed, StatusCancelled:
		if r.Continue != nil {
			return fmt.Errorf("%w: a continue-as-new release goes back to PENDING", ErrInvalid)
		}
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
	defaultLeaseDuration = defaults.LeaseDuration
	DefaultSkew          = defaults.ClockSkew
	DefaultDispatchGrace = defaults.DispatchGrace
	defaultRetention     = defaults.Retention
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
	// WorkQueue is the name of the default work queue, as a worker's
	// creates record it for a task that came by it: such a task is
	// listed by no queue (the default has no listing of its own), so its
	// item gets no queue_at and its listing costs no by_queue write.
	WorkQueue string
}

// WithDefaults returns o with every unset field at its default.
func (o Options) WithDefaults() Options {
	if o.Clock == nil {
		o.Clock = clockwork.NewRealClock()
	}
	if o.LeaseDuration <= 0 {
		o.LeaseDuration = defaultLeaseDuration
	}
	if o.Skew <= 0 {
		o.Skew = DefaultSkew
	}
	if o.DispatchGrace <= 0 {
		o.DispatchGrace = DefaultDispatchGrace
	}
	if o.Retention == 0 {
		o.Retention = defaultRetention
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = defaults.CallTimeout
	}
	return o
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

// waitAbandoner is the Store method that ends a wait that is not over. It
// is part of Store; it is declared apart so that its documentation sits
// with the rule it serves (docs/states.md, "Every wait ends").
type waitAbandoner interface {
	// AbandonWait ends the wait of a task WAITING for children or
	// dependencies under a.Fence, FAILED or CANCELLED with a.Error,
	// whether or not what it waits for has ended: its deadline passed, or
	// the wait can never be over. It removes the task's sweep entry. A
	// task that no longer waits under that fence gives a *WaitError
	// matching ErrNotWaiting, a finished one *FinishedError, both with the
	// task.
	AbandonWait(ctx context.Context, a WaitAbandon) (Task, error)
}
