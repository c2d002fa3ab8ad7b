package leasemem

import (
	"context"
	"fmt"

	"github.com/leasehold/leasehold/internal/lease"
)

// MarkCancelRequested is the conformance suite's hook (leasetest.CancelMarker):
// it sets CancelRequested on the stored task and changes nothing else.
func (s *Store) MarkCancelRequested(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.tasks[id]
	if !ok {
		return fmt.Errorf("mark cancel requested %s: %w", id, lease.ErrNotFound)
	}
	rec.CancelRequested = true
	return nil
}
