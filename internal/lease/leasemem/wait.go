package leasemem

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/rules"
)

// Suspend implements lease.Store.
func (s *Store) Suspend(ctx context.Context, l lease.Lease, w lease.Wait) (lease.Task, error) {
	return s.underLease(ctx, "suspend", l, w.Validate(), func(rec *lease.Task, now time.Time) {
		s.end(rec, lease.StatusWaiting, "", now)
		rec.Error = "" // an earlier attempt's: the history keeps it
		rec.Wait, rec.WaitNote = w.Mode, w.Note
		rec.WaitUntil, rec.DispatchAt = w.Times(now)
		rec.HeartbeatTimeout, rec.BeatUntil = w.Heartbeat, w.BeatUntil(now)
		switch w.Mode {
		case lease.WaitChildren:
			rec.WaitFor = slices.Clone(w.For)
			rec.Attempt = 0 // the count starts again (lease.Store.Suspend)
			rec.CallbackHash, rec.CallbackStep = "", ""
		case lease.WaitCallback:
			rec.CallbackHash, rec.CallbackStep = lease.CallbackHash(w.Nonce), w.Step
			rec.WaitFor = nil
		}
	})
}

// Watch implements lease.Store.
func (s *Store) Watch(ctx context.Context, id string, w lease.Waiter) (lease.Task, error) {
	if _, err := lease.ParseWaiter(w.String()); err != nil {
		return lease.Task{}, fmt.Errorf("watch %s: %w", id, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, true); err != nil {
		return lease.Task{}, err
	}
	rec, ok := s.tasks[id]
	switch {
	case !ok:
		return lease.Task{}, fmt.Errorf("watch %s: %w", id, lease.ErrNotFound)
	case rec.Status.Terminal():
		return lease.Task{}, &lease.FinishedError{TaskID: id, Status: rec.Status, Task: clone(rec)}
	case slices.Contains(rec.Waiters, w):
		return clone(rec), nil
	case len(rec.Waiters) >= lease.MaxWaiters:
		return lease.Task{}, fmt.Errorf("watch %s: %w: %d tasks wait for it already, the limit is %d", id, lease.ErrWaiterLimit, len(rec.Waiters), lease.MaxWaiters)
	}
	rec.Waiters = append(rec.Waiters, w)
	slices.SortFunc(rec.Waiters, func(a, b lease.Waiter) int { return strings.Compare(a.String(), b.String()) })
	return clone(rec), nil
}

// Notify implements lease.Store.
func (s *Store) Notify(ctx context.Context, w lease.Waiter, ended lease.Task) (lease.Task, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, true); err != nil {
		return lease.Task{}, err
	}
	rec, old := s.find(w.ID, func(t *lease.Task) bool { return rules.Notifiable(*t, w, ended) })
	if rec == nil {
		return value(old), rules.ClassifyNotify(w, ended, old)
	}
	now := s.now()
	if !slices.Contains(rec.Ended, ended.ID) {
		rec.Ended = append(rec.Ended, ended.ID)
		slices.Sort(rec.Ended)
	}
	rec.UpdatedAt = now
	if rules.NotifyCancels(w, ended) {
		rec.Status = lease.StatusCancelled
		rec.Error = rules.DependencyReason(ended)
		rec.FinishedAt = now
		rec.DispatchAt = time.Time{}
		rec.WaitUntil, rec.CallbackHash, rec.CallbackStep = time.Time{}, "", ""
		if s.opts.Retention > 0 {
			rec.ExpiresAt = time.Unix(now.Add(s.opts.Retention).Unix(), 0).UTC()
		}
	}
	return clone(rec), nil
}

// Resume implements lease.Store.
func (s *Store) Resume(ctx context.Context, id string, fence int64, owner string) (lease.Task, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, true); err != nil {
		return lease.Task{}, err
	}
	rec, old := s.find(id, func(t *lease.Task) bool { return t.Status == lease.StatusWaiting && t.Fence == fence })
	if rec == nil {
		return value(old), rules.ClassifyResume(id, old)
	}
	if owner != "" && rec.Attempt >= rec.MaxAttempts {
		old := clone(rec)
		return old, &lease.ExhaustedError{Task: old}
	}
	now := s.now()
	rec.RunAt, rec.UpdatedAt = now, now
	rec.Ended, rec.WaitUntil, rec.CallbackHash, rec.CallbackStep = nil, time.Time{}, "", ""
	rec.DispatchAt = time.Time{}
	if owner == "" {
		rec.Status = lease.StatusPending
	} else {
		s.hold(rec, owner, now)
		rec.Attempt++
		rec.Fence++
	}
	return clone(rec), nil
}

// EndWait implements lease.Store.
func (s *Store) EndWait(ctx context.Context, e lease.WaitEnd) (lease.Task, error) {
	if err := e.Validate(); err != nil {
		return lease.Task{}, fmt.Errorf("callback %s: %w", e.ID, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, true); err != nil {
		return lease.Task{}, err
	}
	rec, old := s.find(e.ID, func(t *lease.Task) bool { return rules.EndWaitLands(e, *t) && t.Attempt == e.Attempt })
	if rec == nil {
		return value(old), rules.ClassifyEndWait(e, old)
	}
	now := s.now()
	msg := lease.Truncate(e.Error, lease.MaxErrorBytes)
	status, runAt := e.Status, e.RunAt
	if step := e.ResumeStep(); step != "" && status != lease.StatusPending && !e.TimedOut {
		// The answer becomes the step; the task runs again at once, its
		// count of attempts started again (lease.Store.Suspend).
		rec.Steps = append(rec.Steps, lease.Step{Name: step, Result: rules.CallbackAnswer(status, e.Result, msg)})
		rec.Attempt = 0
		status, runAt, msg = lease.StatusPending, now, ""
	} else {
		rec.History = append(rec.History, lease.Attempt{Attempt: e.Attempt, Fence: e.Fence, Status: e.Status, Error: lease.Truncate(msg, lease.MaxHistoryErrorBytes), At: now})
	}
	rec.Status, rec.Error, rec.UpdatedAt = status, msg, now
	rec.WaitUntil, rec.CallbackHash, rec.CallbackStep = time.Time{}, "", ""
	rec.HeartbeatTimeout, rec.BeatUntil = 0, time.Time{}
	switch status {
	case lease.StatusSucceeded:
		rec.Result = bytes.Clone(e.Result)
	case lease.StatusPending:
		rec.RunAt = ms(runAt)
		rec.DispatchAt = rec.RunAt.Add(s.opts.DispatchGrace)
	}
	if status.Terminal() {
		rec.FinishedAt = now
		rec.DispatchAt = time.Time{}
		if s.opts.Retention > 0 {
			rec.ExpiresAt = time.Unix(now.Add(s.opts.Retention).Unix(), 0).UTC()
		}
	}
	return clone(rec), nil
}

// Checkpoint implements lease.Store.
func (s *Store) Checkpoint(ctx context.Context, l lease.Lease, st lease.Step) (lease.Task, error) {
	if err := l.Validate(); err != nil {
		return lease.Task{}, fmt.Errorf("checkpoint: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, true); err != nil {
		return lease.Task{}, err
	}
	rec, err := s.held("checkpoint", l)
	if err != nil {
		return lease.Task{}, err
	}
	if _, dup := rec.StepResult(st.Name); !dup {
		if rec.Spilled {
			return lease.Task{}, fmt.Errorf("checkpoint %s: %w", l.TaskID, errFrozen)
		}
		rec.Steps = append(rec.Steps, lease.Step{Name: st.Name, Op: st.Op, Result: bytes.Clone(st.Result)})
	}
	return clone(rec), nil
}

// AbandonWait implements lease.Store.
func (s *Store) AbandonWait(ctx context.Context, a lease.WaitAbandon) (lease.Task, error) {
	if err := a.Validate(); err != nil {
		return lease.Task{}, fmt.Errorf("abandon wait %s: %w", a.ID, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, true); err != nil {
		return lease.Task{}, err
	}
	rec, old := s.find(a.ID, func(t *lease.Task) bool { return rules.AbandonLands(a, *t) })
	if rec == nil {
		return value(old), rules.ClassifyAbandon(a, old)
	}
	now := s.now()
	rec.Status, rec.Error = a.Status, lease.Truncate(a.Error, lease.MaxErrorBytes)
	rec.FinishedAt, rec.UpdatedAt = now, now
	rec.DispatchAt, rec.WaitUntil, rec.CallbackHash, rec.CallbackStep = time.Time{}, time.Time{}, "", ""
	if s.opts.Retention > 0 {
		rec.ExpiresAt = time.Unix(now.Add(s.opts.Retention).Unix(), 0).UTC()
	}
	return clone(rec), nil
}

// BeatCallback implements the heartbeat of a callback wait (rules.BeatLands):
// the wait's heartbeat deadline moves to now plus its heartbeat timeout.
func (s *Store) BeatCallback(ctx context.Context, e lease.WaitEnd) (lease.Task, error) {
	if err := e.Validate(); err != nil {
		return lease.Task{}, fmt.Errorf("heartbeat %s: %w", e.ID, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, true); err != nil {
		return lease.Task{}, err
	}
	now := s.now()
	rec, old := s.find(e.ID, func(t *lease.Task) bool { return rules.BeatLands(e, *t, now) })
	if rec == nil {
		return value(old), rules.ClassifyBeat(e, old, now)
	}
	rec.BeatUntil = ms(now.Add(rec.HeartbeatTimeout))
	rec.UpdatedAt = now
	return clone(rec), nil
}
