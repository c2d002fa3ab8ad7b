package leasetest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/leasehold/leasehold/internal/lease"
)

// Spill freezes the inline head at the count its holder saw: only under
// the lease, only at the head's length, again at that length harmlessly;
// a checkpoint into a frozen head is refused (but the retry of one that
// landed before still succeeds), and the next attempt sees Spilled.
func testSpillFreezesTheHead(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	held := e.createClaimed(e.newTask(), "w1")
	for _, name := range []string{"a", "b"} {
		if _, err := e.store.Checkpoint(e.ctx, held.LeaseOf(), lease.Step{Name: name, Op: "step", Result: []byte(`1`)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.store.Spill(e.ctx, held.LeaseOf(), 1); !errors.Is(err, lease.ErrInvalid) {
		t.Fatalf("spill at 1 of a head of 2: %v, want ErrInvalid", err)
	}
	got, err := e.store.Spill(e.ctx, held.LeaseOf(), 2)
	if err != nil || !got.Spilled || len(got.Steps) != 2 {
		t.Fatalf("spill at 2: %+v, %v; want the task spilled with its 2 steps", got, err)
	}
	if _, err := e.store.Spill(e.ctx, held.LeaseOf(), 2); err != nil {
		t.Fatalf("spill at 2 again (a retried write): %v", err)
	}
	if _, err := e.store.Checkpoint(e.ctx, held.LeaseOf(), lease.Step{Name: "c", Result: []byte(`1`)}); !errors.Is(err, lease.ErrInvalid) {
		t.Fatalf("checkpoint into a frozen head: %v, want ErrInvalid", err)
	}
	if again, err := e.store.Checkpoint(e.ctx, held.LeaseOf(), lease.Step{Name: "b", Result: []byte(`1`)}); err != nil || len(again.Steps) != 2 {
		t.Fatalf("a retried checkpoint of a recorded step: %d steps, %v", len(again.Steps), err)
	}
	released := e.release(held, lease.Release{Status: lease.StatusPending, RunAt: e.now(), Error: "boom"})
	if _, err := e.store.Spill(e.ctx, held.LeaseOf(), 2); !errors.Is(err, lease.ErrLeaseLost) {
		t.Fatalf("spill under an old lease: %v, want ErrLeaseLost", err)
	}
	again, err := e.store.Claim(e.ctx, released.ID, "w2")
	if err != nil {
		t.Fatal(err)
	}
	if !again.Spilled || len(again.Steps) != 2 {
		t.Fatalf("the next attempt sees spilled %v and %d steps, want true and 2", again.Spilled, len(again.Steps))
	}
	if plain := e.createClaimed(e.newTask(), "w3"); plain.Spilled {
		t.Fatal("a new task is spilled")
	}
}

// The first write of a position wins: a second one, with another result
// or another operation (a worker whose lease was lost, or a retry), gets
// the recorded operation back and changes nothing.
func testTailKeepsTheFirstWriter(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	held := e.createClaimed(e.newTask(), "w1")
	first := lease.Step{Name: "s", Op: "step int", Result: []byte(`1`)}
	got, err := e.store.PutStep(e.ctx, held.ID, 0, first)
	if err != nil || got.Name != "s" || got.Op != "step int" || string(got.Result) != "1" {
		t.Fatalf("first write: %+v, %v", got, err)
	}
	for _, late := range []lease.Step{{Name: "s", Op: "step int", Result: []byte(`2`)}, {Name: "t", Result: []byte(`3`)}, first} {
		got, err := e.store.PutStep(e.ctx, held.ID, 0, late)
		if err != nil || got.Name != "s" || got.Op != "step int" || string(got.Result) != "1" {
			t.Fatalf("a later write of %+v: %+v, %v; want the first", late, got, err)
		}
	}
	empty := lease.Step{Name: "e", Result: nil}
	if got, err := e.store.PutStep(e.ctx, held.ID, 1, empty); err != nil || got.Name != "e" || len(got.Result) != 0 {
		t.Fatalf("an empty result: %+v, %v", got, err)
	}
	read, err := e.store.ReadSteps(e.ctx, held.ID, 0, lease.MaxStepsPage)
	if err != nil || len(read) != 2 || string(read[0].Result) != "1" || read[0].Op != "step int" || read[1].Name != "e" || read[1].Op != "" {
		t.Fatalf("read back: %+v, %v", read, err)
	}
	// Another task's tail is its own.
	if other, err := e.store.ReadSteps(e.ctx, e.newTask().ID, 0, 1); err != nil || len(other) != 0 {
		t.Fatalf("another task's tail: %+v, %v", other, err)
	}
	// A step's key is no task's.
	if _, err := e.store.Get(e.ctx, lease.StepKey(held.ID, 0)); !errors.Is(err, lease.ErrNotFound) {
		t.Fatalf("get of a step's key: %v, want ErrNotFound", err)
	}
}

// ReadSteps reads a page of at most MaxStepsPage positions in order and
// stops at the first position without an operation.
func testTailReadsInPages(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	id := e.newTask().ID
	const n = 130
	for pos := range n {
		if _, err := e.store.PutStep(e.ctx, id, pos, lease.Step{Name: fmt.Sprint("s", pos), Result: []byte(fmt.Sprint(pos))}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.store.PutStep(e.ctx, id, n+1, lease.Step{Name: "after a gap", Result: nil}); err != nil {
		t.Fatal(err)
	}
	var all []lease.Step
	for from := 0; ; {
		page, err := e.store.ReadSteps(e.ctx, id, from, lease.MaxStepsPage)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, page...)
		from += len(page)
		if len(page) < lease.MaxStepsPage {
			break
		}
	}
	if len(all) != n {
		t.Fatalf("read %d operations, want %d (up to the gap)", len(all), n)
	}
	for pos, st := range all {
		if st.Name != fmt.Sprint("s", pos) || string(st.Result) != fmt.Sprint(pos) {
			t.Fatalf("position %d holds %+v", pos, st)
		}
	}
	for _, bad := range [][2]int{{-1, 1}, {0, 0}, {0, lease.MaxStepsPage + 1}} {
		if _, err := e.store.ReadSteps(e.ctx, id, bad[0], bad[1]); !errors.Is(err, lease.ErrInvalid) {
			t.Fatalf("read of %d from %d: %v, want ErrInvalid", bad[1], bad[0], err)
		}
	}
	if _, err := e.store.PutStep(e.ctx, id, -1, lease.Step{Name: "x"}); !errors.Is(err, lease.ErrInvalid) {
		t.Fatalf("a write at -1: %v, want ErrInvalid", err)
	}
}
