package lifecycle_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/leasehold/leasehold/internal/durable"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lifecycle"
)

// countingCheckpoints counts the Checkpoint, Spill and PutStep writes the
// worker makes.
type countingCheckpoints struct {
	lease.Store
	n, spills, puts atomic.Int32
}

func (c *countingCheckpoints) Spill(ctx context.Context, l lease.Lease, n int) (lease.Task, error) {
	c.spills.Add(1)
	return c.Store.Spill(ctx, l, n)
}

func (c *countingCheckpoints) PutStep(ctx context.Context, id string, pos int, st lease.Step) (lease.Step, error) {
	c.puts.Add(1)
	return c.Store.PutStep(ctx, id, pos, st)
}

func (c *countingCheckpoints) Checkpoint(ctx context.Context, l lease.Lease, st lease.Step) (lease.Task, error) {
	c.n.Add(1)
	return c.Store.Checkpoint(ctx, l, st)
}

// stepsEnv is an env whose handler "steps" runs one step per result in
// results, in order, each named s0, s1, ..., counting the step functions
// that ran.
func stepsEnv(t *testing.T, results [][]byte) (*env, *countingCheckpoints, *atomic.Int32) {
	t.Helper()
	var counter *countingCheckpoints
	e := setup(t, func(c *lifecycle.Config) {
		counter = &countingCheckpoints{Store: c.Store}
		c.Store = counter
	})
	var runs atomic.Int32
	e.handlers["steps"] = func(ctx context.Context, task lease.Task) ([]byte, error) {
		for i, r := range results {
			if _, err := durable.StepOf(ctx, fmt.Sprintf("s%d", i), func(context.Context) ([]byte, error) {
				runs.Add(1)
				return r, nil
			}); err != nil {
				return nil, err
			}
		}
		return []byte(`"done"`), nil
	}
	return e, counter, &runs
}

// The step past lease.MaxSteps starts the spilled tail: the task keeps
// MaxSteps inline steps, written by checkpoints, and the step after them
// is an item of its own (one PutStep, after the one Spill).
func TestStepPastMaxStepsSpills(t *testing.T) {
	t.Parallel()
	results := make([][]byte, lease.MaxSteps+1)
	for i := range results {
		results[i] = []byte(`1`)
	}
	e, checkpoints, runs := stepsEnv(t, results)
	e.exec.Process(t.Context(), nil, msg("s", inline(t, "steps", "s", "", 3)))
	got := e.get(t, "s")
	if got.Status != lease.StatusSucceeded || !got.Spilled || len(got.Steps) != lease.MaxSteps {
		t.Fatalf("task: %s %q, spilled %v, %d inline steps; want SUCCEEDED, spilled, %d inline", got.Status, got.Error, got.Spilled, len(got.Steps), lease.MaxSteps)
	}
	if runs.Load() != lease.MaxSteps+1 || checkpoints.n.Load() != lease.MaxSteps || checkpoints.spills.Load() != 1 || checkpoints.puts.Load() != 1 {
		t.Fatalf("%d step functions run, %d checkpoints, %d spills, %d tail writes; want %d, %d, 1, 1",
			runs.Load(), checkpoints.n.Load(), checkpoints.spills.Load(), checkpoints.puts.Load(), lease.MaxSteps+1, lease.MaxSteps)
	}
	tail, err := e.store.ReadSteps(t.Context(), "s", lease.MaxSteps, lease.MaxStepsPage)
	if err != nil || len(tail) != 1 || tail[0].Name != fmt.Sprintf("s%d", lease.MaxSteps) {
		t.Fatalf("tail %+v, %v", tail, err)
	}
}

// Steps whose results together reach lease.MaxStepsBytes stay inline; the
// step whose result would take them past it starts the tail.
func TestStepResultsPastMaxStepsBytesSpill(t *testing.T) {
	t.Parallel()
	str := func(n int) []byte { return []byte(`"` + strings.Repeat("x", n-2) + `"`) }
	half := lease.MaxStepsBytes / 2
	results := [][]byte{str(half), str(lease.MaxStepsBytes - half), []byte(`1`)} // the limit exactly, then one byte more
	e, checkpoints, runs := stepsEnv(t, results)
	e.exec.Process(t.Context(), nil, msg("b", inline(t, "steps", "b", "", 3)))
	got := e.get(t, "b")
	if got.Status != lease.StatusSucceeded || !got.Spilled || len(got.Steps) != 2 {
		t.Fatalf("task: %s %q, spilled %v, %d inline steps; want SUCCEEDED, spilled, 2 inline", got.Status, got.Error, got.Spilled, len(got.Steps))
	}
	if checkpoints.n.Load() != 2 || checkpoints.puts.Load() != 1 || runs.Load() != 3 {
		t.Fatalf("%d checkpoints, %d tail writes, %d step functions run; want 2, 1, 3", checkpoints.n.Load(), checkpoints.puts.Load(), runs.Load())
	}
}

// The operation past lease.MaxOperations fails the task with an error
// naming the limit, before its function runs and before any write for it.
func TestStepPastMaxOperationsFailsTheTask(t *testing.T) {
	t.Parallel()
	results := make([][]byte, lease.MaxOperations+1)
	for i := range results {
		results[i] = []byte(`1`)
	}
	e, checkpoints, runs := stepsEnv(t, results)
	e.exec.Process(t.Context(), nil, msg("m", inline(t, "steps", "m", "", 3)))
	got := e.get(t, "m")
	want := fmt.Sprintf("step %q: %v: a task's history keeps at most %d operations", fmt.Sprintf("s%d", lease.MaxOperations), lease.ErrInvalid, lease.MaxOperations)
	if got.Status != lease.StatusFailed || got.Error != want {
		t.Fatalf("task: %s %q, want FAILED with %q", got.Status, got.Error, want)
	}
	written := int(checkpoints.n.Load() + checkpoints.puts.Load())
	if written != lease.MaxOperations || runs.Load() != lease.MaxOperations {
		t.Fatalf("%d operations written, %d step functions run; want %d of each", written, runs.Load(), lease.MaxOperations)
	}
	if got.Attempt != 1 {
		t.Fatalf("attempt %d: the limit fails the task for good, without a retry", got.Attempt)
	}
}
