package query

import (
	"context"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
)

// Rules both stores apply to the Admin methods, so they answer alike.

// MaxListLimit is the largest page List returns.
const MaxListLimit = 1000

// MaxDueLimit is the largest batch Due returns.
const MaxDueLimit = 1000

// CancelledWhilePending is the error, and the history entry's error, of a
// task RequestCancel cancelled while it was PENDING.
const CancelledWhilePending = "cancelled while pending"

// ListView is what List returns of t: the fields the status index projects.
// Payload, result, lease, fence, history and the cancel flag are left out; Get
// has them.
func ListView(t lease.Task) lease.Task {
	return lease.Task{
		ID:          t.ID,
		Kind:        t.Kind,
		Status:      t.Status,
		Attempt:     t.Attempt,
		MaxAttempts: t.MaxAttempts,
		RunAt:       t.RunAt,
		Error:       t.Error,
		CreatedAt:   t.CreatedAt,
		UpdatedAt:   t.UpdatedAt,
		FinishedAt:  t.FinishedAt,
		Queue:       t.Queue,
	}
}

// stopByKey is the context key of WithStopBy's time.
type stopByKey struct{}

// WithStopBy is ctx with a time by which a listing should have answered
// (ListOptions.StopBy of the client); zero t leaves ctx as it is. It is
// not a deadline: the calls under way finish, and the first read of a
// listing is always made, so that paging on makes progress however slow
// the table is.
func WithStopBy(ctx context.Context, t time.Time) context.Context {
	if t.IsZero() {
		return ctx
	}
	return context.WithValue(ctx, stopByKey{}, t)
}

// Stopping reports whether a listing should stop reading and answer with
// what it has: less than next, the time its next read is expected to take
// (its slowest so far), is left before ctx's stop-by time (WithStopBy) or
// its deadline. A caller with a page budget (the inspector, `leasehold
// list`) gets a short page with a cursor instead of an error when a rare
// status or filter would read past it.
func Stopping(ctx context.Context, next time.Duration) bool {
	if t, ok := ctx.Value(stopByKey{}).(time.Time); ok && time.Until(t) < next {
		return true
	}
	dl, ok := ctx.Deadline()
	return ok && time.Until(dl) < next
}

// CheckList validates the arguments of List.
func CheckList(status lease.Status, limit int) error {
	switch {
	case !status.Valid():
		return fmt.Errorf("list: %w: unknown status %q", lease.ErrInvalid, status)
	case limit < 1 || limit > MaxListLimit:
		return fmt.Errorf("list: %w: limit %d is outside 1..%d", lease.ErrInvalid, limit, MaxListLimit)
	}
	return nil
}

// CheckListBy validates the arguments of ListBy.
func CheckListBy(status lease.Status, by ListBy, limit int) error {
	if err := CheckList(status, limit); err != nil {
		return err
	}
	switch {
	case len(by.Kind) > lease.MaxKindBytes:
		return fmt.Errorf("list: %w: kind is %d bytes, the limit is %d", lease.ErrInvalid, len(by.Kind), lease.MaxKindBytes)
	case len(by.Queue) > maxQueueBytes:
		return fmt.Errorf("list: %w: queue name is %d bytes, the limit is %d", lease.ErrInvalid, len(by.Queue), maxQueueBytes)
	}
	return nil
}

// maxQueueBytes is the longest SQS queue name.
const maxQueueBytes = 80

// CheckDue validates the arguments of Due.
func CheckDue(shard string, limit int) error {
	for _, s := range lease.Shards() {
		if s == shard {
			if limit < 1 || limit > MaxDueLimit {
				return fmt.Errorf("due: %w: limit %d is outside 1..%d", lease.ErrInvalid, limit, MaxDueLimit)
			}
			return nil
		}
	}
	return fmt.Errorf("due: %w: unknown shard %q", lease.ErrInvalid, shard)
}

// CheckRetry validates the arguments of Retry.
func CheckRetry(id string, extraAttempts int) error {
	if extraAttempts < 1 || extraAttempts > lease.MaxAttemptsLimit {
		return fmt.Errorf("retry %s: %w: extra attempts %d is outside 1..%d", id, lease.ErrInvalid, extraAttempts, lease.MaxAttemptsLimit)
	}
	return nil
}

// ClassifyRetry explains why a retry of id with extraAttempts did not land,
// from the item the write saw (nil when there was none).
func ClassifyRetry(id string, old *lease.Task, extraAttempts int) error {
	switch {
	case old == nil:
		return fmt.Errorf("retry %s: %w", id, lease.ErrNotFound)
	case old.Status != lease.StatusFailed && old.Status != lease.StatusCancelled:
		return fmt.Errorf("retry %s: %w: it is %s", id, ErrNotRetryable, old.Status)
	case lease.IsPlaceholder(*old):
		return fmt.Errorf("retry %s: %w: it was cancelled with its parent %s before it was created, so it has no kind or payload to run; retry the parent",
			id, ErrNotRetryable, lease.DisplayID(old.Parent))
	case old.Attempt+extraAttempts > lease.MaxAttemptsLimit:
		return fmt.Errorf("retry %s: %w: %d used + %d more attempts is over the limit of %d",
			id, lease.ErrInvalid, old.Attempt, extraAttempts, lease.MaxAttemptsLimit)
	}
	return fmt.Errorf("retry %s: %w: the task changed during the retry", id, lease.ErrBackend)
}

// CheckMarkDispatched validates the arguments of MarkDispatched.
func CheckMarkDispatched(id string, seen, next time.Time) error {
	if seen.IsZero() || next.IsZero() {
		return fmt.Errorf("mark dispatched %s: %w: seen and next times are required", id, lease.ErrInvalid)
	}
	return nil
}
