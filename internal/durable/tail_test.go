package durable

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jonboulle/clockwork"

	"github.com/leasehold/leasehold/internal/lease"
)

// tailAttempt is an attempt whose tail positions may hold an operation
// another worker recorded first (a worker whose lease was lost): PutStep
// keeps the first writer's, as the stores do.
type tailAttempt struct {
	attempt
	tail   map[int]lease.Step
	spills []int
}

func (a *tailAttempt) Spill(_ context.Context, _ lease.Lease, n int) (lease.Task, error) {
	a.spills = append(a.spills, n)
	return lease.Task{}, nil
}

func (a *tailAttempt) PutStep(_ context.Context, _ string, pos int, st lease.Step) (lease.Step, error) {
	if had, ok := a.tail[pos]; ok {
		return had, nil
	}
	a.tail[pos] = st
	return st, nil
}

// The run's operations go inline while they fit, then the head is frozen
// once and each later one is a tail write; an operation another worker
// recorded first at a tail position is the one the run goes on with.
func TestStepsSpillAndAdoptTheFirstWriter(t *testing.T) {
	a := &tailAttempt{attempt: attempt{clock: clockwork.NewFakeClock()}, tail: map[int]lease.Step{}}
	first := lease.MaxSteps + 1
	a.tail[first] = lease.Step{Name: fmt.Sprint("s", first), Op: OpStep, Result: []byte(`"theirs"`)}
	var w Workflow
	w.Start(a, lease.Lease{TaskID: "p", Fence: 1, Attempt: 1}, nil, "", nil)
	ctx := &Scope{Context: context.Background(), Workflow: &w}
	for i := range lease.MaxSteps + 3 {
		out, err := StepOf(ctx, fmt.Sprint("s", i), func(context.Context) ([]byte, error) { return []byte(`"mine"`), nil })
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if want := `"mine"`; i == first && string(out) != `"theirs"` || i != first && string(out) != want {
			t.Fatalf("step %d returned %s", i, out)
		}
	}
	if len(a.checkpoints) != lease.MaxSteps || len(a.spills) != 1 || a.spills[0] != lease.MaxSteps || len(a.tail) != 3 {
		t.Fatalf("%d checkpoints, spills %v, %d tail writes; want %d, [%d], 3", len(a.checkpoints), a.spills, len(a.tail), lease.MaxSteps, lease.MaxSteps)
	}
	if !w.Spilled() || len(w.Steps()) != lease.MaxSteps+3 || string(w.Steps()[first].Result) != `"theirs"` {
		t.Fatalf("spilled %v, %d operations, the adopted one %s", w.Spilled(), len(w.Steps()), w.Steps()[first].Result)
	}
}

// Another operation recorded first at a tail position (code of another
// version on a worker whose lease was lost) is a divergence at that
// position: the run goes no further.
func TestAnotherOperationInTheTailDiverges(t *testing.T) {
	a := &tailAttempt{attempt: attempt{clock: clockwork.NewFakeClock()}, tail: map[int]lease.Step{0: {Name: "other", Op: OpStep, Result: []byte(`1`)}}}
	var w Workflow
	w.StartSpilled(a, lease.Lease{TaskID: "p", Fence: 1, Attempt: 1}, nil, "", nil)
	ctx := &Scope{Context: context.Background(), Workflow: &w}
	_, err := StepOf(ctx, "mine", func(context.Context) ([]byte, error) { return []byte(`2`), nil })
	var d *DivergedError
	if !errors.As(err, &d) || d.Position != 1 || w.Diverged() == nil {
		t.Fatalf("%v, want a divergence at operation 1", err)
	}
	if _, err := StepOf(ctx, "next", func(context.Context) ([]byte, error) { return nil, nil }); !errors.As(err, &d) {
		t.Fatalf("the next call: %v, want the divergence again", err)
	}
	if len(a.spills) != 0 {
		t.Fatalf("a spilled run froze the head again: %v", a.spills)
	}
}
