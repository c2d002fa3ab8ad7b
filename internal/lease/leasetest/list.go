package leasetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/query"
)

func testListPaging(t *testing.T, a *adminEnv) {
	const pending, succeeded = 250, 30
	want := map[string]lease.Task{}
	var mu sync.Mutex
	// Create in parallel; the clock moves a millisecond every few tasks,
	// so many share a creation time.
	for round := range pending / 10 {
		var wg sync.WaitGroup
		for i := range 10 {
			n := a.newTask()
			if i%3 == 0 {
				n.Queue = "listed-queue" // List shows each task's queue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				got, err := a.store.Create(a.ctx, n)
				if err != nil {
					t.Errorf("Create: %v", err)
					return
				}
				mu.Lock()
				want[got.ID] = got
				mu.Unlock()
			}()
		}
		wg.Wait()
		if round%3 == 0 {
			a.clock.Advance(time.Millisecond)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	var done []string
	for range succeeded {
		done = append(done, a.finish(a.createClaimed(a.newTask(), "w1"), []byte(`{}`)).ID)
	}

	got := a.listAll(lease.StatusPending, 40)
	seen := map[string]bool{}
	for i, task := range got {
		if seen[task.ID] {
			t.Fatalf("List returned %s twice", task.ID)
		}
		seen[task.ID] = true
		w, ok := want[task.ID]
		if !ok {
			t.Fatalf("List(PENDING) returned %s (%s), not one of the pending tasks", task.ID, task.Status)
		}
		a.same("List", task, query.ListView(w))
		if i > 0 && task.CreatedAt.After(got[i-1].CreatedAt) {
			t.Fatalf("List is not newest first at %d: %s after %s", i, task.CreatedAt, got[i-1].CreatedAt)
		}
	}
	if len(seen) != pending {
		t.Fatalf("List(PENDING) returned %d tasks, want %d", len(seen), pending)
	}

	gotDone := a.listAll(lease.StatusSucceeded, 7)
	var ids []string
	for _, task := range gotDone {
		ids = append(ids, task.ID)
		if task.Payload != nil || task.Result != nil || task.History != nil {
			t.Fatalf("List returned payload, result or history of %s", task.ID)
		}
	}
	slices.Sort(ids)
	slices.Sort(done)
	if !slices.Equal(ids, done) {
		t.Fatalf("List(SUCCEEDED) = %d tasks, want the %d finished ones", len(ids), len(done))
	}

	// A page as large as the rest ends the listing.
	page, next, err := a.admin.List(a.ctx, lease.StatusSucceeded, succeeded, "")
	if err != nil || len(page) != succeeded {
		t.Fatalf("List(SUCCEEDED, %d) = %d tasks, %v", succeeded, len(page), err)
	}
	if next != "" {
		if rest, _, err := a.admin.List(a.ctx, lease.StatusSucceeded, 1, next); err != nil || len(rest) != 0 {
			t.Fatalf("after a full last page: %d more tasks, %v", len(rest), err)
		}
	}
}

func testListBadArguments(t *testing.T, a *adminEnv) {
	page, next, err := a.admin.List(a.ctx, lease.StatusFailed, 10, "")
	if err != nil || len(page) != 0 || next != "" {
		t.Fatalf("List of no tasks = %v, %q, %v; want nothing", page, next, err)
	}
	for range 3 {
		a.create(a.newTask())
	}
	_, cursor, err := a.admin.List(a.ctx, lease.StatusPending, 1, "")
	if err != nil || cursor == "" {
		t.Fatalf("List(PENDING, 1) = cursor %q, %v; want a cursor", cursor, err)
	}
	_, _, err = a.admin.List(a.ctx, lease.StatusRunning, 1, cursor)
	wantErr(t, "List with another status's cursor", err, query.ErrBadCursor)
	for _, bad := range []string{"not a cursor!", "e30", cursor[:len(cursor)/2]} {
		_, _, err = a.admin.List(a.ctx, lease.StatusPending, 1, bad)
		wantErr(t, fmt.Sprintf("List with cursor %q", bad), err, query.ErrBadCursor)
	}
	for _, limit := range []int{0, -1, query.MaxListLimit + 1} {
		_, _, err = a.admin.List(a.ctx, lease.StatusPending, limit, "")
		wantErr(t, fmt.Sprintf("List with limit %d", limit), err, lease.ErrInvalid)
	}
	_, _, err = a.admin.List(a.ctx, lease.Status("DONE"), 1, "")
	wantErr(t, "List of an unknown status", err, lease.ErrInvalid)

	ctx, cancel := context.WithCancel(a.ctx)
	cancel()
	_, _, err = a.admin.List(ctx, lease.StatusPending, 1, "")
	wantErr(t, "List with a cancelled context", err, lease.ErrBackend)
}

// A store with Options.Unlisted creates tasks that List does not see; Get
// and every other operation still do.
func testUnlisted(t *testing.T, a *adminEnv) {
	opts := a.opts
	opts.Unlisted = true
	unlisted := a.newStore(t, opts)
	n := a.newTask()
	if _, err := unlisted.Create(a.ctx, n); err != nil {
		t.Fatalf("Create: %v", err)
	}
	m := a.newTask()
	if _, err := unlisted.CreateClaimed(a.ctx, m, "w1"); err != nil {
		t.Fatalf("CreateClaimed: %v", err)
	}
	for _, st := range []lease.Status{lease.StatusPending, lease.StatusRunning} {
		page, _, err := unlisted.List(a.ctx, st, 100, "")
		if err != nil {
			t.Fatalf("List %s: %v", st, err)
		}
		for _, task := range page {
			if task.ID == n.ID || task.ID == m.ID {
				t.Fatalf("List %s shows %s, created unlisted", st, task.ID)
			}
		}
	}
	if got, err := unlisted.Get(a.ctx, n.ID); err != nil || got.ID != n.ID {
		t.Fatalf("Get of an unlisted task = %+v, %v", got, err)
	}
	if _, err := unlisted.Claim(a.ctx, n.ID, "w2"); err != nil {
		t.Fatalf("Claim of an unlisted task: %v", err)
	}
}

// A derived task (a child or a chain's link) gets no listing entry of its
// own while it runs or when it succeeds: its parent or the chain's head is
// listed. One that fails or is cancelled is listed from then on, retried
// or not; a store whose tasks are unlisted lists none of them.
func testDerivedListing(t *testing.T, a *adminEnv) {
	parent := a.createClaimed(a.newTask(), "p")
	if !a.listed(lease.StatusRunning, parent.ID) {
		t.Fatal("a root task is not listed")
	}
	derive := func(i int, link bool) lease.NewTask {
		n := a.newTask()
		n.ID = fmt.Sprintf("%s/kids/%d", parent.ID, i)
		if link {
			n.ID, n.Prev = fmt.Sprintf("%s#%d", parent.ID, i), parent.ID
		} else {
			n.Parent = parent.ID
		}
		return n
	}
	ok, failing, link := derive(0, false), derive(1, false), derive(2, true)
	var held []lease.Task
	for _, n := range []lease.NewTask{ok, failing, link} {
		got, err := a.admin.CreateClaimed(a.ctx, n, "w")
		if err != nil {
			t.Fatalf("CreateClaimed(%s): %v", n.ID, err)
		}
		if a.listed(lease.StatusRunning, n.ID) {
			t.Fatalf("derived task %s is listed while it runs", n.ID)
		}
		held = append(held, got)
	}
	a.finish(held[0], nil)
	if a.listed(lease.StatusSucceeded, ok.ID) {
		t.Fatal("a derived task that succeeded is listed")
	}
	a.release(held[1], lease.Release{Status: lease.StatusFailed, Error: "boom"})
	if !a.listed(lease.StatusFailed, failing.ID) {
		t.Fatal("a derived task that failed is not listed")
	}
	if _, err := a.admin.Retry(a.ctx, failing.ID, 1); err != nil {
		t.Fatalf("Retry: %v", err)
	}
	if !a.listed(lease.StatusPending, failing.ID) {
		t.Fatal("a retried derived task is not listed any more")
	}
	// A link released to run again, then cancelled while PENDING.
	pending := a.release(held[2], lease.Release{Status: lease.StatusPending, Error: "later", RunAt: a.now().Add(time.Hour)})
	if a.listed(lease.StatusPending, link.ID) {
		t.Fatal("a derived task released to retry is listed")
	}
	if _, err := a.admin.RequestCancel(a.ctx, pending.ID); err != nil {
		t.Fatalf("RequestCancel: %v", err)
	}
	if !a.listed(lease.StatusCancelled, link.ID) {
		t.Fatal("a derived task cancelled while pending is not listed")
	}

	opts := a.opts
	opts.Unlisted = true
	unlisted := a.newStore(t, opts)
	n := derive(3, false)
	got, err := unlisted.CreateClaimed(a.ctx, n, "w")
	if err != nil {
		t.Fatalf("CreateClaimed on an unlisted store: %v", err)
	}
	if _, err := unlisted.Release(a.ctx, got.LeaseOf(), lease.Release{Status: lease.StatusFailed, Error: "boom"}); err != nil {
		t.Fatalf("Release on an unlisted store: %v", err)
	}
	if page, _, err := unlisted.List(a.ctx, lease.StatusFailed, 100, ""); err != nil || slices.ContainsFunc(page, func(x lease.Task) bool { return x.ID == n.ID }) {
		t.Fatalf("an unlisted store lists a failed derived task (or List: %v)", err)
	}
}

// Tasks created with a batch listing entry (query.Lister) are listed
// through it, once, at the entry's time (not their own creation), newest
// first among the rest and across pages of any size; an entry takes later
// tasks (AppendListing) until it is full. A task that the entry does not
// name, or whose entry was never written, is not listed; an id taken
// before its entry was written stays listed where it was. A task listed by
// an entry is listed on its own from its first retry or wait, still once.
func testBatchListing(t *testing.T, a *adminEnv) {
	if _, err := a.admin.WriteListing(a.ctx, query.ListBy{}, []string{a.id(), a.id()}); !errors.Is(err, lease.ErrInvalid) {
		t.Fatalf("WriteListing of %d ids = %v, want ErrInvalid", query.MinListing-1, err)
	}
	same := a.id()
	if _, err := a.admin.WriteListing(a.ctx, query.ListBy{}, []string{same, a.id(), same}); !errors.Is(err, lease.ErrInvalid) {
		t.Fatalf("WriteListing naming an id twice = %v, want ErrInvalid", err)
	}
	if err := a.admin.AppendListing(a.ctx, lease.Listing{ID: query.NewListingID(), At: a.now()}, []string{a.id()}); !errors.Is(err, lease.ErrNotFound) {
		t.Fatalf("AppendListing to an entry never written = %v, want ErrNotFound", err)
	}

	at := map[string]time.Time{} // each listed task's listing time
	var batched []string         // the tasks listed by an entry
	created := func(n lease.NewTask, l lease.Listing) {
		t.Helper()
		n.Listing = l
		got, err := a.admin.CreateClaimed(a.ctx, n, "w")
		if err != nil {
			t.Fatalf("CreateClaimed(%s): %v", n.ID, err)
		}
		if got.ListedIn != l.ID {
			t.Fatalf("a task created with entry %q has ListedIn %q", l.ID, got.ListedIn)
		}
		at[got.ID] = ms(l.At)
		batched = append(batched, got.ID)
	}
	own := func() {
		got := a.createClaimed(a.newTask(), "w")
		at[got.ID] = got.CreatedAt
	}
	var firstEntry lease.Listing
	for round := range 4 {
		var ns []lease.NewTask
		var ids []string
		for range query.MinListing + round {
			n := a.newTask()
			ns, ids = append(ns, n), append(ids, n.ID)
		}
		l, err := a.admin.WriteListing(a.ctx, query.ListBy{}, append(slices.Clone(ids), a.id())) // and an id never created
		if err != nil || l.ID == "" || !query.IsListingID(l.ID) {
			t.Fatalf("WriteListing = %+v, %v", l, err)
		}
		if round == 0 {
			firstEntry = l
		}
		a.clock.Advance(time.Millisecond) // the creates come later than the entry
		for _, n := range ns {
			created(n, l)
		}
		own() // newer than the entry's tasks so far
		a.clock.Advance(time.Millisecond)
		// A later batch appended to the entry: listed at the entry's time,
		// before the task created in between.
		later := []lease.NewTask{a.newTask(), a.newTask()}
		if err := a.admin.AppendListing(a.ctx, l, []string{later[0].ID, later[1].ID}); err != nil {
			t.Fatalf("AppendListing: %v", err)
		}
		for _, n := range later {
			created(n, l)
		}
		a.clock.Advance(time.Millisecond)
	}
	// Not listed: a task its entry does not name, one whose entry was
	// never written. Listed once: a task whose id a later entry names again.
	l, err := a.admin.WriteListing(a.ctx, query.ListBy{}, []string{a.id(), a.id(), batched[0]})
	if err != nil {
		t.Fatalf("WriteListing: %v", err)
	}
	stray := a.newTask()
	stray.Listing = l
	if _, err := a.admin.CreateClaimed(a.ctx, stray, "w"); err != nil {
		t.Fatalf("CreateClaimed: %v", err)
	}
	again := a.newTask()
	again.ID, again.Listing = batched[0], l
	if _, err := a.admin.CreateClaimed(a.ctx, again, "w2"); !errors.Is(err, lease.ErrAlreadyExists) {
		t.Fatalf("CreateClaimed of a taken id = %v, want ErrAlreadyExists", err)
	}
	// An entry that names a task twice (its token delivered again while
	// the entry was open) lists it once.
	if err := a.admin.AppendListing(a.ctx, firstEntry, []string{batched[0], batched[1]}); err != nil {
		t.Fatalf("AppendListing of ids the entry names: %v", err)
	}
	lost := a.newTask()
	lost.Listing = lease.Listing{ID: query.NewListingID(), At: a.now()}
	if _, err := a.admin.CreateClaimed(a.ctx, lost, "w"); err != nil {
		t.Fatalf("CreateClaimed: %v", err)
	}
	// An entry takes at most MaxListingIDs.
	var fill []string // short ids: the entry's bytes are the caller's to bound
	for i := range query.MaxListingIDs - 3 {
		fill = append(fill, fmt.Sprintf("fill-%d", i))
	}
	if err := a.admin.AppendListing(a.ctx, l, fill); err != nil {
		t.Fatalf("AppendListing up to %d ids: %v", query.MaxListingIDs, err)
	}
	if err := a.admin.AppendListing(a.ctx, l, []string{a.id()}); !errors.Is(err, query.ErrListingFull) {
		t.Fatalf("AppendListing to a full entry = %v, want ErrListingFull", err)
	}

	check := func(status lease.Status, want []string) {
		t.Helper()
		for _, limit := range []int{1, 4, 100} {
			got := a.listAll(status, limit)
			var ids []string
			for i, task := range got {
				ids = append(ids, task.ID)
				if i > 0 && at[task.ID].After(at[got[i-1].ID]) {
					t.Fatalf("List(%s, %d) is not newest first at %d: %s listed at %s after %s at %s",
						status, limit, i, task.ID, at[task.ID], got[i-1].ID, at[got[i-1].ID])
				}
				if task.ListedIn != "" {
					t.Fatalf("List(%s) shows ListedIn %q", status, task.ListedIn)
				}
			}
			slices.Sort(ids)
			if !slices.Equal(ids, slices.Sorted(slices.Values(want))) {
				t.Fatalf("List(%s, %d a page) = %d tasks %v,\nwant %d %v", status, limit, len(ids), ids, len(want), want)
			}
		}
	}
	check(lease.StatusRunning, slices.Collect(maps.Keys(at)))

	// A retry and a finish, from the first entry.
	retried, err := a.admin.Get(a.ctx, batched[1])
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	a.release(retried, lease.Release{Status: lease.StatusPending, RunAt: a.now().Add(time.Hour), Error: "later"})
	done, err := a.admin.Get(a.ctx, batched[2])
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	a.finish(done, nil)
	at[batched[1]] = retried.CreatedAt // listed on its own now
	var running []string
	for id := range at {
		if id != batched[1] && id != batched[2] {
			running = append(running, id)
		}
	}
	check(lease.StatusRunning, running)
	check(lease.StatusPending, []string{batched[1]})
	check(lease.StatusSucceeded, []string{batched[2]})
	if got, err := a.admin.Get(a.ctx, batched[1]); err != nil || got.ListedIn != "" {
		t.Fatalf("a task released to retry still has ListedIn %q (%v)", got.ListedIn, err)
	}

	opts := a.opts
	opts.Unlisted = true
	unlisted := a.newStore(t, opts)
	if l, err := unlisted.WriteListing(a.ctx, query.ListBy{}, []string{a.id(), a.id(), a.id()}); err != nil || l != (lease.Listing{}) {
		t.Fatalf("WriteListing on an unlisted store = %+v, %v; want nothing written", l, err)
	}
}
