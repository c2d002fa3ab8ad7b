package leasemem

import (
	"context"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/limiter"
)

// AcquireSlot implements limiter.SlotLimiter.
func (s *Store) AcquireSlot(ctx context.Context, key, holder string, max int, until time.Time) (bool, error) {
	if err := limiter.CheckAcquireSlot(key, holder, max, until); err != nil {
		return false, fmt.Errorf("acquire slot: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, true); err != nil {
		return false, err
	}
	set := s.slots[key]
	if set == nil {
		set = map[string]time.Time{}
		s.slots[key] = set
	}
	if _, ok := set[holder]; !ok && len(set) >= max {
		cutoff := s.now().Add(-s.opts.Skew)
		for h, t := range set {
			if t.Before(cutoff) {
				delete(set, h)
			}
		}
		if len(set) >= max {
			return false, nil
		}
	}
	set[holder] = ms(until)
	return true, nil
}

// ReleaseSlot implements limiter.SlotLimiter.
func (s *Store) ReleaseSlot(ctx context.Context, key, holder string) error {
	if key == "" || holder == "" {
		return fmt.Errorf("release slot: %w: a slot needs a key and a holder", lease.ErrInvalid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, true); err != nil {
		return err
	}
	delete(s.slots[key], holder)
	return nil
}

// Slots returns the holders of key's slot set, for tests.
func (s *Store) Slots(key string) map[string]time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]time.Time{}
	for h, t := range s.slots[key] {
		out[h] = t
	}
	return out
}

// FreeLostSlots implements limiter.SlotLimiter.
func (s *Store) FreeLostSlots(ctx context.Context, key string, checks int) (int, error) {
	if key == "" || checks < 1 {
		return 0, fmt.Errorf("free lost slots: %w: a key and at least one check", lease.ErrInvalid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, true); err != nil {
		return 0, err
	}
	set := s.slots[key]
	freed := 0
	for _, h := range limiter.OldestHolders(set, checks) {
		id, fence, ok := limiter.ParseSlotHolder(h)
		if !ok {
			continue
		}
		var t lease.Task
		rec, found := s.tasks[id]
		if found {
			t = *rec
		}
		if limiter.SlotLost(t, found, fence, s.now(), s.opts.Skew) {
			delete(set, h)
			freed++
		}
	}
	return freed, nil
}
