package leasehold_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/workflow"
)

// A step under a policy on the stack (issue 37, point 4), at most once:
// try 1 fails and is retried in the process after 200ms; try 2 fails and
// its 8s delay snoozes the task; the run that resumes it goes on at try 3,
// which succeeds. The step before runs once, every try's start is
// recorded, and the task ends in attempt 1 after one snooze.
func TestStepPolicyOnTheStack(t *testing.T) {
	t.Parallel()
	e := setupStack(t)
	c := newClientOn(t, e)
	count, runsOf := stepCounter()
	var tries atomic.Int32
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "retrier", func(ctx context.Context, _ *leasehold.Task[any]) (int32, error) {
		if _, err := workflow.Step(ctx, "before", count("before")); err != nil {
			return 0, err
		}
		return workflow.Step(ctx, "flaky", func(context.Context) (int32, error) {
			if n := tries.Add(1); n < 3 {
				return 0, errors.New("flaky downstream")
			}
			return tries.Load(), nil
		}, workflow.StepPolicy{MaxAttempts: 3, Initial: 200 * time.Millisecond, Multiplier: 40, Max: 8 * time.Second, AtMostOnce: true})
	})
	w := e.worker(t, leasehold.WorkerConfig{Handlers: hs})
	ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(2*time.Minute))
	defer cancel()
	if _, err := c.Enqueue(ctx, leasehold.Submission{Kind: "retrier", ID: "retried"}); err != nil {
		t.Fatal(err)
	}
	e.pump(t, w, 90*time.Second, func() bool { return e.status(t, "retried") == lease.StatusSucceeded })
	got, err := c.Get(ctx, "retried")
	if err != nil {
		t.Fatal(err)
	}
	want := "before flaky#try1 flaky#try2 flaky#retry2 flaky#try3 flaky"
	if string(got.Result) != "3" || tries.Load() != 3 || strings.Join(got.Steps, " ") != want || got.Attempt != 1 || got.Snoozes != 1 {
		t.Errorf("task: result %s after %d tries, steps %v, attempt %d, %d snoozes; want 3 after 3 tries, steps %s, attempt 1, 1 snooze",
			got.Result, tries.Load(), got.Steps, got.Attempt, got.Snoozes, want)
	}
	if runs := runsOf(); runs["before"] != 1 {
		t.Errorf("step runs %v, want before once", runs)
	}
}

// Invoke on the stack (issue 37, point 3): one parent gets its child's
// result decoded; another's child fails, and the parent fails with the
// child's id and error.
func TestInvokeOnTheStack(t *testing.T) {
	t.Parallel()
	e := setupStack(t)
	c := newClientOn(t, e)
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "invoker", func(ctx context.Context, task *leasehold.Task[int]) (int, error) {
		v, err := workflow.Invoke[int](ctx, "double", workflow.Child{Kind: "doubler", Payload: task.Payload, MaxAttempts: 1})
		if err != nil {
			return 0, err
		}
		return v + 1, nil
	})
	leasehold.Handle(hs, "doubler", func(_ context.Context, task *leasehold.Task[int]) (int, error) {
		if task.Payload < 0 {
			return 0, leasehold.Fail(errors.New("negative"))
		}
		return 2 * task.Payload, nil
	})
	w := e.worker(t, leasehold.WorkerConfig{Handlers: hs})
	ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(2*time.Minute))
	defer cancel()
	for id, p := range map[string]int{"invoke-ok": 20, "invoke-bad": -1} {
		if _, err := c.Enqueue(ctx, leasehold.Submission{Kind: "invoker", ID: id, Payload: p}); err != nil {
			t.Fatal(err)
		}
	}
	e.pump(t, w, 90*time.Second, func() bool {
		return e.status(t, "invoke-ok") == lease.StatusSucceeded && e.status(t, "invoke-bad") == lease.StatusFailed
	})
	ok, err := c.Get(ctx, "invoke-ok")
	if err != nil {
		t.Fatal(err)
	}
	if string(ok.Result) != "41" {
		t.Errorf("invoke-ok: result %s, want 41", ok.Result)
	}
	bad, err := c.Get(ctx, "invoke-bad")
	if err != nil {
		t.Fatal(err)
	}
	kid := workflow.ChildIDIn("invoke-bad", "double", 0)
	if want := `invoke "double": child ` + kid + ` ended FAILED: negative`; bad.Error != want {
		t.Errorf("invoke-bad: error %q, want %q", bad.Error, want)
	}
}
