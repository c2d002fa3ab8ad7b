package leasemem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/mapstate"
)

var _ mapstate.Store = (*Store)(nil)

// CreateGroup implements mapstate.Store.
func (s *Store) CreateGroup(ctx context.Context, g mapstate.Group) (mapstate.Group, error) {
	if err := g.Check(); err != nil {
		return mapstate.Group{}, fmt.Errorf("create map group: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, true); err != nil {
		return mapstate.Group{}, err
	}
	if got, ok := s.groups[g.ID]; ok {
		return cloneGroup(got), lease.ErrAlreadyExists
	}
	g = cloneGroup(g)
	g.Version = 1
	s.groups[g.ID] = g
	return cloneGroup(g), nil
}

// GetGroup implements mapstate.Store.
func (s *Store) GetGroup(ctx context.Context, id string) (mapstate.Group, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, false); err != nil {
		return mapstate.Group{}, err
	}
	g, ok := s.groups[id]
	if !ok {
		return mapstate.Group{}, fmt.Errorf("map group %q: %w", id, lease.ErrNotFound)
	}
	return cloneGroup(g), nil
}

// Report implements mapstate.Store.
func (s *Store) Report(ctx context.Context, r mapstate.Report) (mapstate.Group, error) {
	if err := r.Check(); err != nil {
		return mapstate.Group{}, fmt.Errorf("report to map group: %w", err)
	}
	return s.updateGroup(ctx, r.Group, func(g mapstate.Group) (mapstate.Group, error) { return g.Apply(r) })
}

// Raise implements mapstate.Store.
func (s *Store) Raise(ctx context.Context, id string, produced int) (mapstate.Group, error) {
	g, err := s.updateGroup(ctx, id, func(g mapstate.Group) (mapstate.Group, error) {
		if g.Produced >= produced {
			return g, errUnchanged
		}
		g.Produced = produced
		return g, nil
	})
	if errors.Is(err, errUnchanged) {
		err = nil
	}
	return g, err
}

// Stop implements mapstate.Store.
func (s *Store) Stop(ctx context.Context, id, reason string) (mapstate.Group, error) {
	if reason == "" {
		return mapstate.Group{}, fmt.Errorf("stop map group: %w: no reason", lease.ErrInvalid)
	}
	g, err := s.updateGroup(ctx, id, func(g mapstate.Group) (mapstate.Group, error) {
		if g.Stopped != "" {
			return g, errUnchanged
		}
		g.Stopped = reason
		return g, nil
	})
	if errors.Is(err, errUnchanged) {
		err = nil
	}
	return g, err
}

// Unpark implements mapstate.Store.
func (s *Store) Unpark(ctx context.Context, id string, slot, seq int) (mapstate.Group, error) {
	return s.updateGroup(ctx, id, func(g mapstate.Group) (mapstate.Group, error) {
		j := slot - g.First
		if j < 0 || j >= len(g.Seq) {
			return g, fmt.Errorf("%w: slot %d is not in group %q", lease.ErrInvalid, slot, id)
		}
		if g.Seq[j] != seq {
			return g, mapstate.ErrCounted
		}
		g.Idle = slices.DeleteFunc(slices.Clone(g.Idle), func(s int) bool { return s == slot })
		return g, nil
	})
}

// errUnchanged: an update that leaves the group as it was (no error to the
// caller, no version bump).
var errUnchanged = errors.New("unchanged")

// updateGroup applies f to group id under the lock: one write.
func (s *Store) updateGroup(ctx context.Context, id string, f func(mapstate.Group) (mapstate.Group, error)) (mapstate.Group, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, true); err != nil {
		return mapstate.Group{}, err
	}
	g, ok := s.groups[id]
	if !ok {
		return mapstate.Group{}, fmt.Errorf("map group %q: %w", id, lease.ErrNotFound)
	}
	next, err := f(cloneGroup(g))
	if err != nil {
		return cloneGroup(g), err
	}
	next.Version = g.Version + 1
	s.groups[id] = cloneGroup(next)
	return next, nil
}

// PutPage implements mapstate.Store.
func (s *Store) PutPage(ctx context.Context, id string, items [][]byte, expires time.Time) error {
	if err := mapstate.CheckPage(id, items, expires); err != nil {
		return fmt.Errorf("put map page: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, true); err != nil {
		return err
	}
	cp := make([][]byte, len(items))
	for i, b := range items {
		cp[i] = bytes.Clone(b)
	}
	s.pages[id] = cp
	return nil
}

// GetPage implements mapstate.Store.
func (s *Store) GetPage(ctx context.Context, id string) ([][]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, false); err != nil {
		return nil, err
	}
	p, ok := s.pages[id]
	if !ok {
		return nil, fmt.Errorf("map page %q: %w", id, lease.ErrNotFound)
	}
	out := make([][]byte, len(p))
	for i, b := range p {
		out[i] = bytes.Clone(b)
	}
	return out, nil
}

func cloneGroup(g mapstate.Group) mapstate.Group {
	g.Seq, g.Failures, g.Idle = slices.Clone(g.Seq), slices.Clone(g.Failures), slices.Clone(g.Idle)
	return g
}

// StopMap stops the sliding map parent waits in, if any, and cancels the
// children it runs (mapstate.StopChildren): lease.CancelChildren calls it
// before it cancels parent's other children.
func (s *Store) StopMap(ctx context.Context, parent lease.Task, reason string, cancelled func(lease.Task)) error {
	return mapstate.StopChildren(ctx, s, s, parent, reason, cancelled)
}
