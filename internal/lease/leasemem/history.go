package leasemem

import (
	"bytes"
	"context"
	"fmt"

	"github.com/leasehold/leasehold/internal/lease"
)

// errFrozen: a checkpoint into the inline head of a task whose history has
// spilled (lease.Store.Spill).
var errFrozen = fmt.Errorf("%w: the task's inline steps are frozen: its history goes on in step items", lease.ErrInvalid)

// Spill implements lease.Store.
func (s *Store) Spill(ctx context.Context, l lease.Lease, n int) (lease.Task, error) {
	if err := l.Validate(); err != nil {
		return lease.Task{}, fmt.Errorf("spill: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, true); err != nil {
		return lease.Task{}, err
	}
	rec, err := s.held("spill", l)
	if err != nil {
		return lease.Task{}, err
	}
	if len(rec.Steps) != n {
		return clone(rec), fmt.Errorf("spill %s: %w: the head has %d steps, not %d", l.TaskID, lease.ErrInvalid, len(rec.Steps), n)
	}
	if !rec.Spilled {
		rec.Spilled = true
		rec.UpdatedAt = s.now()
	}
	return clone(rec), nil
}

// PutStep implements lease.Store.
func (s *Store) PutStep(ctx context.Context, id string, pos int, st lease.Step) (lease.Step, error) {
	if err := lease.CheckTail(id, pos, 1); err != nil {
		return lease.Step{}, fmt.Errorf("put step: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, true); err != nil {
		return lease.Step{}, err
	}
	key := lease.StepKey(id, pos)
	if had, ok := s.tail[key]; ok {
		return clone1(had), nil
	}
	if s.tail == nil {
		s.tail = map[string]lease.Step{}
	}
	kept := clone1(st)
	s.tail[key] = kept
	return clone1(kept), nil
}

// ReadSteps implements lease.Store.
func (s *Store) ReadSteps(ctx context.Context, id string, from, n int) ([]lease.Step, error) {
	if err := lease.CheckTail(id, from, n); err != nil {
		return nil, fmt.Errorf("read steps: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, false); err != nil {
		return nil, err
	}
	var out []lease.Step
	for pos := from; pos < from+n; pos++ {
		st, ok := s.tail[lease.StepKey(id, pos)]
		if !ok {
			break
		}
		out = append(out, clone1(st))
	}
	return out, nil
}

func clone1(st lease.Step) lease.Step {
	st.Result = bytes.Clone(st.Result)
	return st
}
