package query

import (
	"context"
	"errors"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
)

// Admin is the operator side of the store: dispatch bookkeeping for the
// sweeper, listing, cancellation and retry. Both stores implement it and
// pass the same conformance cases. Every method but List and Due is one
// conditional write; a failed condition is classified from the item the
// write saw, as in Store.
type Admin interface {
	// Due lists up to limit tasks of one shard of the sparse sweep index
	// whose DispatchAt is at or before now, oldest first.
	Due(ctx context.Context, shard string, now time.Time, limit int) ([]DueTask, error)
	// MarkDispatched moves a due task's DispatchAt from seen to next, only
	// if it still is seen: of two sweepers that saw the same entry, one
	// wins and the other gets ErrDispatchRaced. A task that left the index
	// in between also gives ErrDispatchRaced. It returns the task's queue
	// (Task.Queue; empty for the default work queue), where the token goes.
	// A RUNNING task the sweep still leaves to its holder (HolderWaits) also
	// gives ErrDispatchRaced: claims and renewals leave the sweep entry where
	// it is, so it can come due while the holder works; its DispatchAt then
	// moves to the lease's expiry plus skew plus grace and no token is needed.
	MarkDispatched(ctx context.Context, id string, seen, next time.Time) (queue string, err error)
	// RequestCancel cancels a task that has not ended, whatever other
	// writers do meanwhile: no claim, renewal, checkpoint, release or
	// suspension makes it fail. Its effect is CancelRequested, the flag that
	// dooms the task: a PENDING or WAITING task is ended at once
	// (CANCELLED, terminal) and returned so; a RUNNING one is returned
	// flagged, and its worker cancels the handler at its next renewal (the
	// task may still end SUCCEEDED or FAILED if the handler returns first).
	// Only if other writers keep moving a PENDING or WAITING task between
	// PENDING and WAITING without claiming it, which no worker does, is it
	// returned flagged and not ended: whoever next meets it (a claim, a
	// resume, a cancel) ends it. A terminal task gives *FinishedError.
	RequestCancel(ctx context.Context, id string) (lease.Task, error)
	// Retry puts a FAILED or CANCELLED task back to PENDING, due now, with
	// extraAttempts more attempts than it has used. Attempt count and
	// history are kept. Any other status gives ErrNotRetryable.
	Retry(ctx context.Context, id string, extraAttempts int) (lease.Task, error)
	// List returns tasks with the given status, newest first within each
	// page's merge, at most limit of them, and an opaque cursor for the next
	// page ("" when there is none). Payload and result are not included.
	// A page ends short of limit with a cursor only when the listing stopped
	// for ctx's stop-by time or deadline (see Stopping): it answers with
	// what it read in time rather than fail, and every call reads at least
	// one chunk, so paging on makes progress.
	List(ctx context.Context, status lease.Status, limit int, cursor string) ([]lease.Task, string, error)
	// ListBy is List narrowed to the tasks of one kind, or of one named
	// queue, or both (ListBy): it reads the listing of that kind (or
	// queue), so a rare kind costs the reads of its own tasks only, in the
	// same order, with the same paging, stopping and completeness as List.
	// A zero by is List. Its cursors are valid only with the same status
	// and by.
	ListBy(ctx context.Context, status lease.Status, by ListBy, limit int, cursor string) ([]lease.Task, string, error)
}

// ListBy selects the tasks of one kind, or one named queue, or both, for
// Admin.ListBy; and, for Lister.WriteListing, names the kind and queue that
// every task of a batch listing entry shares. Zero fields select every
// task. The default work queue ("") has no listing of its own: a caller
// after its tasks filters a listing by status (or by kind) instead, which
// for the queue most tasks go to reads mostly matches anyway.
type ListBy struct {
	Kind  string
	Queue string
}

// IsZero reports whether by selects every task.
func (by ListBy) IsZero() bool { return by == ListBy{} }

// Matches reports whether by selects t.
func (by ListBy) Matches(t lease.Task) bool {
	return (by.Kind == "" || t.Kind == by.Kind) && (by.Queue == "" || t.Queue == by.Queue)
}

// DueTask is one entry of the sweep index.
type DueTask struct {
	ID         string
	DispatchAt time.Time
}

var (
	// ErrDispatchRaced: another sweeper dispatched the task first, or it no
	// longer waits for dispatch.
	ErrDispatchRaced = errors.New("task dispatch raced")
	// ErrNotRetryable: only FAILED and CANCELLED tasks can be retried.
	ErrNotRetryable = errors.New("task is not retryable")
	// ErrBadCursor: a List cursor that this store did not issue.
	ErrBadCursor = errors.New("invalid list cursor")
)
