package rules

import (
	"fmt"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
)

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
