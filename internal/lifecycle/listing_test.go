package lifecycle_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/leasemem"
	"github.com/leasehold/leasehold/internal/lifecycle"
	"github.com/leasehold/leasehold/internal/token"
)

// failingLister is a store whose batch listing entries cannot be written.
type failingLister struct{ *leasemem.Store }

func (failingLister) WriteListing(context.Context, []string) (lease.Listing, error) {
	return lease.Listing{}, errors.New("throttled")
}

// A batch's inline tasks are listed by one batch listing entry, written
// before their creates; a repeated id, a task created by reference, and
// a batch too small for an entry keep listing keys of their own. Every
// task is listed once, whichever way.
func TestBatchListsItsInlineTasksInOneEntry(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		failing bool
	}{{"entry written", false}, {"entry write fails", true}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var e *env
			e = setup(t, func(cfg *lifecycle.Config) {
				if c.failing {
					cfg.Store = failingLister{cfg.Store.(*leasemem.Store)}
				}
			})
			e.handlers["ok"] = func(context.Context, lease.Task) ([]byte, error) { return []byte(`1`), nil }
			if _, err := e.store.Create(t.Context(), lease.NewTask{ID: "ref", Kind: "ok", MaxAttempts: 1}); err != nil {
				t.Fatalf("Create: %v", err)
			}
			var msgs []lifecycle.Message
			var batched []string
			for i := range 5 {
				id := fmt.Sprintf("t%d", i)
				batched = append(batched, id)
				msgs = append(msgs, msg("m"+id, inline(t, "ok", id, "", 0)))
			}
			msgs = append(msgs, msg("again", inline(t, "ok", "t0", "", 0)), msg("byref", token.Ref("ref")))
			// Of the two messages of t0, the one that meets the other's
			// lease is kept for later.
			results := e.exec.ProcessBatch(t.Context(), nil, msgs)
			for i, r := range results {
				if !r.Ack && msgs[i].ID != "mt0" && msgs[i].ID != "again" {
					t.Fatalf("message %s not acked: %+v", msgs[i].ID, r)
				}
			}
			small := []lifecycle.Message{msg("s1", inline(t, "ok", "s1", "", 0)), msg("s2", inline(t, "ok", "s2", "", 0))}
			e.exec.ProcessBatch(t.Context(), nil, small)

			var entry string
			for _, id := range batched {
				got := e.get(t, id)
				if got.Status != lease.StatusSucceeded {
					t.Fatalf("%s is %s", id, got.Status)
				}
				switch {
				case c.failing && got.ListedIn != "":
					t.Fatalf("%s is listed in %q, though no entry was written", id, got.ListedIn)
				case !c.failing && (got.ListedIn == "" || entry != "" && got.ListedIn != entry):
					t.Fatalf("%s is listed in %q, want the batch's one entry (%q)", id, got.ListedIn, entry)
				}
				entry = got.ListedIn
			}
			for _, id := range []string{"ref", "s1", "s2"} {
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
			if want := []string{"ref", "s1", "s2", "t0", "t1", "t2", "t3", "t4"}; !slices.Equal(ids, want) {
				t.Fatalf("List(SUCCEEDED) = %v, want %v", ids, want)
			}
		})
	}
}
