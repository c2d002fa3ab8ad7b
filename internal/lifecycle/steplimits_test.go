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

// countingCheckpoints counts the Checkpoint writes the worker makes.
type countingCheckpoints struct {
	lease.Store
	n atomic.Int32
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

// The step past lease.MaxSteps fails the task with an error naming the
// limit, before its function runs and before any write for it: the task
// keeps the MaxSteps steps it recorded.
func TestStepPastMaxStepsFailsTheTask(t *testing.T) {
	t.Parallel()
	results := make([][]byte, lease.MaxSteps+1)
	for i := range results {
		results[i] = []byte(`1`)
	}
	e, checkpoints, runs := stepsEnv(t, results)
	e.exec.Process(t.Context(), nil, msg("s", inline(t, "steps", "s", "", 3)))
	got := e.get(t, "s")
	want := fmt.Sprintf("step %q: %v: a task keeps at most %d steps", fmt.Sprintf("s%d", lease.MaxSteps), lease.ErrInvalid, lease.MaxSteps)
	if got.Status != lease.StatusFailed || got.Error != want {
		t.Fatalf("task: %s %q, want FAILED with %q", got.Status, got.Error, want)
	}
	if len(got.Steps) != lease.MaxSteps || runs.Load() != lease.MaxSteps || checkpoints.n.Load() != lease.MaxSteps {
		t.Fatalf("%d steps kept, %d step functions run, %d checkpoints written; want %d of each: the step past the limit neither runs nor is written",
			len(got.Steps), runs.Load(), checkpoints.n.Load(), lease.MaxSteps)
	}
	if got.Attempt != 1 {
		t.Fatalf("attempt %d: the limit fails the task for good, without a retry", got.Attempt)
	}
}

// Steps whose results together reach lease.MaxStepsBytes are kept; the step
// whose result takes them past it fails the task with an error naming the
// limit, after its function ran but before its write.
func TestStepResultsPastMaxStepsBytesFailTheTask(t *testing.T) {
	t.Parallel()
	str := func(n int) []byte { return []byte(`"` + strings.Repeat("x", n-2) + `"`) }
	half := lease.MaxStepsBytes / 2
	results := [][]byte{str(half), str(lease.MaxStepsBytes - half), []byte(`1`)} // the limit exactly, then one byte more
	e, checkpoints, runs := stepsEnv(t, results)
	e.exec.Process(t.Context(), nil, msg("b", inline(t, "steps", "b", "", 3)))
	got := e.get(t, "b")
	want := fmt.Sprintf(`step "s2": steps' results is %d bytes, over the %d-byte limit`, lease.MaxStepsBytes+1, lease.MaxStepsBytes)
	if got.Status != lease.StatusFailed || got.Error != want {
		t.Fatalf("task: %s %q, want FAILED with %q", got.Status, got.Error, want)
	}
	if len(got.Steps) != 2 || checkpoints.n.Load() != 2 || runs.Load() != 3 {
		t.Fatalf("%d steps kept, %d checkpoints written, %d step functions run; want the first 2 kept and written, and all 3 run",
			len(got.Steps), checkpoints.n.Load(), runs.Load())
	}
	if got.Attempt != 1 {
		t.Fatalf("attempt %d: the limit fails the task for good, without a retry", got.Attempt)
	}
}
