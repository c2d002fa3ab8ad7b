package leasetest

import (
	"errors"
	"testing"

	"github.com/leasehold/leasehold/internal/lease"
)

func testCheckpointOutlivesTheAttempt(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	held := e.createClaimed(e.newTask(), "w1")
	got, err := e.store.Checkpoint(e.ctx, held.LeaseOf(), lease.Step{Name: "fetch", Result: []byte(`{"n":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := got.StepResult("fetch"); !ok || string(r) != `{"n":1}` {
		t.Fatalf("after Checkpoint: steps %+v", got.Steps)
	}
	if _, err := e.store.Checkpoint(e.ctx, held.LeaseOf(), lease.Step{Name: "parse", Op: "step int", Result: []byte(`2`)}); err != nil {
		t.Fatal(err)
	}
	released := e.release(held, lease.Release{Status: lease.StatusPending, RunAt: e.now(), Error: "boom"})
	again, err := e.store.Claim(e.ctx, released.ID, "w2")
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Steps) != 2 || again.Steps[0].Name != "fetch" || again.Steps[1].Name != "parse" || string(again.Steps[1].Result) != "2" {
		t.Fatalf("the next attempt sees steps %+v", again.Steps)
	}
	// The operation that recorded a step is kept with it (issue 35: a
	// replay compares it); a step recorded without one has none.
	if again.Steps[0].Op != "" || again.Steps[1].Op != "step int" {
		t.Fatalf("steps' operations %q and %q, want \"\" and \"step int\"", again.Steps[0].Op, again.Steps[1].Op)
	}
	if _, err := e.store.Checkpoint(e.ctx, held.LeaseOf(), lease.Step{Name: "late", Result: nil}); !errors.Is(err, lease.ErrLeaseLost) {
		t.Fatalf("checkpoint under an old lease: %v, want ErrLeaseLost", err)
	}
}

// A step is recorded at most once: a second checkpoint of it, under the
// same lease or a later one, succeeds, keeps the first result and adds no
// entry (the DynamoDB store's SDK retries a checkpoint whose answer was
// lost, so it must be idempotent per step name).
func testCheckpointRecordsAStepOnce(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	held := e.createClaimed(e.newTask(), "w1")
	for i, result := range []string{`1`, `1`, `2`} {
		got, err := e.store.Checkpoint(e.ctx, held.LeaseOf(), lease.Step{Name: "s", Result: []byte(result)})
		if err != nil {
			t.Fatalf("checkpoint %d: %v", i, err)
		}
		if len(got.Steps) != 1 || string(got.Steps[0].Result) != `1` {
			t.Fatalf("checkpoint %d: steps %+v, want s recorded once with the first result", i, got.Steps)
		}
	}
	released := e.release(held, lease.Release{Status: lease.StatusPending, RunAt: e.now(), Error: "boom"})
	again, err := e.store.Claim(e.ctx, released.ID, "w2")
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.store.Checkpoint(e.ctx, again.LeaseOf(), lease.Step{Name: "s", Result: []byte(`3`)})
	if err != nil || len(got.Steps) != 1 || string(got.Steps[0].Result) != `1` {
		t.Fatalf("checkpoint under the next lease: steps %+v, %v; want s once with the first result", got.Steps, err)
	}
	got, err = e.store.Checkpoint(e.ctx, again.LeaseOf(), lease.Step{Name: "t", Result: []byte(`4`)})
	if err != nil || len(got.Steps) != 2 {
		t.Fatalf("a new step under the next lease: steps %+v, %v", got.Steps, err)
	}
}
