package leasetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/query"
)

// listReader is a store that counts the task items its listings read.
// Both stores are: the listing by kind is held to reading its own tasks.
type listReader interface{ ListReads() int64 }

// testListByKind: a rare kind among many, listed on its own (tasks with a
// listing key of their own, a batch listing entry of its kind, a task of
// that entry retried and so listed on its own) and in a named queue:
// ListBy returns exactly the matching tasks of the status, each once,
// newest first, across pages, and reads only the tasks of its listing,
// not the common kind's.
func testListByKind(t *testing.T, a *adminEnv) {
	reader, ok := a.admin.(listReader)
	if !ok {
		t.Fatalf("%T does not count its listings' reads (ListReads)", a.admin)
	}
	const rareKind, rareQueue, common = "rare.kind", "rare-queue", 60
	at := map[string]time.Time{} // each listed task's listing time
	create := func(kind, queue string) lease.Task {
		t.Helper()
		n := a.newTask()
		n.Kind, n.Queue = kind, queue
		got, err := a.store.Create(a.ctx, n)
		if err != nil {
			t.Fatalf("Create: %v", err)
		}
		at[got.ID] = got.CreatedAt
		a.clock.Advance(time.Millisecond)
		return got
	}
	own := create(rareKind, "")
	for range common / 2 {
		create("common.kind", "")
	}
	inQueue := create(rareKind, rareQueue)
	commonInQueue := create("common.kind", rareQueue)
	for range common / 2 {
		create("common.kind", "")
	}
	// A batch of the common kind and one of the rare kind, each listed by
	// an entry of its kind.
	entryOf := func(by query.ListBy, n int) []string {
		t.Helper()
		var ns []lease.NewTask
		var ids []string
		for range n {
			nt := a.newTask()
			nt.Kind, nt.Queue = by.Kind, by.Queue
			ns, ids = append(ns, nt), append(ids, nt.ID)
		}
		l, err := a.admin.WriteListing(a.ctx, by, ids)
		if err != nil || l.ID == "" {
			t.Fatalf("WriteListing(%+v) = %+v, %v", by, l, err)
		}
		a.clock.Advance(time.Millisecond)
		for _, nt := range ns {
			nt.Listing = l
			if _, err := a.admin.CreateClaimed(a.ctx, nt, "w"); err != nil {
				t.Fatalf("CreateClaimed: %v", err)
			}
			at[nt.ID] = ms(l.At)
		}
		a.clock.Advance(time.Millisecond)
		return ids
	}
	entryOf(query.ListBy{Kind: "common.kind"}, 5)
	batched := entryOf(query.ListBy{Kind: rareKind}, 4)
	create("common.kind", "")
	// A task of the entry retried: listed on its own from then, once.
	retried, err := a.admin.Get(a.ctx, batched[1])
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	a.release(retried, lease.Release{Status: lease.StatusPending, RunAt: a.now().Add(time.Hour), Error: "later"})
	at[batched[1]] = retried.CreatedAt

	check := func(status lease.Status, by query.ListBy, want []string) {
		t.Helper()
		for _, limit := range []int{1, 2, 100} {
			before := reader.ListReads()
			got := a.listAllBy(status, by, limit)
			read := reader.ListReads() - before
			var ids []string
			for i, task := range got {
				ids = append(ids, task.ID)
				if i > 0 && at[task.ID].After(at[got[i-1].ID]) {
					t.Fatalf("ListBy(%s, %+v, %d) is not newest first at %d", status, by, limit, i)
				}
			}
			if !slices.Equal(slices.Sorted(slices.Values(ids)), slices.Sorted(slices.Values(want))) {
				t.Fatalf("ListBy(%s, %+v, %d a page) = %v, want %v", status, by, limit, ids, want)
			}
			// The rare kind's listing holds 3 tasks of its own and an
			// entry of 4 (one of them also on its own); a page re-reads
			// at most what the page before read and did not take. A
			// listing that read by status would read the 60-odd tasks of
			// the common kind.
			if most := int64(4 * 8); read > most {
				t.Fatalf("ListBy(%s, %+v, %d a page) read %d tasks, more than %d: it reads more than its own listing", status, by, limit, read, most)
			}
		}
	}
	rare := query.ListBy{Kind: rareKind}
	check(lease.StatusPending, rare, []string{own.ID, inQueue.ID, batched[1]})
	check(lease.StatusRunning, rare, []string{batched[0], batched[2], batched[3]})
	check(lease.StatusFailed, rare, nil)
	check(lease.StatusPending, query.ListBy{Kind: "no.such.kind"}, nil)
	check(lease.StatusPending, query.ListBy{Queue: rareQueue}, []string{inQueue.ID, commonInQueue.ID})
	check(lease.StatusPending, query.ListBy{Kind: rareKind, Queue: rareQueue}, []string{inQueue.ID})

	// A zero ListBy is List; a cursor is only good for its own listing.
	all, _, err := a.admin.ListBy(a.ctx, lease.StatusPending, query.ListBy{}, query.MaxListLimit, "")
	if pending := common + 5; err != nil || len(all) != pending { // the created ones, and the retried one
		t.Fatalf("ListBy(PENDING, {}) = %d tasks, %v; want %d", len(all), err, pending)
	}
	_, cursor, err := a.admin.ListBy(a.ctx, lease.StatusPending, rare, 1, "")
	if err != nil || cursor == "" {
		t.Fatalf("ListBy(PENDING, rare, 1) = cursor %q, %v", cursor, err)
	}
	for _, other := range []query.ListBy{{}, {Kind: "common.kind"}, {Kind: rareKind, Queue: rareQueue}} {
		if _, _, err := a.admin.ListBy(a.ctx, lease.StatusPending, other, 1, cursor); !errors.Is(err, query.ErrBadCursor) {
			t.Fatalf("ListBy(%+v) with the cursor of the rare kind's listing = %v, want ErrBadCursor", other, err)
		}
	}
	if _, _, err := a.admin.ListBy(a.ctx, lease.StatusPending, query.ListBy{Kind: string(make([]byte, lease.MaxKindBytes+1))}, 1, ""); !errors.Is(err, lease.ErrInvalid) {
		t.Fatalf("ListBy with a kind over the limit = %v, want ErrInvalid", err)
	}
}

// listAllBy pages through the listing of status by limit at a time and
// checks each page.
func (a *adminEnv) listAllBy(status lease.Status, by query.ListBy, limit int) []lease.Task {
	a.t.Helper()
	var all []lease.Task
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 1000 {
			a.t.Fatalf("ListBy(%s, %+v) did not end after %d pages", status, by, pages)
		}
		page, next, err := a.admin.ListBy(a.ctx, status, by, limit, cursor)
		if err != nil {
			a.t.Fatalf("ListBy(%s, %+v, page %d): %v", status, by, pages, err)
		}
		if len(page) > limit || next != "" && len(page) < limit {
			a.t.Fatalf("ListBy(%s, %+v) returned %d tasks, limit %d, cursor %q", status, by, len(page), limit, next)
		}
		for _, task := range page {
			if !by.Matches(task) || task.Status != status {
				a.t.Fatalf("ListBy(%s, %+v) returned %s of kind %q, queue %q, %s", status, by, task.ID, task.Kind, task.Queue, task.Status)
			}
		}
		all = append(all, page...)
		if next == "" {
			return all
		}
		cursor = next
	}
}
