package leasetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/query"
)

// testCreateCancelled: a parent's end writes a CANCELLED placeholder for a
// child that has no item yet; the child's token then finds it ended.
func testCreateCancelled(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	parent := e.createClaimed(e.newTask(), "p1")
	id := parent.ID + "/0"
	reason := lease.ParentEndedReason(parent.ID, lease.StatusCancelled, "")
	got, err := e.store.CreateCancelled(e.ctx, id, parent.ID, reason)
	if err != nil {
		t.Fatalf("CreateCancelled: %v", err)
	}
	now := e.now()
	want := lease.Task{ID: id, Status: lease.StatusCancelled, Error: reason, CancelRequested: true,
		RunAt: now, CreatedAt: now, UpdatedAt: now, FinishedAt: now, ExpiresAt: expires(now),
		Parent: parent.ID, Waiters: []lease.Waiter{{ID: parent.ID, Mode: lease.WaitChildren}}}
	e.same("CreateCancelled", got, want)
	e.stored(want)
	if !lease.IsPlaceholder(got) {
		t.Fatalf("IsPlaceholder(%+v) = false", got)
	}

	// Again: the id is taken, by the placeholder itself.
	e.clock.Advance(time.Second)
	again, err := e.store.CreateCancelled(e.ctx, id, parent.ID, reason)
	if !errors.Is(err, lease.ErrAlreadyExists) {
		t.Fatalf("second CreateCancelled: %v, want ErrAlreadyExists", err)
	}
	e.same("second CreateCancelled", again, want)

	// The child's token comes: its create finds its task ended, and is
	// told so as a duplicate, not as a conflict (no kind, no payload).
	n := e.newTask()
	n.ID, n.Parent = id, parent.ID
	if seen, err := e.store.CreateClaimed(e.ctx, n, "w1"); !errors.Is(err, lease.ErrAlreadyExists) || errors.Is(err, lease.ErrConflict) {
		t.Fatalf("CreateClaimed over a placeholder: %v, want ErrAlreadyExists", err)
	} else {
		e.same("CreateClaimed over a placeholder", seen, want)
	}
	var fin *lease.FinishedError
	if _, err := e.store.Claim(e.ctx, id, "w1"); !errors.As(err, &fin) || fin.Task.Status != lease.StatusCancelled {
		t.Fatalf("Claim of a placeholder: %v, want FinishedError CANCELLED", err)
	}
	// The same id as a child of another parent is not this child.
	other := n
	other.Parent = parent.ID + "-other"
	if _, err := e.store.CreateClaimed(e.ctx, other, "w2"); !errors.Is(err, lease.ErrConflict) {
		t.Fatalf("CreateClaimed of another parent's child over a placeholder: %v, want ErrConflict", err)
	}
	e.stored(want)

	// An id that names a task already: it is returned, untouched.
	existing := e.child(parent, "w3")
	seen, err := e.store.CreateCancelled(e.ctx, existing.ID, parent.ID, reason)
	if !errors.Is(err, lease.ErrAlreadyExists) {
		t.Fatalf("CreateCancelled of an existing child: %v, want ErrAlreadyExists", err)
	}
	e.same("CreateCancelled of an existing child", seen, existing)
	e.stored(existing)

	// No parent: a chain's link that will not run.
	if got, err := e.store.CreateCancelled(e.ctx, id+"-link", "", reason); err != nil || got.Status != lease.StatusCancelled || got.Parent != "" || len(got.Waiters) != 0 {
		t.Fatalf("CreateCancelled with no parent: %v, %+v", err, got)
	}
	for _, bad := range [][2]string{{"", parent.ID}, {id + "x", "bad\x00parent"}, {parent.ID, parent.ID}} {
		if _, err := e.store.CreateCancelled(e.ctx, bad[0], bad[1], reason); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("CreateCancelled(%q, %q): %v, want ErrInvalid", bad[0], bad[1], err)
		}
	}
}

// testEndWaiting: a WAITING parent is cancelled or failed under the fence it
// was seen at, once.
func testEndWaiting(t *testing.T, newStore NewStoreFunc) {
	for _, status := range []lease.Status{lease.StatusCancelled, lease.StatusFailed} {
		t.Run(string(status), func(t *testing.T) {
			e := setup(t, newStore)
			parent := e.createClaimed(e.newTask(), "p1")
			a := e.child(parent, "w1")
			waiting := e.suspend(parent, lease.Wait{Mode: lease.WaitChildren, For: []string{a.ID, parent.ID + "/1"}})
			e.clock.Advance(time.Second)

			stale := waiting
			stale.Fence--
			var we *lease.WaitError
			if _, err := e.store.EndWaiting(e.ctx, stale, status, "x"); !errors.As(err, &we) || !errors.Is(err, lease.ErrNotWaiting) {
				t.Fatalf("EndWaiting under an old fence: %v, want ErrNotWaiting", err)
			}
			reason := lease.ChildTakenReason(parent.ID + "/1")
			got, err := e.store.EndWaiting(e.ctx, waiting, status, reason)
			if err != nil {
				t.Fatalf("EndWaiting: %v", err)
			}
			want := e.ended(waiting, status, reason)
			want.WaitUntil = time.Time{} // an ended wait keeps no deadline
			e.same("EndWaiting", got, want)
			e.stored(want)
			if !slices.Equal(lease.UnendedChildren(waiting), []string{a.ID, parent.ID + "/1"}) {
				t.Fatalf("UnendedChildren = %v", lease.UnendedChildren(waiting))
			}

			var fin *lease.FinishedError
			if _, err := e.store.EndWaiting(e.ctx, waiting, status, reason); !errors.As(err, &fin) || fin.Task.Status != status {
				t.Fatalf("second EndWaiting: %v, want FinishedError", err)
			}
			missing := waiting
			missing.ID += "-missing"
			if _, err := e.store.EndWaiting(e.ctx, missing, status, reason); !errors.Is(err, lease.ErrNotFound) {
				t.Fatalf("EndWaiting of no task: %v, want ErrNotFound", err)
			}
			if _, err := e.store.EndWaiting(e.ctx, got, status, reason); !errors.Is(err, lease.ErrInvalid) {
				t.Fatalf("EndWaiting of a task seen ended: %v, want ErrInvalid", err)
			}
			if _, err := e.store.EndWaiting(e.ctx, waiting, lease.StatusSucceeded, reason); !errors.Is(err, lease.ErrInvalid) {
				t.Fatalf("EndWaiting to SUCCEEDED: %v, want ErrInvalid", err)
			}
		})
	}
}

// testRetryPlaceholder: a placeholder has nothing to run; retry refuses it.
func testRetryPlaceholder(t *testing.T, a *adminEnv) {
	parent := a.createClaimed(a.newTask(), "p1")
	id := parent.ID + "/0"
	if _, err := a.store.CreateCancelled(a.ctx, id, parent.ID, "cancelled with its parent"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.admin.Retry(a.ctx, id, 1); !errors.Is(err, query.ErrNotRetryable) {
		t.Fatalf("Retry of a placeholder: %v, want ErrNotRetryable", err)
	}
	if got := mustGet(a.env, id); got.Status != lease.StatusCancelled {
		t.Fatalf("placeholder after a refused retry: %s", got.Status)
	}
}
