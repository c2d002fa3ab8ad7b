package admin

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/lease/query"
)

// A Filter picks tasks from the listing: by kind and by named queue
// through the listings of that kind or queue (ListOptions.Kind and Queue),
// which read only their own tasks; by id prefix, creation time and the
// default work queue ("-") by reading the listing and keeping what
// matches. `leasehold list --kind ...` and the inspector's task list share
// it. Zero fields match everything.
type Filter struct {
	Kind string
	// Queue matches the tasks of the queue of this name; "-" those of the
	// default work queue (no queue name).
	Queue  string
	Prefix string
	// Since matches tasks created at or after it.
	Since time.Time
}

// IsZero reports whether f matches every task.
func (f Filter) IsZero() bool { return f == Filter{} }

// narrow sets o's Kind and Queue to f's, so that the listing reads only
// the tasks of f's kind (or named queue); the default work queue has no
// listing of its own, and is kept by Matches.
func (f Filter) narrow(o *leasehold.ListOptions) {
	o.Kind = f.Kind
	if f.Queue != "-" {
		o.Queue = f.Queue
	}
}

// Matches reports whether f picks t.
func (f Filter) Matches(t leasehold.TaskInfo) bool {
	return (f.Kind == "" || t.Kind == f.Kind) && queueMatches(f.Queue, t.Queue) &&
		strings.HasPrefix(t.ID, f.Prefix) && (f.Since.IsZero() || !t.CreatedAt.Before(f.Since))
}

// Bounds of one filtered page: a filter that matches few tasks stops a
// page's reading after this many tasks or List calls, and the page ends
// short, with a cursor to go on.
const (
	maxFilterScan  = 5000
	maxFilterCalls = 50
)

// FilteredPage is one page of the listing through a Filter, or of a
// Selection (SelectPage).
type FilteredPage struct {
	Tasks []leasehold.TaskInfo
	// Next is the cursor to go on from (with the same status); empty once
	// the listing has ended.
	Next string
	// Scanned counts the tasks read to find Tasks.
	Scanned int
	// More is set by SelectPage when more tasks matched than its limit.
	More bool
}

// ListFiltered reads the listing from o (its Status and Cursor) until size
// tasks pass f, the listing ends, maxFilterScan tasks or maxFilterCalls
// calls have been read, or o.StopBy (or ctx's deadline) leaves no time for
// another call as long as the slowest so far (the listing itself stops
// short at it too). Each call asks for at most the room left on the
// page (o.Limit is ignored), so that the page ends where a listing page
// ends and the cursor after it is exact: no matching task is skipped
// between pages.
func (a *Admin) ListFiltered(ctx context.Context, o leasehold.ListOptions, f Filter, size int) (FilteredPage, error) {
	var p FilteredPage
	if size < 1 || size > query.MaxListLimit {
		return p, fmt.Errorf("page size %d is outside 1..%d", size, query.MaxListLimit)
	}
	var slowest time.Duration
	stopCtx := query.WithStopBy(ctx, o.StopBy)
	f.narrow(&o)
	for calls := 1; ; calls++ {
		o.Limit = size - len(p.Tasks)
		at := time.Now()
		page, err := a.tasks.List(ctx, o)
		if err != nil {
			return p, err
		}
		slowest = max(slowest, time.Since(at))
		p.Scanned += len(page.Tasks)
		for _, t := range page.Tasks {
			if f.Matches(t) {
				p.Tasks = append(p.Tasks, t)
			}
		}
		p.Next, o.Cursor = page.Next, page.Next
		if p.Next == "" || len(p.Tasks) >= size || p.Scanned >= maxFilterScan || calls >= maxFilterCalls || query.Stopping(stopCtx, slowest) {
			return p, nil
		}
	}
}
