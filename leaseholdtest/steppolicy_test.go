package leaseholdtest_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/workflow"
)

// policyFlow is a handler of kind "flow" whose step "before" (counted)
// comes before the step "flaky" tried under policy, whose function is
// try (called with the try's number, from 1, across all runs), then the
// step "after" and a sleep.
func policyFlow(t *testing.T, c *counter, policy workflow.StepPolicy, try func(ctx context.Context, n int) (int, error)) *leaseholdtest.Env {
	t.Helper()
	hs := leasehold.NewHandlers()
	var mu sync.Mutex
	n := 0
	leasehold.Handle(hs, "flow", func(ctx context.Context, _ *leasehold.Task[struct{}]) (int, error) {
		if _, err := workflow.Step(ctx, "before", func(context.Context) (int, error) { c.add("before"); return 1, nil }); err != nil {
			return 0, err
		}
		v, err := workflow.Step(ctx, "flaky", func(ctx context.Context) (int, error) {
			c.add("flaky")
			mu.Lock()
			n++
			k := n
			mu.Unlock()
			return try(ctx, k)
		}, policy)
		if err != nil {
			return 0, err
		}
		out, err := workflow.Step(ctx, "after", func(context.Context) (int, error) { c.add("after"); return v + 1, nil })
		if err != nil {
			return 0, err
		}
		// A run after the sleep replays the whole history, the step's
		// try records included.
		return out, workflow.Sleep(ctx, time.Minute)
	})
	return leaseholdtest.New(t, hs)
}

var errFlaky = errors.New("flaky downstream")

// A step that fails twice then succeeds, under 3 tries a second apart:
// the three tries run in the attempt that claimed the task (one claim),
// the step before it runs once, and the history is the plain steps' (no
// try records at least once).
func TestStepPolicyRetriesInProcess(t *testing.T) {
	c := &counter{}
	env := policyFlow(t, c, workflow.StepPolicy{MaxAttempts: 3, Initial: time.Second, Max: 2 * time.Second},
		func(_ context.Context, n int) (int, error) {
			if n < 3 {
				return 0, errFlaky
			}
			return 41, nil
		})
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "flow"})
	mustRun(t, env)
	got := mustTask(t, env, id)
	if got.Status != leasehold.StatusSucceeded || string(got.Result) != "42" || got.Attempt != 1 {
		t.Fatalf("task: %s %s attempt %d (%q), want SUCCEEDED 42 in attempt 1", got.Status, got.Result, got.Attempt, got.Error)
	}
	if want := map[string]int{"before": 1, "flaky": 3, "after": 1}; !equalCounts(c.all(), want) {
		t.Errorf("calls %v, want %v", c.all(), want)
	}
	if names := strings.Join(got.StepNames(), " "); names != "before flaky after sleep#1" {
		t.Errorf("history %s, want before flaky after sleep#1", names)
	}
}

// A delay of an hour before the second try: the task snoozes durably
// (the try's failure recorded as "flaky#retry1"), and the run that
// resumes it an hour later goes on at try 2, the last of 2, not at try 1:
// the step fails the task after two calls, naming the step.
func TestStepPolicyLongDelaySuspendsAndResumesAtTheNextTry(t *testing.T) {
	c := &counter{}
	var mu sync.Mutex
	var at []time.Time
	var env *leaseholdtest.Env
	env = policyFlow(t, c, workflow.StepPolicy{MaxAttempts: 2, Initial: time.Hour},
		func(_ context.Context, n int) (int, error) {
			mu.Lock()
			at = append(at, env.Clock().Now())
			mu.Unlock()
			return 0, errFlaky
		})
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "flow"})
	mustRun(t, env)
	got := mustTask(t, env, id)
	if got.Status != leasehold.StatusFailed || !strings.Contains(got.Error, `step "flaky": all 2 tries failed`) || !strings.Contains(got.Error, errFlaky.Error()) {
		t.Fatalf("task: %s (%q), want FAILED naming the step and its error", got.Status, got.Error)
	}
	if want := map[string]int{"before": 1, "flaky": 2}; !equalCounts(c.all(), want) {
		t.Errorf("calls %v, want %v", c.all(), want)
	}
	if names := strings.Join(got.StepNames(), " "); names != "before flaky#retry1" {
		t.Errorf("history %s, want before flaky#retry1", names)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(at) != 2 || at[1].Sub(at[0]) < time.Hour {
		t.Errorf("tries at %v, want 2 an hour apart", at)
	}
	if got.Attempt != 1 {
		t.Errorf("attempt %d: a snooze is no attempt, want 1", got.Attempt)
	}
}

// The same long delay, and a second try that succeeds: the task resumes
// at try 2 and succeeds.
func TestStepPolicyLongDelayThenSuccess(t *testing.T) {
	c := &counter{}
	env := policyFlow(t, c, workflow.StepPolicy{MaxAttempts: 3, Initial: time.Hour},
		func(_ context.Context, n int) (int, error) {
			if n == 1 {
				return 0, errFlaky
			}
			return 41, nil
		})
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "flow"})
	start := env.Clock().Now()
	mustRun(t, env)
	got := mustTask(t, env, id)
	if got.Status != leasehold.StatusSucceeded || string(got.Result) != "42" {
		t.Fatalf("task: %s %s (%q), want SUCCEEDED 42", got.Status, got.Result, got.Error)
	}
	if want := map[string]int{"before": 1, "flaky": 2, "after": 1}; !equalCounts(c.all(), want) {
		t.Errorf("calls %v, want %v", c.all(), want)
	}
	if names := strings.Join(got.StepNames(), " "); names != "before flaky#retry1 flaky after sleep#1" {
		t.Errorf("history %s, want before flaky#retry1 flaky after sleep#1", names)
	}
	if waited := env.Clock().Since(start); waited < time.Hour {
		t.Errorf("the clock moved %s, want the hour's delay", waited)
	}
}

// A try that outlives the policy's timeout: its context ends with a cause
// that names the step and the try and matches context.DeadlineExceeded;
// the try fails and the next succeeds, in the same attempt.
func TestStepPolicyTimeoutEndsTheContextWithACause(t *testing.T) {
	c := &counter{}
	var mu sync.Mutex
	var cause error
	env := policyFlow(t, c, workflow.StepPolicy{MaxAttempts: 2, Timeout: 20 * time.Millisecond},
		func(ctx context.Context, n int) (int, error) {
			if n > 1 {
				return 41, nil
			}
			<-ctx.Done()
			mu.Lock()
			cause = context.Cause(ctx)
			mu.Unlock()
			return 0, ctx.Err()
		})
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "flow"})
	mustRun(t, env)
	got := mustTask(t, env, id)
	if got.Status != leasehold.StatusSucceeded || string(got.Result) != "42" || got.Attempt != 1 {
		t.Fatalf("task: %s %s attempt %d (%q), want SUCCEEDED 42 in attempt 1", got.Status, got.Result, got.Attempt, got.Error)
	}
	mu.Lock()
	defer mu.Unlock()
	if cause == nil || !errors.Is(cause, context.DeadlineExceeded) || !strings.Contains(cause.Error(), `step "flaky": try 1 timed out after 20ms`) {
		t.Errorf("the try's cause: %v, want the step's timeout", cause)
	}
}

// A try whose timeout ends the last try fails the task with the cause.
func TestStepPolicyTimeoutOfTheLastTryFailsTheTask(t *testing.T) {
	c := &counter{}
	env := policyFlow(t, c, workflow.StepPolicy{MaxAttempts: 1, Timeout: 10 * time.Millisecond},
		func(ctx context.Context, n int) (int, error) {
			<-ctx.Done()
			return 0, errFlaky // not the context's error: the cause is kept too
		})
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "flow"})
	mustRun(t, env)
	got := mustTask(t, env, id)
	if got.Status != leasehold.StatusFailed || !strings.Contains(got.Error, "try 1 timed out after 10ms") || !strings.Contains(got.Error, errFlaky.Error()) {
		t.Fatalf("task: %s (%q), want FAILED with the timeout and the step's error", got.Status, got.Error)
	}
}

// A Retry predicate that refuses the error: the step stops at its first
// try and fails the task at once (no attempt of the task's either).
func TestStepPolicyRetryPredicateRefuses(t *testing.T) {
	c := &counter{}
	errDeclined := errors.New("card declined")
	env := policyFlow(t, c, workflow.StepPolicy{MaxAttempts: 5, Retry: func(err error) bool { return !errors.Is(err, errDeclined) }},
		func(context.Context, int) (int, error) { return 0, errDeclined })
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "flow", MaxAttempts: 3})
	mustRun(t, env)
	got := mustTask(t, env, id)
	if got.Status != leasehold.StatusFailed || got.Attempt != 1 || !strings.Contains(got.Error, `step "flaky": try 1 of 5 failed, and its policy does not retry the error: card declined`) {
		t.Fatalf("task: %s attempt %d (%q), want FAILED in attempt 1 naming the step", got.Status, got.Attempt, got.Error)
	}
	if n := c.get("flaky"); n != 1 {
		t.Errorf("flaky ran %d times, want once", n)
	}
}

// Tries that all fail: the step fails the task (permanently: the task's
// own attempts are not used) with the step's name, the count and the last
// error.
func TestStepPolicyExhaustedFailsTheTask(t *testing.T) {
	c := &counter{}
	env := policyFlow(t, c, workflow.StepPolicy{MaxAttempts: 3, Initial: time.Second},
		func(context.Context, int) (int, error) { return 0, errFlaky })
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "flow", MaxAttempts: 5})
	mustRun(t, env)
	got := mustTask(t, env, id)
	if got.Status != leasehold.StatusFailed || got.Attempt != 1 || got.Error != `step "flaky": all 3 tries failed, the last: flaky downstream` {
		t.Fatalf("task: %s attempt %d (%q), want FAILED in attempt 1 naming the step", got.Status, got.Attempt, got.Error)
	}
	if want := map[string]int{"before": 1, "flaky": 3}; !equalCounts(c.all(), want) {
		t.Errorf("calls %v, want %v", c.all(), want)
	}
}

// At most once: the first try's process dies (the step's function
// panics, which the worker recovers as a failed attempt) after its start
// was recorded. The next attempt does not run that try again: it counts
// as failed with ErrStepInterrupted, and with one try allowed the step
// fails the task; with two, try 2 runs.
func TestStepPolicyAtMostOnceDoesNotRunACutOffTryAgain(t *testing.T) {
	for _, tc := range []struct {
		name     string
		tries    int
		calls    int
		status   leasehold.Status
		history  string
		errorHas string
	}{
		{"one try", 1, 1, leasehold.StatusFailed, "before flaky#try1", `step "flaky": all 1 tries failed, the last: try 1: ` + workflow.ErrStepInterrupted.Error()},
		{"two tries", 2, 2, leasehold.StatusSucceeded, "before flaky#try1 flaky#try2 flaky after sleep#1", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &counter{}
			env := policyFlow(t, c, workflow.StepPolicy{MaxAttempts: tc.tries, AtMostOnce: true},
				func(_ context.Context, n int) (int, error) {
					if n == 1 {
						panic("the worker dies mid-try")
					}
					return 41, nil
				})
			id := mustEnqueue(t, env, leasehold.Submission{Kind: "flow", MaxAttempts: 3})
			mustRun(t, env)
			got := mustTask(t, env, id)
			if got.Status != tc.status || !strings.Contains(got.Error, tc.errorHas) {
				t.Fatalf("task: %s (%q), want %s with %q", got.Status, got.Error, tc.status, tc.errorHas)
			}
			if n := c.get("flaky"); n != tc.calls {
				t.Errorf("flaky ran %d times, want %d", n, tc.calls)
			}
			if c.get("before") != 1 {
				t.Errorf("before ran %d times, want once", c.get("before"))
			}
			if names := strings.Join(got.StepNames(), " "); names != tc.history {
				t.Errorf("history %s, want %s", names, tc.history)
			}
		})
	}
}

// At least once (the default), the same crash runs the try again in the
// next attempt, and records nothing but the result.
func TestStepPolicyAtLeastOnceRunsACutOffTryAgain(t *testing.T) {
	c := &counter{}
	env := policyFlow(t, c, workflow.StepPolicy{MaxAttempts: 1},
		func(_ context.Context, n int) (int, error) {
			if n == 1 {
				panic("the worker dies mid-try")
			}
			return 41, nil
		})
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "flow", MaxAttempts: 3})
	mustRun(t, env)
	got := mustTask(t, env, id)
	if got.Status != leasehold.StatusSucceeded || got.Attempt != 2 || c.get("flaky") != 2 {
		t.Fatalf("task: %s attempt %d (%q), flaky ran %d times; want SUCCEEDED in attempt 2 after 2 runs", got.Status, got.Attempt, got.Error, c.get("flaky"))
	}
	if names := strings.Join(got.StepNames(), " "); names != "before flaky after sleep#1" {
		t.Errorf("history %s, want before flaky after sleep#1", names)
	}
}

// A policy out of range fails the task without running the step.
func TestStepPolicyInvalid(t *testing.T) {
	c := &counter{}
	env := policyFlow(t, c, workflow.StepPolicy{MaxAttempts: 101},
		func(context.Context, int) (int, error) { return 1, nil })
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "flow"})
	mustRun(t, env)
	got := mustTask(t, env, id)
	if got.Status != leasehold.StatusFailed || !strings.Contains(got.Error, "max attempts 101") || c.get("flaky") != 0 {
		t.Fatalf("task: %s (%q), flaky ran %d times; want FAILED before it ran", got.Status, got.Error, c.get("flaky"))
	}
}

func equalCounts(got, want map[string]int) bool {
	if len(got) != len(want) {
		return false
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// What a policy costs in writes, against the same step without one: a try
// retried in the process writes nothing; at most once writes each try's
// start.
func TestStepPolicyWrites(t *testing.T) {
	writes := func(policy []workflow.StepPolicy, fails int) int {
		t.Helper()
		hs := leasehold.NewHandlers()
		n := 0
		leasehold.Handle(hs, "one", func(ctx context.Context, _ *leasehold.Task[struct{}]) (int, error) {
			return workflow.Step(ctx, "s", func(context.Context) (int, error) {
				if n++; n <= fails {
					return 0, errFlaky
				}
				return n, nil
			}, policy...)
		})
		env := leaseholdtest.New(t, hs)
		id := mustEnqueue(t, env, leasehold.Submission{Kind: "one"})
		before := env.WriteCalls()
		mustRun(t, env)
		if got := mustTask(t, env, id); got.Status != leasehold.StatusSucceeded {
			t.Fatalf("task: %s (%q)", got.Status, got.Error)
		}
		return env.WriteCalls() - before
	}
	plain := writes(nil, 0)
	if got := writes([]workflow.StepPolicy{{MaxAttempts: 3}}, 2); got != plain {
		t.Errorf("two tries retried in the process: %d writes, want %d as without a policy", got, plain)
	}
	if got := writes([]workflow.StepPolicy{{MaxAttempts: 3, AtMostOnce: true}}, 2); got != plain+3 {
		t.Errorf("three tries at most once: %d writes, want %d (+1 per try)", got, plain+3)
	}
}

// A deploy under a task whose step snoozed for its next try: code that
// drops the step's policy diverges at the try record (the task is held,
// nothing runs), and the policy's code back resumes it at try 2.
func TestStepPolicyDroppedUnderATaskInFlight(t *testing.T) {
	d := &deploy{}
	c := &counter{}
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "flow", func(ctx context.Context, _ *leasehold.Task[struct{}]) (int, error) {
		var policy []workflow.StepPolicy
		if d.v.Load() == 1 {
			policy = append(policy, workflow.StepPolicy{MaxAttempts: 3, Initial: time.Hour})
		}
		return workflow.Step(ctx, "flaky", func(context.Context) (int, error) {
			c.add("flaky")
			if c.get("flaky") == 1 {
				return 0, errFlaky
			}
			return 7, nil
		}, policy...)
	})
	env := leaseholdtest.New(t, hs)
	id, _ := inFlight(t, env, d, "flow")
	checkHeld(t, env, id, `recorded step retry "flaky#retry1", the code asked for step int "flaky"`, c, map[string]int{"flaky": 1})
	d.v.Store(1)
	mustRun(t, env)
	got := checkDone(t, env, id, c, map[string]int{"flaky": 2})
	if names := strings.Join(got.StepNames(), " "); names != "flaky#retry1 flaky" {
		t.Errorf("history %s, want flaky#retry1 flaky", names)
	}
}
