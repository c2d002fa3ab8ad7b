package leasetest

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/lease"
)

// testContinueAsNew (issue 36, point 4): a workflow's run ends with its
// history archived as a task of its own (RunID), and the task goes on as
// its next run: the new input, no steps, no wait, attempts counted again,
// Run grown by one. An archive written again under a later fence
// replaces the earlier one; under an earlier fence it stands.
func testContinueAsNew(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	ar, ok := e.store.(interface {
		ArchiveRun(ctx context.Context, l lease.Lease, run lease.Task) (string, error)
	})
	if !ok {
		t.Fatal("the store does not keep archived runs (ArchiveRun)")
	}
	claimed := e.createClaimed(e.newTask(), "w1")
	held, err := e.store.Checkpoint(e.ctx, claimed.LeaseOf(), lease.Step{Name: "tick", Op: "step int", Result: []byte(`1`)})
	if err != nil {
		t.Fatal(err)
	}
	id, err := ar.ArchiveRun(e.ctx, claimed.LeaseOf(), held)
	if err != nil || id != lease.RunID(claimed.ID, 0) || !strings.HasSuffix(id, "@run1") {
		t.Fatalf("archive: %q, %v", id, err)
	}
	next := e.release(held, lease.Release{Status: lease.StatusPending, RunAt: e.now(), Error: "continued as new: run 2", Continue: []byte(`{"n":2}`)})
	if next.Run != 1 || next.Attempt != 0 || len(next.Steps) != 0 || string(next.Payload) != `{"n":2}` || next.Status != lease.StatusPending || next.Wait != "" {
		t.Fatalf("the next run: %+v", next)
	}
	e.stored(next)
	a, err := e.store.Get(e.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if a.Status != lease.StatusSucceeded || a.Run != 0 || a.Parent != claimed.ID || len(a.Steps) != 1 || a.Steps[0].Name != "tick" ||
		string(a.Payload) != string(claimed.Payload) || string(a.Result) != `{"continued_as":"`+claimed.ID+`","run":2}` || a.ExpiresAt.IsZero() {
		t.Fatalf("the archived run: %+v", a)
	}
	// The next run claims, records its own steps, and archives as run 2.
	again := e.claim(next, "w2")
	if again.Attempt != 1 || again.Run != 1 {
		t.Fatalf("claimed again: %+v", again)
	}
	if _, err := e.store.Checkpoint(e.ctx, again.LeaseOf(), lease.Step{Name: "tick", Result: []byte(`2`)}); err != nil {
		t.Fatalf("the next run records a step its earlier run recorded: %v", err)
	}
	// Run 1 archived again under a later fence (a continue retried by the
	// next holder) replaces the stored archive; a stale one under the old
	// fence then leaves it.
	if got, err := ar.ArchiveRun(e.ctx, again.LeaseOf(), held); err != nil || got != id {
		t.Fatalf("archive under a later fence: %q, %v", got, err)
	}
	stale := held
	stale.Steps = nil
	if got, err := ar.ArchiveRun(e.ctx, claimed.LeaseOf(), stale); err != nil || got != id {
		t.Fatalf("stale archive: %q, %v", got, err)
	}
	if a2, err := e.store.Get(e.ctx, id); err != nil || len(a2.Steps) != 1 {
		t.Fatalf("a stale archive replaced the stored one: %+v, %v", a2, err)
	}
	// An id taken by another task is a conflict, not an overwrite.
	other := e.newTask()
	other.ID = lease.RunID(again.ID, 1)
	e.create(other)
	if _, err := ar.ArchiveRun(e.ctx, again.LeaseOf(), again); !errors.Is(err, lease.ErrConflict) {
		t.Fatalf("archive over another task: %v, want a conflict", err)
	}
	// A continue is only a release to PENDING.
	if _, err := e.store.Release(e.ctx, again.LeaseOf(), lease.Release{Status: lease.StatusFailed, Continue: []byte(`{}`)}); !errors.Is(err, lease.ErrInvalid) {
		t.Fatalf("continue to FAILED: %v", err)
	}
}
