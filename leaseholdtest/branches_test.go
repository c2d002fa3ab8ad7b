package leaseholdtest_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/workflow"
)

// counted is a step function that counts its runs under name.
func counted[T any](c *counter, name string, v T) func(context.Context) (T, error) {
	return func(context.Context) (T, error) {
		c.add(name)
		return v, nil
	}
}

// A child context is checkpointed as one unit: its operations are
// recorded in its own space, its result as "context:NAME", and a run
// after it completed returns the result without calling it.
func TestChildContextIsOneUnit(t *testing.T) {
	t.Parallel()
	var c counter
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "flow", func(ctx context.Context, _ *leasehold.Task[int]) (int, error) {
		sum, err := workflow.RunInChildContext(ctx, "prep", func(ctx context.Context) (int, error) {
			c.add("prep")
			a, err := workflow.Step(ctx, "a", counted(&c, "a", 1))
			if err != nil {
				return 0, err
			}
			if err := workflow.Sleep(ctx, time.Hour); err != nil {
				return 0, err
			}
			b, err := workflow.Step(ctx, "b", counted(&c, "b", 2))
			return a + b, err
		})
		if err != nil {
			return 0, err
		}
		if _, err := workflow.Step(ctx, "a", counted(&c, "root a", 10)); err != nil {
			return 0, err // the same name as the context's step: another space
		}
		if err := workflow.Sleep(ctx, time.Hour); err != nil {
			return 0, err
		}
		return sum, nil
	})
	env := leaseholdtest.New(t, hs)
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "flow"})
	mustRun(t, env)
	got := mustTask(t, env, id)
	if got.Status != leasehold.StatusSucceeded || string(got.Result) != "3" || got.Attempt != 1 {
		t.Fatalf("task: %s %s attempt %d (%s), want SUCCEEDED 3", got.Status, got.Result, got.Attempt, got.Error)
	}
	want := []string{"@prep/a", "@prep/sleep#1", "@prep/b", "context:prep", "a", "sleep#1"}
	if names := got.StepNames(); !slices.Equal(names, want) {
		t.Errorf("steps %v, want %v", names, want)
	}
	// Runs: the first (to the context's sleep), the second (the context
	// ends, then the root's sleep), the third (the context's result
	// replayed, fn not called).
	if n := c.get("prep"); n != 2 {
		t.Errorf("the child context ran %d times, want 2 (not after it was recorded)", n)
	}
	for _, name := range []string{"a", "b", "root a"} {
		if n := c.get(name); n != 1 {
			t.Errorf("step %s ran %d times, want once", name, n)
		}
	}
	if line, err := hs.Replay(t.Context(), mustHistory(t, env, id)); err != nil || !strings.HasPrefix(line, "ok ") {
		t.Fatalf("replay: %q, %v", line, err)
	}
}

// branchFlow runs two branches at once, each a step, a sleep (1h and 2h)
// and a step, and waits for both; then a third branch that waits for a
// callback while a fourth finishes at once.
func branchFlow(c *counter, handed chan<- string) func(context.Context, *leasehold.Task[int]) (string, error) {
	branch := func(name string, nap time.Duration) func(context.Context) (string, error) {
		return func(ctx context.Context) (string, error) {
			c.add("branch " + name)
			if _, err := workflow.Step(ctx, "first", counted(c, name+" first", 1)); err != nil {
				return "", err
			}
			if err := workflow.Sleep(ctx, nap); err != nil {
				return "", err
			}
			return workflow.Step(ctx, "second", counted(c, name+" second", name))
		}
	}
	return func(ctx context.Context, _ *leasehold.Task[int]) (string, error) {
		a, b := workflow.Go(ctx, "a", branch("a", time.Hour)), workflow.Go(ctx, "b", branch("b", 2*time.Hour))
		if err := workflow.AwaitAll(ctx, "ab", a, b); err != nil {
			return "", err
		}
		va, _ := a.Get(ctx)
		vb, _ := b.Get(ctx)
		asked := workflow.Go(ctx, "asked", func(ctx context.Context) (string, error) {
			return workflow.WaitForCallback[string](ctx, "ok", time.Hour, func(_ context.Context, tok string) error {
				c.add("submit")
				handed <- tok
				return nil
			})
		})
		quick := workflow.Go(ctx, "quick", counted(c, "quick", "q"))
		if err := workflow.AwaitAll(ctx, "cq", asked, quick); err != nil {
			return "", err
		}
		vc, _ := asked.Get(ctx)
		vq, _ := quick.Get(ctx)
		return va + vb + vc + vq, nil
	}
}

// Branches run at once, each in its own space: their steps never collide
// (both name theirs "first" and "second"), each runs once, the handler
// waits only when no branch can go on (the quick branch ends while the
// other waits for its callback), and a replay of the history agrees.
func TestBranchesRunInTheirOwnSpaces(t *testing.T) {
	t.Parallel()
	var c counter
	handed := make(chan string, 4)
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "branches", branchFlow(&c, handed))
	env := leaseholdtest.New(t, hs)
	begin := env.Clock().Now()
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "branches", MaxAttempts: 1})
	mustRun(t, env)
	waiting := mustTask(t, env, id)
	if waiting.Status != leasehold.StatusWaiting || waiting.Wait != "callback" {
		t.Fatalf("%s waiting for %q (%s), want WAITING for the branch's callback", waiting.Status, waiting.Wait, waiting.Error)
	}
	if d := env.Clock().Since(begin); d != 2*time.Hour {
		t.Errorf("the branches' sleeps took %s, want 2h (the longer; they slept at once)", d)
	}
	if n := c.get("quick"); n != 1 {
		t.Errorf("the quick branch ran %d times before the task waited, want once", n)
	}
	if err := env.CompleteCallback(<-handed, "c"); err != nil {
		t.Fatal(err)
	}
	mustRun(t, env)
	got := mustTask(t, env, id)
	if got.Status != leasehold.StatusSucceeded || string(got.Result) != `"abcq"` || got.Attempt != 1 {
		t.Fatalf("task: %s %s attempt %d (%s), want SUCCEEDED abcq in attempt 1", got.Status, got.Result, got.Attempt, got.Error)
	}
	names := got.StepNames()
	for _, want := range []string{"@a/first", "@a/sleep#1", "@a/second", "@a/result", "@b/first", "@b/sleep#1", "@b/second", "@b/result", "all:ab", "@asked/callback:ok", "@asked/result", "@quick/result", "all:cq"} {
		if !slices.Contains(names, want) {
			t.Errorf("steps %v lack %q", names, want)
		}
	}
	for _, name := range []string{"a first", "a second", "b first", "b second", "quick", "submit"} {
		if n := c.get(name); n != 1 {
			t.Errorf("%s ran %d times, want once", name, n)
		}
	}
	// Once recorded, a branch is not run again: a ran to its sleep, then
	// (after 1h) to its end; b to its sleep, after 1h to it again, after
	// 2h to its end; neither ran after that.
	if na, nb := c.get("branch a"), c.get("branch b"); na != 2 || nb != 3 {
		t.Errorf("branch a ran %d times and b %d, want 2 and 3: a branch whose result is recorded must not run", na, nb)
	}
	if line, err := hs.Replay(t.Context(), mustHistory(t, env, id)); err != nil || !strings.HasPrefix(line, "ok ") {
		t.Fatalf("replay: %q, %v", line, err)
	}
}

// A race a timer wins against a branch that sleeps longer: the handler
// returns success, although the losing branch asked to wait.
func TestRaceOfABranchAndATimer(t *testing.T) {
	t.Parallel()
	var c counter
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "race", func(ctx context.Context, _ *leasehold.Task[int]) (int, error) {
		slow := workflow.Go(ctx, "slow", func(ctx context.Context) (int, error) {
			if err := workflow.Sleep(ctx, 2*time.Hour); err != nil {
				return 0, err
			}
			return workflow.Step(ctx, "late", counted(&c, "late", 1))
		})
		return workflow.Race(ctx, "first", slow, workflow.SleepAsync(ctx, time.Hour))
	})
	env := leaseholdtest.New(t, hs)
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "race", MaxAttempts: 1})
	mustRun(t, env)
	got := mustTask(t, env, id)
	if got.Status != leasehold.StatusSucceeded || string(got.Result) != "1" {
		t.Fatalf("task: %s %s (%s), want SUCCEEDED 1 (the timer)", got.Status, got.Result, got.Error)
	}
	if n := c.get("late"); n != 0 {
		t.Errorf("the losing branch's step ran %d times", n)
	}
}

// Parallel's completion policy, as Map's: three branches, one failing for
// good; with one failure tolerated the parallel succeeds, with none it
// fails naming the branch.
func TestParallelPolicy(t *testing.T) {
	t.Parallel()
	for _, tolerated := range []int{1, 0} {
		t.Run(fmt.Sprint("tolerated ", tolerated), func(t *testing.T) {
			t.Parallel()
			hs := leasehold.NewHandlers()
			leasehold.Handle(hs, "par", func(ctx context.Context, _ *leasehold.Task[int]) (string, error) {
				fs, err := workflow.Parallel(ctx, "three", workflow.MapOptions{MaxConcurrency: 2, ToleratedFailures: tolerated}, map[string]func(context.Context) (string, error){
					"x": func(ctx context.Context) (string, error) {
						return workflow.Step(ctx, "s", counted(&counter{}, "x", "x"))
					},
					"y": func(ctx context.Context) (string, error) { return "", leasehold.Fail(errors.New("y is broken")) },
					"z": func(ctx context.Context) (string, error) {
						if err := workflow.Sleep(ctx, time.Minute); err != nil {
							return "", err
						}
						return "z", nil
					},
				})
				if err != nil {
					return "", err
				}
				x, _ := fs["x"].Get(ctx)
				z, _ := fs["z"].Get(ctx)
				return x + z, nil
			})
			env := leaseholdtest.New(t, hs)
			id := mustEnqueue(t, env, leasehold.Submission{Kind: "par", MaxAttempts: 1})
			mustRun(t, env)
			got := mustTask(t, env, id)
			if tolerated == 1 {
				if got.Status != leasehold.StatusSucceeded || string(got.Result) != `"xz"` {
					t.Fatalf("task: %s %s (%s), want SUCCEEDED xz", got.Status, got.Result, got.Error)
				}
				if names := got.StepNames(); !slices.Contains(names, "@three/@x/s") || !slices.Contains(names, "parallel:three") {
					t.Errorf("steps %v", names)
				}
				return
			}
			if got.Status != leasehold.StatusFailed || !strings.Contains(got.Error, "y is broken") && !strings.Contains(got.Error, "[y]") {
				t.Fatalf("task: %s (%s), want FAILED naming y", got.Status, got.Error)
			}
		})
	}
}

// A step name that reads as a branch's operation is refused: the
// handler's own replay would skip it.
func TestSpacedStepNameRefused(t *testing.T) {
	t.Parallel()
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "named", func(ctx context.Context, _ *leasehold.Task[int]) (int, error) {
		return workflow.Step(ctx, "@a/b", func(context.Context) (int, error) { return 1, nil })
	})
	env := leaseholdtest.New(t, hs)
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "named"})
	mustRun(t, env)
	if got := mustTask(t, env, id); got.Status != leasehold.StatusFailed || !strings.Contains(got.Error, "rename the step") {
		t.Fatalf("task: %s (%s), want FAILED asking to rename the step", got.Status, got.Error)
	}
}
