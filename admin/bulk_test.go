package admin

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/leasehold/leasehold"
)

// Bulk acts on every id, never more than concurrency at once, counts each
// outcome, keeps the first failures naming their tasks, reports progress
// up to the total, and stops feeding when its context ends.
func TestBulkCountsOutcomesWithinItsConcurrency(t *testing.T) {
	var running, most atomic.Int32
	act := func(_ context.Context, _ Tasks, id string) (string, error) {
		n := running.Add(1)
		defer running.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		if id[len(id)-1] == '7' {
			return "failed", errors.New("boom")
		}
		return "done", nil
	}
	var ids []string
	for i := range 40 {
		ids = append(ids, fmt.Sprintf("t-%d", i))
	}
	last := 0
	r := Bulk(t.Context(), nil, ids, 3, act, func(done int) { last = max(last, done) })
	if r.Selected != 40 || r.Done != 40 || r.Counts["done"] != 36 || r.Failed() != 4 || last != 40 {
		t.Errorf("report %+v, progress up to %d", r, last)
	}
	if most.Load() > 3 {
		t.Errorf("%d ran at once, want at most 3", most.Load())
	}
	if len(r.Errors) != 4 || r.Summary() != "done 36, failed 4" {
		t.Errorf("errors %q, summary %q", r.Errors, r.Summary())
	}

	ctx, cancel := context.WithCancel(t.Context())
	stopped := Bulk(ctx, nil, ids, 1, func(context.Context, Tasks, string) (string, error) {
		cancel()
		return "done", nil
	}, nil)
	if stopped.Done >= 40 || stopped.Done < 1 {
		t.Errorf("a cancelled bulk did %d of 40", stopped.Done)
	}
	if empty := Bulk(t.Context(), nil, nil, 4, act, nil); empty.Summary() != "no task selected" {
		t.Errorf("an empty bulk: %q", empty.Summary())
	}
}

func TestSelectionCheck(t *testing.T) {
	s, err := Selection{}.Check(RetryStatuses)
	if err != nil || StatusNames(s.Statuses) != "FAILED, CANCELLED" {
		t.Errorf("default = %v, %v", s.Statuses, err)
	}
	if _, err := (Selection{Statuses: []leasehold.Status{leasehold.StatusRunning}}).Check(RetryStatuses); !errors.Is(err, ErrSelection) {
		t.Errorf("RUNNING for retry: %v", err)
	}
	if _, err := (Selection{Since: -1}).Check(CancelStatuses); !errors.Is(err, ErrSelection) {
		t.Errorf("negative since: %v", err)
	}
}
