package leasemem

import (
	"context"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/internal/lease/limiter"
)

// TakeStart implements limiter.RateLimiter.
func (s *Store) TakeStart(ctx context.Context, key string, window time.Time, per time.Duration, limit int) (bool, error) {
	if err := limiter.CheckTakeStart(key, window, per, limit); err != nil {
		return false, fmt.Errorf("take start: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, true); err != nil {
		return false, err
	}
	now := s.now()
	for id, w := range s.rates { // the table's TTL, at once
		if now.After(w.expires) {
			delete(s.rates, id)
		}
	}
	id := limiter.RateWindowID(key, window)
	w := s.rates[id]
	if w == nil {
		w = &rateWindow{}
		s.rates[id] = w
	}
	if w.starts >= limit {
		return false, nil
	}
	w.starts++
	w.expires = window.Add(per + limiter.RateWindowSlack)
	return true, nil
}

// rateWindow is one rate window's item.
type rateWindow struct {
	starts  int
	expires time.Time
}
