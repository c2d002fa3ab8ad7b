package leasemem

import (
	"context"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/rules"
)

// CreateCancelled implements lease.Store.
func (s *Store) CreateCancelled(ctx context.Context, id, parent, reason string) (lease.Task, error) {
	rec, _, err := rules.Placeholder(id, parent, reason, s.now(), s.opts.Retention)
	if err != nil {
		return lease.Task{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, true); err != nil {
		return lease.Task{}, err
	}
	if old, ok := s.tasks[id]; ok {
		return clone(old), fmt.Errorf("cancel child %s: %w", lease.DisplayID(id), lease.ErrAlreadyExists)
	}
	s.store(&rec, lease.NewTask{ID: id, Parent: parent})
	return clone(&rec), nil
}

// EndWaiting implements lease.Store.
func (s *Store) EndWaiting(ctx context.Context, prev lease.Task, status lease.Status, reason string) (lease.Task, error) {
	if err := rules.CheckEndWaiting(prev, status); err != nil {
		return lease.Task{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, true); err != nil {
		return lease.Task{}, err
	}
	rec, old := s.find(prev.ID, func(t *lease.Task) bool { return rules.EndWaitingLands(prev, *t) })
	if rec == nil {
		return lease.Task{}, rules.ClassifyEndWaiting(prev, old)
	}
	reason = lease.Truncate(reason, lease.MaxErrorBytes)
	s.end(rec, status, reason, s.now())
	rec.Error = reason
	rec.WaitUntil, rec.CallbackHash, rec.CallbackStep = time.Time{}, "", ""
	return clone(rec), nil
}
