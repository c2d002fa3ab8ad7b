package lifecycle_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/leasemem"
	"github.com/leasehold/leasehold/internal/lease/query"
	"github.com/leasehold/leasehold/internal/lifecycle"
	"github.com/leasehold/leasehold/internal/token"
)

// failingLister is a store whose batch listing entries cannot be written.
type failingLister struct{ *leasemem.Store }

func (failingLister) WriteListing(context.Context, query.ListBy, []string) (lease.Listing, error) {
	return lease.Listing{}, errors.New("throttled")
}

// A batch's inline tasks are listed by one batch listing entry, written
// before their creates; the next batches within query.ListingWindow are
// added to it, and after the window a batch opens another (or, too small
// for one, lists its tasks on their own). A repeated id and a task created
// by reference keep listing keys of their own. When the entry cannot be
// written, each task gets its own. Every task is listed once, whichever
// way.
func TestBatchListsItsInlineTasksInOneEntry(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		failing bool
	}{{"entry written", false}, {"entry write fails", true}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, func(cfg *lifecycle.Config) {
				if c.failing {
					cfg.Store = failingLister{cfg.Store.(*leasemem.Store)}
				}
			})
			e.handlers["ok"] = func(context.Context, lease.Task) ([]byte, error) { return []byte(`1`), nil }
			if _, err := e.store.Create(t.Context(), lease.NewTask{ID: "ref", Kind: "ok", MaxAttempts: 1}); err != nil {
				t.Fatalf("Create: %v", err)
			}
			batch := func(ids ...string) []lifecycle.Message {
				var msgs []lifecycle.Message
				for _, id := range ids {
					msgs = append(msgs, msg("m"+id, inline(t, "ok", id, "", 0)))
				}
				return msgs
			}
			first := append(batch("t0", "t1", "t2", "t3", "t4"), msg("again", inline(t, "ok", "t0", "", 0)), msg("byref", token.Ref("ref")))
			// Of the two messages of t0, the one that meets the other's
			// lease is kept for later.
			for i, r := range e.exec.ProcessBatch(t.Context(), nil, first) {
				if !r.Ack && first[i].ID != "mt0" && first[i].ID != "again" {
					t.Fatalf("message %s not acked: %+v", first[i].ID, r)
				}
			}
			// One task (its token twice) keeps its own listing and leaves
			// the entry open for the next batch.
			e.exec.ProcessBatch(t.Context(), nil, append(batch("x0"), msg("x0again", inline(t, "ok", "x0", "", 0))))
			e.exec.ProcessBatch(t.Context(), nil, batch("a0", "a1"))
			e.clock.Advance(query.ListingWindow)
			e.exec.ProcessBatch(t.Context(), nil, batch("s0", "s1"))
			e.exec.ProcessBatch(t.Context(), nil, batch("n0", "n1", "n2"))

			listedIn := func(ids ...string) string {
				t.Helper()
				var in string
				for i, id := range ids {
					got := e.get(t, id)
					if got.Status != lease.StatusSucceeded {
						t.Fatalf("%s is %s", id, got.Status)
					}
					if i > 0 && got.ListedIn != in {
						t.Fatalf("%s is listed in %q, %s in %q: want one entry", id, got.ListedIn, ids[0], in)
					}
					in = got.ListedIn
				}
				return in
			}
			entry, later := listedIn("t0", "t1", "t2", "t3", "t4", "a0", "a1"), listedIn("n0", "n1", "n2")
			switch {
			case c.failing && (entry != "" || later != ""):
				t.Fatalf("tasks listed in %q and %q, though no entry could be written", entry, later)
			case !c.failing && (entry == "" || later == "" || entry == later):
				t.Fatalf("batches listed in %q, then after the window in %q: want two entries", entry, later)
			}
			for _, id := range []string{"ref", "s0", "s1", "x0"} {
				if got := e.get(t, id); got.ListedIn != "" || got.Status != lease.StatusSucceeded {
					t.Fatalf("%s: %s, listed in %q; want SUCCEEDED with its own listing key", id, got.Status, got.ListedIn)
				}
			}
			page, _, err := e.store.List(t.Context(), lease.StatusSucceeded, 100, "")
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			var ids []string
			for _, task := range page {
				ids = append(ids, task.ID)
			}
			slices.Sort(ids)
			if want := []string{"a0", "a1", "n0", "n1", "n2", "ref", "s0", "s1", "t0", "t1", "t2", "t3", "t4", "x0"}; !slices.Equal(ids, want) {
				t.Fatalf("List(SUCCEEDED) = %v, want %v", ids, want)
			}
		})
	}
}

// A batch that mixes kinds and queues lists each kind and queue by an
// entry of its own, so that the listing by kind (or queue) finds its
// tasks through that entry and no other kind's: three tasks of kind a
// (one came by the default work queue, whose name it records: it joins
// the others, which name no queue), three of kind b, and two of kind b in
// a named queue (too few for an entry: listed on their own). The listings
// by kind and queue each return exactly their tasks.
func TestBatchListsEachKindInAnEntryOfItsOwn(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ok := func(context.Context, lease.Task) ([]byte, error) { return []byte(`1`), nil }
	e.handlers["a"], e.handlers["b"] = ok, ok
	var msgs []lifecycle.Message
	for _, id := range []string{"a0", "b0", "a1", "b1", "a2", "b2", "q0", "q1"} {
		m := msg("m"+id, inline(t, id[:1], id, "", 0))
		switch {
		case id[0] == 'q':
			m = msg("m"+id, inline(t, "b", id, "", 0))
			m.Queue = "named"
		case id == "a1":
			m.Queue = "work" // the default work queue's name (workURL)
		}
		msgs = append(msgs, m)
	}
	for i, r := range e.exec.ProcessBatch(t.Context(), nil, msgs) {
		if !r.Ack {
			t.Fatalf("message %s not acked: %+v", msgs[i].ID, r)
		}
	}
	entryOf := func(ids ...string) string {
		t.Helper()
		in := e.get(t, ids[0]).ListedIn
		for _, id := range ids[1:] {
			if got := e.get(t, id).ListedIn; got != in {
				t.Fatalf("%s is listed in %q, %s in %q: want one entry", id, got, ids[0], in)
			}
		}
		return in
	}
	a, b, q := entryOf("a0", "a1", "a2"), entryOf("b0", "b1", "b2"), entryOf("q0", "q1")
	if a == "" || b == "" || a == b || q != "" {
		t.Fatalf("kind a listed in %q, kind b in %q, queue named in %q: want an entry each for a and b, and the two of the named queue listed on their own", a, b, q)
	}
	for _, c := range []struct {
		by   query.ListBy
		want []string
	}{
		{query.ListBy{Kind: "a"}, []string{"a0", "a1", "a2"}},
		{query.ListBy{Kind: "b"}, []string{"b0", "b1", "b2", "q0", "q1"}},
		{query.ListBy{Queue: "named"}, []string{"q0", "q1"}},
	} {
		page, _, err := e.store.ListBy(t.Context(), lease.StatusSucceeded, c.by, 100, "")
		if err != nil {
			t.Fatalf("ListBy(%+v): %v", c.by, err)
		}
		var ids []string
		for _, task := range page {
			ids = append(ids, task.ID)
		}
		slices.Sort(ids)
		if !slices.Equal(ids, c.want) {
			t.Fatalf("ListBy(%+v) = %v, want %v", c.by, ids, c.want)
		}
	}
}
