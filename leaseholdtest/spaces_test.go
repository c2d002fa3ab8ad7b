package leaseholdtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/workflow"
)

// killOnce returns an error that ends the attempt (a transient failure,
// as a killed process's lost attempt is retried) the first time it is
// called, and nil after.
func killOnce() func() error {
	var mu sync.Mutex
	killed := false
	return func() error {
		mu.Lock()
		defer mu.Unlock()
		if killed {
			return nil
		}
		killed = true
		return errors.New("the worker dies here")
	}
}

// Steps with a policy inside a child context and inside branches (issue
// 37, point 2): in the child context, an at-most-once try whose process
// dies (a panic) counts as failed and the next try runs an hour later,
// durably; in branch "a" a failed try is retried an hour later; branch
// "b", with a step of the same name, succeeds at once. Each space keeps
// its own tries; an attempt killed after them replays them, running
// nothing again, and so does a replay of the history.
func TestStepPolicyInsideSpaces(t *testing.T) {
	t.Parallel()
	var c counter
	kill := killOnce()
	policy := workflow.StepPolicy{MaxAttempts: 3, Initial: time.Hour, AtMostOnce: true}
	flaky := func(space string, fail func(try int) error) func(context.Context) (int, error) {
		return func(context.Context) (int, error) {
			c.add(space)
			if err := fail(c.get(space)); err != nil {
				return 0, err
			}
			return 10 * c.get(space), nil
		}
	}
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "policed", func(ctx context.Context, _ *leasehold.Task[int]) (int, error) {
		inner, err := workflow.RunInChildContext(ctx, "inner", func(ctx context.Context) (int, error) {
			return workflow.Step(ctx, "flaky", flaky("inner", func(try int) error {
				if try == 1 {
					panic("the worker dies mid-try")
				}
				return nil
			}), policy)
		})
		if err != nil {
			return 0, err
		}
		a := workflow.Go(ctx, "a", func(ctx context.Context) (int, error) {
			return workflow.Step(ctx, "flaky", flaky("a", func(try int) error {
				if try == 1 {
					return errFlaky
				}
				return nil
			}), policy)
		})
		b := workflow.Go(ctx, "b", func(ctx context.Context) (int, error) {
			return workflow.Step(ctx, "flaky", flaky("b", func(int) error { return nil }), policy)
		})
		if err := workflow.AwaitAll(ctx, "both", a, b); err != nil {
			return 0, err
		}
		if err := kill(); err != nil {
			return 0, err
		}
		av, _ := a.Get(ctx)
		bv, _ := b.Get(ctx)
		return inner + av + bv, nil
	})
	env := leaseholdtest.New(t, hs)
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "policed", MaxAttempts: 3})
	mustRun(t, env)
	got := mustTask(t, env, id)
	// inner: try 2 (20); a: try 2 (20); b: try 1 (10).
	if got.Status != leasehold.StatusSucceeded || string(got.Result) != "50" {
		t.Fatalf("task: %s %s attempt %d (%s), want SUCCEEDED 50", got.Status, got.Result, got.Attempt, got.Error)
	}
	if want := map[string]int{"inner": 2, "a": 2, "b": 1}; !equalCounts(c.all(), want) {
		t.Errorf("tries %v, want %v (the cut-off try not run again, nothing run again after the kill)", c.all(), want)
	}
	names := got.StepNames()
	for _, want := range []string{"@inner/flaky#try1", "@inner/flaky#retry1", "@inner/flaky#try2", "@inner/flaky", "context:inner", "@a/flaky#try1", "@a/flaky#retry1", "@a/flaky#try2", "@a/flaky", "@b/flaky#try1", "@b/flaky", "all:both"} {
		if !slices.Contains(names, want) {
			t.Errorf("history %v lacks %s", names, want)
		}
	}
	if line, err := hs.Replay(t.Context(), mustHistory(t, env, id)); err != nil || !strings.HasPrefix(line, "ok ") {
		t.Fatalf("replay: %q, %v", line, err)
	}
	if want := map[string]int{"inner": 2, "a": 2, "b": 1}; !equalCounts(c.all(), want) {
		t.Errorf("after the replay, tries %v, want %v", c.all(), want)
	}
}

// Invoke inside a child context and inside two branches, all under the
// name "calc": three children, with ids of their own spaces, each run
// once; the attempt killed after them replays their outcomes, spawning
// nothing, and so does a replay of the history.
func TestInvokeInsideSpaces(t *testing.T) {
	t.Parallel()
	var c counter
	kill := killOnce()
	calc := func(ctx context.Context, n int) (int, error) {
		return workflow.Invoke[int](ctx, "calc", workflow.Child{Kind: "double", Payload: n, MaxAttempts: 1})
	}
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "double", func(_ context.Context, task *leasehold.Task[int]) (int, error) {
		c.add(fmt.Sprint("double ", task.Payload))
		return 2 * task.Payload, nil
	})
	leasehold.Handle(hs, "parent", func(ctx context.Context, _ *leasehold.Task[int]) (int, error) {
		inner, err := workflow.RunInChildContext(ctx, "inner", func(ctx context.Context) (int, error) { return calc(ctx, 1) })
		if err != nil {
			return 0, err
		}
		a := workflow.Go(ctx, "a", func(ctx context.Context) (int, error) { return calc(ctx, 10) })
		b := workflow.Go(ctx, "b", func(ctx context.Context) (int, error) { return calc(ctx, 100) })
		if _, err := workflow.AllSettled(ctx, "both", a, b); err != nil {
			return 0, err
		}
		if err := kill(); err != nil {
			return 0, err
		}
		av, aerr := a.Get(ctx)
		bv, berr := b.Get(ctx)
		if aerr != nil || berr != nil {
			return 0, errors.Join(aerr, berr)
		}
		return inner + av + bv, nil
	})
	env := leaseholdtest.New(t, hs)
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "parent", MaxAttempts: 3})
	mustRun(t, env)
	got := mustTask(t, env, id)
	if got.Status != leasehold.StatusSucceeded || string(got.Result) != "222" || got.Attempt != 2 {
		t.Fatalf("task: %s %s attempt %d (%s), want SUCCEEDED 222 in attempt 2 (after the kill)", got.Status, got.Result, got.Attempt, got.Error)
	}
	for _, n := range []int{1, 10, 100} {
		if k := c.get(fmt.Sprint("double ", n)); k != 1 {
			t.Errorf("the child of %d ran %d times, want once", n, k)
		}
	}
	for space, n := range map[string]int{"@inner~": 2, "@a~": 20, "@b~": 200} {
		kid := mustTask(t, env, id+"/"+space+"calc/0")
		if kid.Status != leasehold.StatusSucceeded || string(kid.Result) != fmt.Sprint(n) || kid.Parent != id {
			t.Errorf("child of %s: %s %s of %q, want SUCCEEDED %d of the parent", space, kid.Status, kid.Result, kid.Parent, n)
		}
	}
	names := got.StepNames()
	for _, want := range []string{"@inner/children:calc", "context:inner", "@a/children:calc", "@b/children:calc", "allsettled:both"} {
		if !slices.Contains(names, want) {
			t.Errorf("history %v lacks %s", names, want)
		}
	}
	if line, err := hs.Replay(t.Context(), mustHistory(t, env, id)); err != nil || !strings.HasPrefix(line, "ok ") {
		t.Fatalf("replay: %q, %v", line, err)
	}
}

// Receive inside a child context takes the topic's first message, the
// handler's own receive after it the second; SetEvent works in a child
// context and in a branch (each space numbers its own). The attempt
// killed after them replays the receives (no message taken twice) and
// the events (not written again). Receive inside a branch stays refused,
// naming the branch.
func TestReceiveAndSetEventInsideSpaces(t *testing.T) {
	t.Parallel()
	kill := killOnce()
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "listener", func(ctx context.Context, _ *leasehold.Task[int]) (string, error) {
		first, err := workflow.RunInChildContext(ctx, "inner", func(ctx context.Context) (int, error) {
			o, ok, err := workflow.Receive[note](ctx, "orders", time.Hour)
			if err != nil || !ok {
				return 0, err
			}
			return o.N, workflow.SetEvent(ctx, "first", o.N)
		})
		if err != nil {
			return "", err
		}
		second, ok, err := workflow.Receive[note](ctx, "orders", time.Hour)
		if err != nil || !ok {
			return "", err
		}
		pub := workflow.Go(ctx, "pub", func(ctx context.Context) (int, error) {
			return 1, workflow.SetEvent(ctx, "second", second.N)
		})
		if _, err := pub.Get(ctx); err != nil {
			return "", err
		}
		if err := kill(); err != nil {
			return "", err
		}
		return fmt.Sprintf("%d then %d", first, second.N), nil
	})
	leasehold.Handle(hs, "ear", func(ctx context.Context, _ *leasehold.Task[int]) (string, error) {
		f := workflow.Go(ctx, "ear", func(ctx context.Context) (string, error) {
			v, _, err := workflow.Receive[string](ctx, "news", 0)
			return v, err
		})
		return f.Get(ctx)
	})
	env := leaseholdtest.New(t, hs)
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "listener", MaxAttempts: 3})
	ear := mustEnqueue(t, env, leasehold.Submission{Kind: "ear"})
	mustRun(t, env)
	for i, n := range []int{7, 8} {
		if _, err := env.Send(id, "orders", fmt.Sprint("m", i), note{N: n}); err != nil {
			t.Fatal(err)
		}
	}
	mustRun(t, env)
	got := mustTask(t, env, id)
	if got.Status != leasehold.StatusSucceeded || string(got.Result) != `"7 then 8"` || got.Attempt != 2 {
		t.Fatalf("listener: %s %s attempt %d (%s), want SUCCEEDED 7 then 8 in attempt 2 (after the kill)", got.Status, got.Result, got.Attempt, got.Error)
	}
	for key, want := range map[string]string{"first": "7", "second": "8"} {
		if v, err := env.GetEvent(id, key); err != nil || string(v) != want {
			t.Errorf("event %s = %s, %v; want %s", key, v, err, want)
		}
	}
	want := []string{"@inner/recv:orders#1#start", "@inner/recv:orders#1", "@inner/event:first#1", "context:inner", "recv:orders#1#start", "recv:orders#1", "@pub/event:second#1", "@pub/result"}
	if names := got.StepNames(); !slices.Equal(names, want) {
		t.Errorf("steps %v, want %v", names, want)
	}
	if line, err := hs.Replay(t.Context(), mustHistory(t, env, id)); err != nil || !strings.HasPrefix(line, "ok ") {
		t.Fatalf("replay: %q, %v", line, err)
	}
	if got := mustTask(t, env, ear); got.Status != leasehold.StatusFailed || !strings.Contains(got.Error, `workflow.Receive inside the branch "@ear"`) {
		t.Errorf("ear: %s (%s), want FAILED saying Receive is not supported in a branch", got.Status, got.Error)
	}
}

// workflow.Version inside a child context and a branch: a task in flight
// whose spaces were recorded by the code before the change goes on along
// its old path under the new code (version 0, nothing recorded); a new
// task records the version in each space and takes the new path.
func TestVersionInsideSpaces(t *testing.T) {
	hs := leasehold.NewHandlers()
	d, c := &deploy{}, &counter{}
	sub := func(space string) func(context.Context) (string, error) {
		return func(ctx context.Context) (string, error) {
			step := func(name string) error {
				_, err := workflow.Step(ctx, name, func(context.Context) (string, error) { c.add(space + " " + name); return name, nil })
				return err
			}
			last := "old"
			if d.v.Load() == 2 {
				// The new code checks first.
				v, err := workflow.Version(ctx, "check-first", 1)
				if err != nil {
					return "", err
				}
				if v >= 1 {
					if err := step("check"); err != nil {
						return "", err
					}
					last = "new"
				}
			}
			if err := step("fetch"); err != nil {
				return "", err
			}
			if err := workflow.Sleep(ctx, time.Hour); err != nil {
				return "", err
			}
			return last, step(last)
		}
	}
	leasehold.Handle(hs, "flow", func(ctx context.Context, _ *leasehold.Task[struct{}]) (string, error) {
		b := workflow.Go(ctx, "b", sub("b"))
		inner, err := workflow.RunInChildContext(ctx, "inner", sub("inner"))
		if err != nil {
			return "", err
		}
		vb, err := b.Get(ctx)
		return inner + " " + vb, err
	})
	env := leaseholdtest.New(t, hs)
	_, got := inFlight(t, env, d, "flow")
	if got.Status != leasehold.StatusSucceeded || string(got.Result) != `"old old"` {
		t.Fatalf("the task in flight under the new code: %s %s %q, want SUCCEEDED along the old path", got.Status, got.Result, got.Error)
	}
	for _, name := range got.StepNames() {
		if strings.Contains(name, "version:") {
			t.Errorf("the task in flight recorded %s; want no version", name)
		}
	}
	fresh := mustEnqueue(t, env, leasehold.Submission{Kind: "flow"})
	mustRun(t, env)
	got = mustTask(t, env, fresh)
	if got.Status != leasehold.StatusSucceeded || string(got.Result) != `"new new"` {
		t.Fatalf("a new task: %s %s %q, want SUCCEEDED along the new path", got.Status, got.Result, got.Error)
	}
	names := got.StepNames()
	for _, want := range []string{"@inner/version:check-first", "@b/version:check-first", "@inner/check", "@b/check", "@inner/new", "@b/new"} {
		if !slices.Contains(names, want) {
			t.Errorf("steps %v lack %s", names, want)
		}
	}
	if line, err := hs.Replay(t.Context(), mustHistory(t, env, fresh)); err != nil || !strings.HasPrefix(line, "ok ") {
		t.Fatalf("replay: %q, %v", line, err)
	}
	if c.get("inner old") != 1 || c.get("b old") != 1 || c.get("inner new") != 1 || c.get("b new") != 1 {
		t.Errorf("side effects %v: want old once and new once in each space", c.all())
	}
}

// workflow.All inside a child context and inside two branches (issue 37,
// point 2): each space's children get ids under its path, so the same
// await name in three spaces spawns three sets; the branches' waits are
// taken in turn; the attempt killed after them replays every await (no
// child spawned or run twice), and a replay of the history runs nothing.
func TestAllInsideSpaces(t *testing.T) {
	t.Parallel()
	var c counter
	kill := killOnce()
	fan := func(ctx context.Context, n int) (int, error) {
		outs, err := workflow.All(ctx, "fan",
			workflow.Child{Kind: "double", Payload: n, MaxAttempts: 1},
			workflow.Child{Kind: "double", Payload: n + 1, MaxAttempts: 1})
		if err != nil {
			return 0, err
		}
		sum := 0
		for _, o := range outs {
			var v int
			if err := json.Unmarshal(o.Result, &v); err != nil || o.Status != leasehold.StatusSucceeded {
				return 0, fmt.Errorf("child %s: %s %s: %v", o.ID, o.Status, o.Error, err)
			}
			sum += v
		}
		return sum, nil
	}
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "double", func(_ context.Context, task *leasehold.Task[int]) (int, error) {
		c.add(fmt.Sprint("double ", task.Payload))
		return 2 * task.Payload, nil
	})
	leasehold.Handle(hs, "parent", func(ctx context.Context, _ *leasehold.Task[int]) (int, error) {
		inner, err := workflow.RunInChildContext(ctx, "inner", func(ctx context.Context) (int, error) { return fan(ctx, 1) })
		if err != nil {
			return 0, err
		}
		a := workflow.Go(ctx, "a", func(ctx context.Context) (int, error) { return fan(ctx, 10) })
		b := workflow.Go(ctx, "b", func(ctx context.Context) (int, error) { return fan(ctx, 100) })
		if err := workflow.AwaitAll(ctx, "both", a, b); err != nil {
			return 0, err
		}
		if err := kill(); err != nil {
			return 0, err
		}
		av, _ := a.Get(ctx)
		bv, _ := b.Get(ctx)
		return inner + av + bv, nil
	})
	env := leaseholdtest.New(t, hs)
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "parent", MaxAttempts: 3})
	mustRun(t, env)
	got := mustTask(t, env, id)
	// (2+4) + (20+22) + (200+202)
	if got.Status != leasehold.StatusSucceeded || string(got.Result) != "450" || got.Attempt != 2 {
		t.Fatalf("task: %s %s attempt %d (%s), want SUCCEEDED 450 in attempt 2 (after the kill)", got.Status, got.Result, got.Attempt, got.Error)
	}
	for _, n := range []int{1, 2, 10, 11, 100, 101} {
		if k := c.get(fmt.Sprint("double ", n)); k != 1 {
			t.Errorf("the child of %d ran %d times, want once", n, k)
		}
	}
	for space, n := range map[string]int{"@inner~": 1, "@a~": 10, "@b~": 100} {
		for i := range 2 {
			kid := mustTask(t, env, id+"/"+space+"fan/"+fmt.Sprint(i))
			if kid.Status != leasehold.StatusSucceeded || string(kid.Result) != fmt.Sprint(2*(n+i)) || kid.Parent != id {
				t.Errorf("child %d of %s: %s %s of %q, want SUCCEEDED %d of the parent", i, space, kid.Status, kid.Result, kid.Parent, 2*(n+i))
			}
		}
	}
	names := got.StepNames()
	for _, want := range []string{"@inner/children:fan", "context:inner", "@a/children:fan", "@b/children:fan", "all:both"} {
		if !slices.Contains(names, want) {
			t.Errorf("history %v lacks %s", names, want)
		}
	}
	ran := c.all()
	if line, err := hs.Replay(t.Context(), mustHistory(t, env, id)); err != nil || !strings.HasPrefix(line, "ok ") {
		t.Fatalf("replay: %q, %v", line, err)
	}
	if !maps.Equal(ran, c.all()) {
		t.Errorf("the replay ran children or steps: %v, then %v", ran, c.all())
	}
}
