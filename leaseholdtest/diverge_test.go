package leaseholdtest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/workflow"
)

// deploy is a handler's code version, switched while its tasks are in
// flight, as a deploy would.
type deploy struct{ v atomic.Int32 }

// inFlight runs a task of kind under code 1 until it waits, switches to
// code 2 and runs again, and returns the task as code 2 left it.
func inFlight(t *testing.T, env *leaseholdtest.Env, d *deploy, kind string) (string, leaseholdtest.TaskState) {
	t.Helper()
	d.v.Store(1)
	id := mustEnqueue(t, env, leasehold.Submission{Kind: kind})
	env.SetMaxDeliveries(1) // the first run, which sleeps
	if err := env.Run(); !errors.Is(err, leaseholdtest.ErrTooManyDeliveries) {
		t.Fatalf("Run of one delivery: %v", err)
	}
	if got := mustTask(t, env, id); got.Status != leasehold.StatusPending || len(got.Steps) == 0 {
		t.Fatalf("task %s %s with steps %v under code 1: want it sleeping", id, got.Status, got.StepNames())
	}
	d.v.Store(2)
	env.SetMaxDeliveries(10000)
	mustRun(t, env)
	return id, mustTask(t, env, id)
}

// TestDivergenceHoldsTheTask (issue 35, point 1): a change of code under a
// workflow in flight that its history contradicts stops the run at the
// first durable call that differs, before that call's side effect; the
// task is held PENDING (not failed, no attempt used) with the divergence
// as its error; deploying the old code back lets it finish, no recorded
// step running twice.
func TestDivergenceHoldsTheTask(t *testing.T) {
	for _, ch := range divergingChanges() {
		t.Run(ch.name, func(t *testing.T) {
			hs, d, c := ch.handlers()
			env := leaseholdtest.New(t, hs)
			if ch.name == "the awaited callback renamed" {
				d.v.Store(1)
				id := mustEnqueue(t, env, leasehold.Submission{Kind: "flow"})
				mustRun(t, env)
				tok, err := env.CallbackToken(id)
				if err != nil {
					t.Fatal(err)
				}
				if err := env.CompleteCallback(tok, "yes"); err != nil {
					t.Fatal(err)
				}
				d.v.Store(2)
				mustRun(t, env)
				checkHeld(t, env, id, ch.want, c, map[string]int{"summarize": 1, "asked": 1, "send": 0})
				d.v.Store(1)
				mustRun(t, env)
				checkDone(t, env, id, c, map[string]int{"summarize": 1, "asked": 1, "send": 1})
				return
			}
			if ch.name == "a map reshaped between its waves" {
				// Stop the map after its first wave: one Run delivers the
				// parent and its first ten children, then stops.
				d.v.Store(1)
				env.SetMaxDeliveries(12)
				id := mustEnqueue(t, env, leasehold.Submission{Kind: "flow"})
				if err := env.Run(); err == nil {
					t.Fatal("Run under the bound finished the map")
				}
				env.SetMaxDeliveries(10000)
				d.v.Store(2)
				mustRun(t, env)
				checkHeld(t, env, id, ch.want, c, map[string]int{"send": 0})
				d.v.Store(1)
				mustRun(t, env)
				got := checkDone(t, env, id, c, map[string]int{"send": 1})
				if string(got.Result) != `"50"` {
					t.Errorf("map result %s, want all 50 children counted once", got.Result)
				}
				return
			}
			id, _ := inFlight(t, env, d, "flow")
			checkHeld(t, env, id, ch.want, c, nil)
			before := map[string]int{"summarize": c.get("summarize"), "count": c.get("count")}
			d.v.Store(1) // the old code back
			mustRun(t, env)
			checkDone(t, env, id, c, map[string]int{"summarize": before["summarize"], "count": before["count"], "send": 1, "validate": 0, "summarise": 0})
		})
	}
}

// codeChange is a change of a workflow's code under tasks in flight that
// their histories contradict.
type codeChange struct {
	name string
	// code runs the workflow under code version v.
	code func(ctx context.Context, v int32, c *counter) (string, error)
	want string // in the held task's error
}

// handlers registers ch's workflow as the kind "flow", under the code
// version d selects, counting its side effects in c, and a kind "slow"
// for its map's children.
func (ch codeChange) handlers() (*leasehold.Handlers, *deploy, *counter) {
	hs := leasehold.NewHandlers()
	d, c := &deploy{}, &counter{}
	leasehold.Handle(hs, "flow", func(ctx context.Context, _ *leasehold.Task[struct{}]) (string, error) {
		return ch.code(ctx, d.v.Load(), c)
	})
	leasehold.Handle(hs, "slow", func(context.Context, *leasehold.Task[struct{}]) (int, error) { return 1, nil })
	return hs, d, c
}

// divergingChanges are the changes of TestDivergenceHoldsTheTask (and of
// the replay check's tests): each one is what issue 35 saw run silently.
func divergingChanges() []codeChange {
	type change = codeChange
	step := func(ctx context.Context, c *counter, name string) error {
		_, err := workflow.Step(ctx, name, func(context.Context) (string, error) { c.add(name); return name, nil })
		return err
	}
	changes := []change{
		{"a step inserted before recorded ones", func(ctx context.Context, v int32, c *counter) (string, error) {
			if v == 2 {
				if err := step(ctx, c, "validate"); err != nil {
					return "", err
				}
			}
			if err := step(ctx, c, "summarize"); err != nil {
				return "", err
			}
			if err := workflow.Sleep(ctx, time.Hour); err != nil {
				return "", err
			}
			return "done", step(ctx, c, "send")
		}, `at operation 1: recorded step string "summarize", the code asked for step string "validate"`},
		{"a recorded step renamed", func(ctx context.Context, v int32, c *counter) (string, error) {
			name := map[int32]string{1: "summarize", 2: "summarise"}[v]
			if err := step(ctx, c, name); err != nil {
				return "", err
			}
			if err := workflow.Sleep(ctx, time.Hour); err != nil {
				return "", err
			}
			return "done", step(ctx, c, "send")
		}, `recorded step string "summarize", the code asked for step string "summarise"`},
		{"a sleep inserted before the recorded one", func(ctx context.Context, v int32, c *counter) (string, error) {
			if v == 2 {
				if err := workflow.Sleep(ctx, 5*time.Minute); err != nil {
					return "", err
				}
			}
			if err := step(ctx, c, "summarize"); err != nil {
				return "", err
			}
			if err := workflow.Sleep(ctx, time.Hour); err != nil {
				return "", err
			}
			return "done", step(ctx, c, "send")
		}, `at operation 1: recorded step string "summarize", the code asked for "sleep#1" (sleep)`},
		{"the awaited callback renamed", func(ctx context.Context, v int32, c *counter) (string, error) {
			name := map[int32]string{1: "approval", 2: "approve"}[v]
			if err := step(ctx, c, "summarize"); err != nil {
				return "", err
			}
			if _, err := workflow.WaitForCallback[string](ctx, name, 3*time.Hour, func(context.Context, string) error { c.add("asked"); return nil }); err != nil {
				return "", err
			}
			return "done", step(ctx, c, "send")
		}, `recorded "callback:approval", the code asked for "callback:approve" (callback)`},
		{"a step's result type changed", func(ctx context.Context, v int32, c *counter) (string, error) {
			var err error
			if v == 1 {
				_, err = workflow.Step(ctx, "count", func(context.Context) (int, error) { c.add("count"); return 3, nil })
			} else {
				_, err = workflow.Step(ctx, "count", func(context.Context) (struct{ N int }, error) { c.add("count"); return struct{ N int }{3}, nil })
			}
			if err != nil {
				return "", err
			}
			if err := workflow.Sleep(ctx, time.Hour); err != nil {
				return "", err
			}
			return "done", step(ctx, c, "send")
		}, `recorded step int "count", the code asked for step struct { N int } "count"`},
		{"a map reshaped between its waves", func(ctx context.Context, v int32, c *counter) (string, error) {
			n, conc := 50, 10
			if v == 2 {
				n, conc = 40, 20
			}
			res, err := workflow.Map(ctx, "items", n, func(int) workflow.Child { return workflow.Child{Kind: "slow"} }, workflow.MapOptions{MaxConcurrency: conc})
			if err != nil {
				return "", err
			}
			return fmt.Sprint(res.Succeeded), step(ctx, c, "send")
		}, `recorded "map:items" (map 50/10), with 50 children counted, the code asked for "map:items" (map 40/20)`},
	}
	changes = append(changes, change{"the recorded steps left out", func(ctx context.Context, v int32, c *counter) (string, error) {
		if v == 2 {
			return "early", nil
		}
		if err := step(ctx, c, "summarize"); err != nil {
			return "", err
		}
		if err := workflow.Sleep(ctx, time.Hour); err != nil {
			return "", err
		}
		return "done", step(ctx, c, "send")
	}, `at operation 1: recorded step string "summarize", the code asked for none: the handler returned`})
	return changes
}

// checkHeld fails t unless the task id is held PENDING for a divergence
// whose message has want, on its first attempt, with the counts of c.
func checkHeld(t *testing.T, env *leaseholdtest.Env, id, want string, c *counter, counts map[string]int) {
	t.Helper()
	got := mustTask(t, env, id)
	if got.Status != leasehold.StatusPending || !strings.HasPrefix(got.Error, "held: diverged from its history") || !strings.Contains(got.Error, want) {
		t.Fatalf("after the change: %s %q, want PENDING held with %q", got.Status, got.Error, want)
	}
	for name, n := range counts {
		if c.get(name) != n {
			t.Errorf("%s ran %d times by the hold, want %d", name, c.get(name), n)
		}
	}
}

// checkDone fails t unless the task id SUCCEEDED with the counts of c.
func checkDone(t *testing.T, env *leaseholdtest.Env, id string, c *counter, counts map[string]int) leaseholdtest.TaskState {
	t.Helper()
	got := mustTask(t, env, id)
	if got.Status != leasehold.StatusSucceeded {
		t.Fatalf("after the old code came back: %s %q, want SUCCEEDED", got.Status, got.Error)
	}
	for name, n := range counts {
		if c.get(name) != n {
			t.Errorf("%s ran %d times in all, want %d", name, c.get(name), n)
		}
	}
	return got
}

// TestVersionGuardsAChange (issue 35, point 2): the changes that diverge
// above, guarded by workflow.Version, let tasks in flight go on under the
// new code along their old path, while new tasks take the new one.
func TestVersionGuardsAChange(t *testing.T) {
	hs := leasehold.NewHandlers()
	d, c := &deploy{}, &counter{}
	leasehold.Handle(hs, "flow", func(ctx context.Context, _ *leasehold.Task[struct{}]) (string, error) {
		step := func(name string) error {
			_, err := workflow.Step(ctx, name, func(context.Context) (string, error) { c.add(name); return name, nil })
			return err
		}
		summary := "summarize"
		if d.v.Load() == 2 {
			// The new code validates first, and spells the summary's step
			// the other way.
			v, err := workflow.Version(ctx, "validate-first", 1)
			if err != nil {
				return "", err
			}
			if v >= 1 {
				if err := step("validate"); err != nil {
					return "", err
				}
				summary = "summarise"
			}
		}
		if err := step(summary); err != nil {
			return "", err
		}
		if err := workflow.Sleep(ctx, time.Hour); err != nil {
			return "", err
		}
		return summary, step("send")
	})
	env := leaseholdtest.New(t, hs)
	_, got := inFlight(t, env, d, "flow")
	if got.Status != leasehold.StatusSucceeded || string(got.Result) != `"summarize"` {
		t.Fatalf("the task in flight under the new code: %s %s %q, want SUCCEEDED along the old path", got.Status, got.Result, got.Error)
	}
	if names := got.StepNames(); strings.Join(names, ",") != "summarize,sleep#1,send" {
		t.Errorf("its steps %v: want the old path's, no version recorded", names)
	}
	fresh := mustEnqueue(t, env, leasehold.Submission{Kind: "flow"})
	mustRun(t, env)
	got = mustTask(t, env, fresh)
	if got.Status != leasehold.StatusSucceeded || string(got.Result) != `"summarise"` {
		t.Fatalf("a new task: %s %s %q, want SUCCEEDED along the new path", got.Status, got.Result, got.Error)
	}
	if names := got.StepNames(); strings.Join(names, ",") != "version:validate-first,validate,summarise,sleep#1,send" {
		t.Errorf("its steps %v", names)
	}
	if c.get("summarize") != 1 || c.get("validate") != 1 || c.get("summarise") != 1 || c.get("send") != 2 {
		t.Errorf("side effects: summarize %d, validate %d, summarise %d, send %d; want 1, 1, 1, 2", c.get("summarize"), c.get("validate"), c.get("summarise"), c.get("send"))
	}
}

// TestHeldTaskBacksOff: each check of a held task that still diverges
// waits twice as long as the one before (1 minute, 2, 4, ... an hour), its
// error counting the checks.
func TestHeldTaskBacksOff(t *testing.T) {
	hs := leasehold.NewHandlers()
	d := &deploy{}
	leasehold.Handle(hs, "flow", func(ctx context.Context, _ *leasehold.Task[struct{}]) (string, error) {
		name := map[int32]string{1: "summarize", 2: "summarise"}[d.v.Load()]
		if _, err := workflow.Step(ctx, name, func(context.Context) (int, error) { return 1, nil }); err != nil {
			return "", err
		}
		return "done", workflow.Sleep(ctx, time.Hour)
	})
	env := leaseholdtest.New(t, hs)
	id, _ := inFlight(t, env, d, "flow")
	for check, wait := range []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute} {
		if check > 0 {
			mustRun(t, env) // checks it again: still the other code
		}
		got := mustTask(t, env, id)
		if want := fmt.Sprintf("; check %d of the hold, the next at ", check+1); !strings.Contains(got.Error, want) || got.RunAt.Sub(env.Clock().Now()) != wait {
			t.Fatalf("check %d: error %q, next run in %s; want %q and %s", check+1, got.Error, got.RunAt.Sub(env.Clock().Now()), want, wait)
		}
	}
}

// TestVersionPatterns (issue 35, point 2): the common changes of
// docs/versioning.md, each guarded by workflow.Version and deployed under
// a task in flight: the task finishes along its old path with no
// divergence and every recorded step once; a new task takes the new path.
func TestVersionPatterns(t *testing.T) {
	type pattern struct {
		name string
		// code is the workflow under code version v; it runs step for
		// each side effect.
		code    func(ctx context.Context, v int32, step func(name string) error, effect func(name string)) (string, error)
		oldPath string // the result of the task in flight
		newPath string // the result of a new task
	}
	sleep := func(ctx context.Context) error { return workflow.Sleep(ctx, time.Hour) }
	guard := func(ctx context.Context, v int32, change string) (int, error) {
		if v == 1 {
			return 0, nil // the old code has no guard
		}
		return workflow.Version(ctx, change, 1)
	}
	patterns := []pattern{
		{"remove a step", func(ctx context.Context, v int32, step func(string) error, effect func(string)) (string, error) {
			if err := step("a"); err != nil {
				return "", err
			}
			ver, err := guard(ctx, v, "drop-b")
			if err != nil {
				return "", err
			}
			out := "without b"
			if ver == 0 {
				if err := step("b"); err != nil {
					return "", err
				}
				out = "with b"
			}
			if err := sleep(ctx); err != nil {
				return "", err
			}
			return out, step("c")
		}, "with b", "without b"},
		{"change a step's result type", func(ctx context.Context, v int32, step func(string) error, effect func(string)) (string, error) {
			ver, err := guard(ctx, v, "count-struct")
			if err != nil {
				return "", err
			}
			out := ""
			if ver >= 1 {
				r, err := workflow.Step(ctx, "count-v2", func(context.Context) (struct{ N int }, error) { effect("count-v2"); return struct{ N int }{3}, nil })
				if err != nil {
					return "", err
				}
				out = fmt.Sprint("struct ", r.N)
			} else {
				r, err := workflow.Step(ctx, "count", func(context.Context) (int, error) { effect("count"); return 3, nil })
				if err != nil {
					return "", err
				}
				out = fmt.Sprint("int ", r)
			}
			return out, sleep(ctx)
		}, "int 3", "struct 3"},
		{"reshape a map", func(ctx context.Context, v int32, step func(string) error, effect func(string)) (string, error) {
			ver, err := guard(ctx, v, "bigger-waves")
			if err != nil {
				return "", err
			}
			name, n, conc := "items", 30, 10
			if ver >= 1 {
				name, n, conc = "items-v2", 20, 20
			}
			res, err := workflow.Map(ctx, name, n, func(int) workflow.Child { return workflow.Child{Kind: "slow"} }, workflow.MapOptions{MaxConcurrency: conc})
			if err != nil {
				return "", err
			}
			return fmt.Sprint(name, " ", res.Succeeded), step("send")
		}, "items 30", "items-v2 20"},
		{"insert a sleep before another", func(ctx context.Context, v int32, step func(string) error, effect func(string)) (string, error) {
			if err := step("a"); err != nil {
				return "", err
			}
			ver, err := guard(ctx, v, "cool-down")
			if err != nil {
				return "", err
			}
			out := "one sleep"
			if ver >= 1 {
				if err := workflow.Sleep(ctx, 5*time.Minute); err != nil {
					return "", err
				}
				out = "two sleeps"
			}
			if err := sleep(ctx); err != nil {
				return "", err
			}
			return out, step("c")
		}, "one sleep", "two sleeps"},
	}
	for _, p := range patterns {
		t.Run(p.name, func(t *testing.T) {
			hs := leasehold.NewHandlers()
			d, c := &deploy{}, &counter{}
			leasehold.Handle(hs, "flow", func(ctx context.Context, task *leasehold.Task[struct{}]) (string, error) {
				effect := func(name string) { c.add(task.ID + " " + name) }
				step := func(name string) error {
					_, err := workflow.Step(ctx, name, func(context.Context) (string, error) { effect(name); return name, nil })
					return err
				}
				return p.code(ctx, d.v.Load(), step, effect)
			})
			leasehold.Handle(hs, "slow", func(context.Context, *leasehold.Task[struct{}]) (int, error) { return 1, nil })
			env := leaseholdtest.New(t, hs)
			d.v.Store(1)
			old := mustEnqueue(t, env, leasehold.Submission{Kind: "flow", ID: "old"})
			// The first run, in flight at its sleep; a map, after its first
			// wave of ten and the run that counts it.
			env.SetMaxDeliveries(map[bool]int{true: 12, false: 1}[p.name == "reshape a map"])
			if err := env.Run(); !errors.Is(err, leaseholdtest.ErrTooManyDeliveries) {
				t.Fatalf("Run under code 1: %v, want it stopped in flight", err)
			}
			if got := mustTask(t, env, old); got.Status == leasehold.StatusSucceeded {
				t.Fatalf("the task ended under code 1")
			}
			d.v.Store(2)
			env.SetMaxDeliveries(10000)
			mustRun(t, env)
			got := mustTask(t, env, old)
			if got.Status != leasehold.StatusSucceeded || string(got.Result) != fmt.Sprintf("%q", p.oldPath) {
				t.Fatalf("the task in flight: %s %s %q, want SUCCEEDED %q", got.Status, got.Result, got.Error, p.oldPath)
			}
			fresh := mustEnqueue(t, env, leasehold.Submission{Kind: "flow", ID: "new"})
			mustRun(t, env)
			got = mustTask(t, env, fresh)
			if got.Status != leasehold.StatusSucceeded || string(got.Result) != fmt.Sprintf("%q", p.newPath) {
				t.Fatalf("a new task: %s %s %q, want SUCCEEDED %q", got.Status, got.Result, got.Error, p.newPath)
			}
			for name, n := range c.all() {
				if n != 1 {
					t.Errorf("%s ran %d times, want once", name, n)
				}
			}
		})
	}
}
