package leasemem

import (
	"context"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/internal/lease/limiter"
)

// TakeRedrive implements limiter.RedriveCounter.
func (s *Store) TakeRedrive(ctx context.Context, key string, limit int) (bool, error) {
	if err := limiter.CheckTakeRedrive(key, limit); err != nil {
		return false, fmt.Errorf("take redrive: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, true); err != nil {
		return false, err
	}
	now := s.now()
	for id, c := range s.redrives { // the table's TTL, at once
		if now.After(c.expires) {
			delete(s.redrives, id)
		}
	}
	id := limiter.RedriveCountID(key)
	c := s.redrives[id]
	if c == nil {
		c = &redriveCount{}
		s.redrives[id] = c
	}
	if c.n >= limit {
		return false, nil
	}
	c.n++
	c.expires = now.Add(limiter.RedriveCountTTL)
	return true, nil
}

// redriveCount is one redrive count's item.
type redriveCount struct {
	n       int
	expires time.Time
}
