package query

import (
	"context"

	"github.com/leasehold/leasehold/internal/lease"
)

// ManyGetter reads many tasks in few calls: both stores implement it; a
// caller falls back to Get for a Store that does not.
type ManyGetter interface {
	// GetMany reads the tasks ids (strongly consistent), in the order of
	// ids; a task that does not exist has only its ID. Repeated ids are
	// read once and returned at each place.
	GetMany(ctx context.Context, ids []string) ([]lease.Task, error)
}

// ManyInOrder lays found out in the order of ids, a task not found as one
// with only its ID.
func ManyInOrder(ids []string, found map[string]lease.Task) []lease.Task {
	out := make([]lease.Task, len(ids))
	for i, id := range ids {
		t, ok := found[id]
		if !ok {
			t = lease.Task{ID: id}
		}
		out[i] = t
	}
	return out
}
