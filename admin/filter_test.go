package admin

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/lease/query"
)

// sliceLister lists its tasks in order, honouring Limit and an index
// cursor, and counts its calls. It cancels and retries nothing (the nil
// Tasks it embeds).
type sliceLister struct {
	Tasks
	tasks []leasehold.TaskInfo
	calls int
}

func (l *sliceLister) List(_ context.Context, o leasehold.ListOptions) (leasehold.Page, error) {
	l.calls++
	if o.Limit < 1 || o.Limit > query.MaxListLimit {
		return leasehold.Page{}, fmt.Errorf("limit %d", o.Limit)
	}
	start := 0
	if o.Cursor != "" {
		fmt.Sscan(o.Cursor, &start)
	}
	end := min(start+o.Limit, len(l.tasks))
	p := leasehold.Page{Tasks: l.tasks[start:end]}
	if end < len(l.tasks) {
		p.Next = fmt.Sprint(end)
	}
	return p, nil
}

func TestFilterMatches(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	task := leasehold.TaskInfo{ID: "img-7", Kind: "resize", Queue: "slow", CreatedAt: now.Add(-time.Hour)}
	for name, c := range map[string]struct {
		f    Filter
		want bool
	}{
		"zero":             {Filter{}, true},
		"kind":             {Filter{Kind: "resize"}, true},
		"other kind":       {Filter{Kind: "greet"}, false},
		"queue":            {Filter{Queue: "slow"}, true},
		"default queue":    {Filter{Queue: "-"}, false},
		"prefix":           {Filter{Prefix: "img-"}, true},
		"other prefix":     {Filter{Prefix: "doc-"}, false},
		"since before":     {Filter{Since: now.Add(-2 * time.Hour)}, true},
		"since at":         {Filter{Since: task.CreatedAt}, true},
		"since after":      {Filter{Since: now.Add(-time.Minute)}, false},
		"all of them":      {Filter{Kind: "resize", Queue: "slow", Prefix: "img", Since: now.Add(-2 * time.Hour)}, true},
		"all but the kind": {Filter{Kind: "greet", Queue: "slow", Prefix: "img", Since: now.Add(-2 * time.Hour)}, false},
	} {
		if got := c.f.Matches(task); got != c.want {
			t.Errorf("%s: Matches = %t, want %t", name, got, c.want)
		}
	}
	if !(Filter{}).IsZero() || (Filter{Prefix: "x"}).IsZero() {
		t.Error("IsZero is wrong")
	}
	var def leasehold.TaskInfo
	if !(Filter{Queue: "-"}).Matches(def) {
		t.Error(`queue "-" does not match a task of the default queue`)
	}
}

// Pages of a filtered listing, followed by their cursors, hold every
// matching task once, in listing order, at most size each; a filter that
// matches little stops a page at the scan bound with a cursor to go on.
func TestListFilteredPagesExactly(t *testing.T) {
	var l sliceLister
	var want []string
	for i := range 400 {
		kind := "greet"
		if i%7 == 0 {
			kind = "resize"
			want = append(want, fmt.Sprint(i))
		}
		l.tasks = append(l.tasks, leasehold.TaskInfo{ID: fmt.Sprint(i), Kind: kind})
	}
	f := Filter{Kind: "resize"}
	for _, size := range []int{1, 3, 10, 58, 100} {
		var got []string
		o := leasehold.ListOptions{}
		for pages := 0; ; pages++ {
			if pages > 1000 {
				t.Fatalf("size %d: no end", size)
			}
			p, err := (&Admin{tasks: &l}).ListFiltered(t.Context(), o, f, size)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Tasks) > size {
				t.Fatalf("size %d: a page of %d", size, len(p.Tasks))
			}
			for _, task := range p.Tasks {
				got = append(got, task.ID)
			}
			if p.Next == "" {
				break
			}
			o.Cursor = p.Next
		}
		if !slices.Equal(got, want) {
			t.Errorf("size %d: pages hold %v, want %v", size, got, want)
		}
	}

	// Nothing matches: one page reads up to the bounds, then ends short
	// with a cursor.
	l.tasks = nil
	for i := range maxFilterScan * 2 {
		l.tasks = append(l.tasks, leasehold.TaskInfo{ID: fmt.Sprint(i), Kind: "greet"})
	}
	l.calls = 0
	p, err := (&Admin{tasks: &l}).ListFiltered(t.Context(), leasehold.ListOptions{}, f, query.MaxListLimit)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Tasks) != 0 || p.Next == "" || p.Scanned != maxFilterScan || l.calls != maxFilterScan/query.MaxListLimit {
		t.Errorf("unmatched: %d tasks, next %q, scanned %d in %d calls; want 0, a cursor, %d", len(p.Tasks), p.Next, p.Scanned, l.calls, maxFilterScan)
	}
	l.calls = 0
	p, err = (&Admin{tasks: &l}).ListFiltered(t.Context(), leasehold.ListOptions{}, f, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Tasks) != 0 || p.Next == "" || l.calls != maxFilterCalls {
		t.Errorf("unmatched, small pages: %d tasks, next %q, %d calls; want 0, a cursor, %d calls", len(p.Tasks), p.Next, l.calls, maxFilterCalls)
	}
	if _, err := (&Admin{tasks: &l}).ListFiltered(t.Context(), leasehold.ListOptions{}, f, 0); err == nil {
		t.Error("a page size of 0 was taken")
	}
}
