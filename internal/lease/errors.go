package lease

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors. Callers test them with errors.Is; the typed errors below
// match them and carry the details read from the item that failed the
// condition (DynamoDB hands it back with the failure, so no second read).
var (
	// ErrNotFound: no task has this id.
	ErrNotFound = errors.New("task not found")
	// ErrAlreadyExists: Create or CreateClaimed found a task with this id,
	// kind and payload: the submission is a duplicate.
	ErrAlreadyExists = errors.New("task already exists")
	// ErrConflict: Create or CreateClaimed found a task with this id but
	// another kind or payload (see *ConflictError). It does not match
	// ErrAlreadyExists, so code that treats a duplicate as success can
	// never take a conflict for one.
	ErrConflict = errors.New("task id conflict")
	// ErrLeased: another holder's lease is still live (see *LeasedError).
	ErrLeased = errors.New("task is leased by another worker")
	// ErrFinished: the task reached a terminal status (see *FinishedError).
	ErrFinished = errors.New("task already finished")
	// ErrNotDue: the task may not start yet (see *NotDueError).
	ErrNotDue = errors.New("task is not due yet")
	// ErrLeaseLost: the caller's lease is gone: another worker claimed the
	// task, or it was released, finished or cancelled.
	ErrLeaseLost = errors.New("lease lost")
	// ErrAttemptsExhausted: an expired lease was found on the task's last
	// attempt, so it may not be claimed again (see *ExhaustedError).
	ErrAttemptsExhausted = errors.New("task attempts exhausted")
	// ErrInvalid: a submission or a call argument breaks a rule.
	ErrInvalid = errors.New("invalid task")
	// ErrTooLarge: a payload or result is over its limit (see *TooLargeError).
	ErrTooLarge = errors.New("too large")
	// ErrBackend wraps every failure of the store itself (network, throttling,
	// service errors); such errors are worth retrying.
	ErrBackend = errors.New("lease store backend error")
)

// LeasedError reports a claim that lost to a live lease.
type LeasedError struct {
	TaskID    string
	Owner     string
	Until     time.Time
	Remaining time.Duration // until the lease can be taken over (expiry + skew)
	// Task is the stored item the failed write saw. A claimant that finds
	// its own name in Task.LeaseOwner is looking at its own claim, whose
	// response was lost (see ClaimedBy).
	Task Task
}

func (e *LeasedError) Error() string {
	return fmt.Sprintf("task %s is leased by %s for %s more", e.TaskID, e.Owner, e.Remaining.Round(time.Millisecond))
}

func (e *LeasedError) Is(target error) bool { return target == ErrLeased }

// FinishedError reports an operation on a task in a terminal status.
type FinishedError struct {
	TaskID string
	Status Status
	// Task is the stored item the failed write saw, when the store had it
	// (zero otherwise).
	Task Task
}

func (e *FinishedError) Error() string {
	return fmt.Sprintf("task %s already finished as %s", e.TaskID, e.Status)
}

func (e *FinishedError) Is(target error) bool { return target == ErrFinished }

// NotDueError reports a claim made before the task's run_at.
type NotDueError struct {
	TaskID string
	RunAt  time.Time
}

func (e *NotDueError) Error() string {
	return fmt.Sprintf("task %s is not due until %s", e.TaskID, e.RunAt.UTC().Format(time.RFC3339Nano))
}

func (e *NotDueError) Is(target error) bool { return target == ErrNotDue }

// ExhaustedError reports a task whose last attempt's lease expired. Task is
// the stored record; its lease (Task.LeaseOf) lets the caller release it as
// FAILED with one fenced write.
type ExhaustedError struct {
	Task Task
}

func (e *ExhaustedError) Error() string {
	return fmt.Sprintf("task %s used %d of %d attempts", e.Task.ID, e.Task.Attempt, e.Task.MaxAttempts)
}

func (e *ExhaustedError) Is(target error) bool { return target == ErrAttemptsExhausted }

// ConflictError reports a submission whose id names a stored task of another
// kind or with another payload. Nothing was written.
type ConflictError struct {
	TaskID string
	// Field is what differs: "kind" or "payload" (kind is checked first).
	Field string
	// Status is the stored task's status.
	Status Status
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("id conflict: task %s exists (%s) with another %s", DisplayID(e.TaskID), e.Status, e.Field)
}

func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// TooLargeError reports a payload or result over its limit.
type TooLargeError struct {
	What  string // "payload" or "result"
	Size  int
	Limit int
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s is %d bytes, over the %d-byte limit", e.What, e.Size, e.Limit)
}

func (e *TooLargeError) Is(target error) bool { return target == ErrTooLarge || target == ErrInvalid }

// LeaseLostError reports a renew, finish or release whose lease is no longer
// the task's. Task is the item the failed conditional write saw (DynamoDB
// returns it with the failure), so the caller can tell, without a read,
// whether the task is finished, held by someone else, or shows the caller's
// own ending write (see Landed).
type LeaseLostError struct {
	Op    string
	Lease Lease
	Task  Task
}

func (e *LeaseLostError) Error() string {
	return fmt.Sprintf("%s %s (fence %d, now %d, %s): %s", e.Op, e.Lease.TaskID, e.Lease.Fence, e.Task.Fence, e.Task.Status, ErrLeaseLost)
}

func (e *LeaseLostError) Is(target error) bool { return target == ErrLeaseLost }

// Observed returns the stored task a failed write saw, if err carries one.
func Observed(err error) (Task, bool) {
	var (
		lost     *LeaseLostError
		leased   *LeasedError
		finished *FinishedError
		ex       *ExhaustedError
	)
	switch {
	case errors.As(err, &lost):
		return lost.Task, true
	case errors.As(err, &leased) && leased.Task.ID != "":
		return leased.Task, true
	case errors.As(err, &finished) && finished.Task.ID != "":
		return finished.Task, true
	case errors.As(err, &ex):
		return ex.Task, true
	}
	return Task{}, false
}
