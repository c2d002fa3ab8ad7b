package admin

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
)

// Bulk acts on every id, never more than concurrency at once, counts each
// outcome, keeps the first failures naming their tasks, reports progress
// up to the total, and stops feeding when its context ends.
func TestBulkCountsOutcomesWithinItsConcurrency(t *testing.T) {
	var running, most atomic.Int32
	act := func(_ context.Context, id string) (string, error) {
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
	a := &Admin{}
	r := a.Bulk(t.Context(), ids, 3, act, func(done int) { last = max(last, done) })
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
	stopped := a.Bulk(ctx, ids, 1, func(context.Context, string) (string, error) {
		cancel()
		return "done", nil
	}, nil)
	if stopped.Done >= 40 || stopped.Done < 1 {
		t.Errorf("a cancelled bulk did %d of 40", stopped.Done)
	}
	if empty := a.Bulk(t.Context(), nil, 4, act, nil); empty.Summary() != "no task selected" {
		t.Errorf("an empty bulk: %q", empty.Summary())
	}
}

func TestSelectionCheck(t *testing.T) {
	s, err := Selection{}.Check(RetryStatuses)
	if err != nil || statusNames(s.Statuses) != "FAILED, CANCELLED" {
		t.Errorf("default = %v, %v", s.Statuses, err)
	}
	if _, err := (Selection{Statuses: []leasehold.Status{leasehold.StatusRunning}}).Check(RetryStatuses); !errors.Is(err, leasehold.ErrInvalid) {
		t.Errorf("RUNNING for retry: %v", err)
	}
	if _, err := (Selection{Since: -1}).Check(CancelStatuses); !errors.Is(err, leasehold.ErrInvalid) {
		t.Errorf("negative since: %v", err)
	}
}

// fakeTasks lists its tasks of a status newest first, two a page.
type fakeTasks struct{ tasks []leasehold.TaskInfo }

func (f fakeTasks) List(_ context.Context, o leasehold.ListOptions) (leasehold.Page, error) {
	var of []leasehold.TaskInfo
	for _, t := range f.tasks {
		if t.Status == o.Status {
			of = append(of, t)
		}
	}
	start := 0
	if o.Cursor != "" {
		fmt.Sscan(o.Cursor, &start)
	}
	end := min(start+2, len(of))
	p := leasehold.Page{Tasks: of[start:end]}
	if end < len(of) {
		p.Next = fmt.Sprint(end)
	}
	return p, nil
}

func (fakeTasks) Cancel(context.Context, string) (leasehold.TaskInfo, error) {
	return leasehold.TaskInfo{}, nil
}

func (fakeTasks) Retry(context.Context, string, int) (leasehold.TaskInfo, error) {
	return leasehold.TaskInfo{}, nil
}

// Select pages through each status, keeps the tasks matching kind, queue
// and prefix, stops a status at the first task older than Since, and stops
// at a limit saying more were left.
func TestSelectFiltersAndPages(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	task := func(id string, st leasehold.Status, kind, queue string, age time.Duration) leasehold.TaskInfo {
		return leasehold.TaskInfo{ID: id, Status: st, Kind: kind, Queue: queue, CreatedAt: now.Add(-age)}
	}
	f := fakeTasks{tasks: []leasehold.TaskInfo{
		task("r-1", leasehold.StatusFailed, "report", "", time.Minute),
		task("g-1", leasehold.StatusFailed, "greet", "", 2*time.Minute),
		task("r-2", leasehold.StatusFailed, "report", "slow", 3*time.Minute),
		task("r-3", leasehold.StatusFailed, "report", "", 3*time.Hour),
		task("x-1", leasehold.StatusCancelled, "report", "", time.Minute),
		task("r-4", leasehold.StatusCancelled, "report", "", 2*time.Minute),
	}}
	for name, c := range map[string]struct {
		sel   Selection
		limit int
		want  string
		more  bool
	}{
		"all":           {Selection{Statuses: RetryStatuses}, 0, "r-1 g-1 r-2 r-3 x-1 r-4", false},
		"kind":          {Selection{Statuses: RetryStatuses, Kind: "report"}, 0, "r-1 r-2 r-3 x-1 r-4", false},
		"queue":         {Selection{Statuses: RetryStatuses, Queue: "slow"}, 0, "r-2", false},
		"default queue": {Selection{Statuses: RetryStatuses, Queue: "-", Kind: "report"}, 0, "r-1 r-3 x-1 r-4", false},
		"prefix":        {Selection{Statuses: RetryStatuses, Prefix: "r-"}, 0, "r-1 r-2 r-3 r-4", false},
		"since":         {Selection{Statuses: RetryStatuses, Since: time.Hour}, 0, "r-1 g-1 r-2 x-1 r-4", false},
		"one status":    {Selection{Statuses: []leasehold.Status{leasehold.StatusCancelled}}, 0, "x-1 r-4", false},
		"limit":         {Selection{Statuses: RetryStatuses}, 3, "r-1 g-1 r-2", true},
		"limit enough":  {Selection{Statuses: RetryStatuses, Queue: "slow"}, 1, "r-2", false},
	} {
		ids, more, err := (&Admin{tasks: f}).Select(t.Context(), c.sel, now, c.limit)
		if got := strings.Join(ids, " "); err != nil || got != c.want || more != c.more {
			t.Errorf("%s: %q more=%t %v; want %q more=%t", name, got, more, err, c.want, c.more)
		}
	}
}
