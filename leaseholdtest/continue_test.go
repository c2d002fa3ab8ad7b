package leaseholdtest_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/workflow"
)

// TestContinueAsNew (issue 36, point 4): a workflow that loops (a step and
// a sleep per iteration) continues as new every 3 iterations: each run's
// history holds only its own steps, the ended runs are archived as tasks
// ID@runN with their steps and input, the task's Run counts them, every
// step ran once, and the last run's result is the loop's.
func TestContinueAsNew(t *testing.T) {
	type loop struct{ From, Until int }
	hs := leasehold.NewHandlers()
	c := &counter{}
	leasehold.Handle(hs, "loop", func(ctx context.Context, task *leasehold.Task[loop]) (int, error) {
		for i := task.Payload.From; i < task.Payload.Until; i++ {
			name := fmt.Sprintf("tick-%d", i)
			if _, err := workflow.Step(ctx, name, func(context.Context) (int, error) { c.add(name); return i, nil }); err != nil {
				return 0, err
			}
			if err := workflow.Sleep(ctx, time.Hour); err != nil {
				return 0, err
			}
			if i%3 == 2 && i+1 < task.Payload.Until {
				return 0, workflow.ContinueAsNew(ctx, loop{From: i + 1, Until: task.Payload.Until})
			}
		}
		return task.Payload.Until, nil
	})
	env := leaseholdtest.New(t, hs)
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "loop", Payload: loop{From: 0, Until: 10}})
	mustRun(t, env)
	got := mustTask(t, env, id)
	if got.Status != leasehold.StatusSucceeded || string(got.Result) != "10" || got.Run != 4 {
		t.Fatalf("the loop: %s %s run %d (%q), want SUCCEEDED 10 in run 4", got.Status, got.Result, got.Run, got.Error)
	}
	if names := strings.Join(got.StepNames(), " "); names != "tick-9 sleep#1" {
		t.Errorf("the last run's history: %s, want only its own iteration", names)
	}
	for run := 1; run <= 3; run++ {
		a := mustTask(t, env, fmt.Sprintf("%s@run%d", id, run))
		want := fmt.Sprintf("tick-%d sleep#1 tick-%d sleep#2 tick-%d sleep#3", 3*run-3, 3*run-2, 3*run-1)
		if a.Status != leasehold.StatusSucceeded || a.Parent != id || strings.Join(a.StepNames(), " ") != want ||
			string(a.Payload) != fmt.Sprintf(`{"From":%d,"Until":10}`, 3*run-3) || a.Run != run ||
			string(a.Result) != fmt.Sprintf(`{"continued_as":%q,"run":%d}`, id, run+1) {
			t.Errorf("run %d archived as %s %s, steps %v, payload %s, result %s; want steps %s", run, a.Status, a.Parent, a.StepNames(), a.Payload, a.Result, want)
		}
	}
	for i := range 10 {
		if n := c.get(fmt.Sprintf("tick-%d", i)); n != 1 {
			t.Errorf("tick-%d ran %d times, want once", i, n)
		}
	}
}

// A continue-as-new with an input that is not JSON fails the task; one
// the handler drops is a dropped wait.
func TestContinueAsNewBadInput(t *testing.T) {
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "bad", func(ctx context.Context, _ *leasehold.Task[struct{}]) (int, error) {
		return 0, workflow.ContinueAsNew(ctx, func() {})
	})
	leasehold.Handle(hs, "dropped", func(ctx context.Context, _ *leasehold.Task[struct{}]) (int, error) {
		_ = workflow.ContinueAsNew(ctx, 1)
		return 1, nil
	})
	env := leaseholdtest.New(t, hs)
	bad := mustEnqueue(t, env, leasehold.Submission{Kind: "bad"})
	dropped := mustEnqueue(t, env, leasehold.Submission{Kind: "dropped"})
	mustRun(t, env)
	if got := mustTask(t, env, bad); got.Status != leasehold.StatusFailed || !strings.Contains(got.Error, "continue as new: the input does not encode") {
		t.Errorf("bad input: %s %q", got.Status, got.Error)
	}
	if got := mustTask(t, env, dropped); got.Status != leasehold.StatusFailed || !strings.Contains(got.Error, "workflow.ContinueAsNew") {
		t.Errorf("dropped: %s %q", got.Status, got.Error)
	}
}

// TestContinueAsNewPastTheItem: runs whose histories spill past the task's
// item (150 operations each) keep their tails apart: each run replays and
// records only its own, and each archived run reads its own whole.
func TestContinueAsNewPastTheItem(t *testing.T) {
	const steps, runs = 150, 3
	hs := leasehold.NewHandlers()
	c := &counter{}
	leasehold.Handle(hs, "long", func(ctx context.Context, task *leasehold.Task[int]) (int, error) {
		for i := range steps {
			name := fmt.Sprintf("r%d-s%d", task.Payload, i)
			if _, err := workflow.Step(ctx, name, func(context.Context) (int, error) { c.add(name); return i, nil }); err != nil {
				return 0, err
			}
			if i == steps/2 {
				if err := workflow.Sleep(ctx, time.Minute); err != nil { // a replay of the head and a part of the tail
					return 0, err
				}
			}
		}
		if task.Payload < runs {
			return 0, workflow.ContinueAsNew(ctx, task.Payload+1)
		}
		return task.Payload, nil
	})
	env := leaseholdtest.New(t, hs)
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "long", Payload: 1})
	mustRun(t, env)
	check := func(id string, run int) {
		t.Helper()
		got := mustTask(t, env, id)
		names := got.StepNames()
		if len(names) != steps+1 || names[0] != fmt.Sprintf("r%d-s0", run) || names[steps] != fmt.Sprintf("r%d-s%d", run, steps-1) {
			t.Errorf("%s: %d operations, first %v, want run %d's %d", id, len(names), names[:min(2, len(names))], run, steps+1)
		}
	}
	if got := mustTask(t, env, id); got.Status != leasehold.StatusSucceeded || got.Run != runs {
		t.Fatalf("%s %s run %d (%q)", got.Status, got.Result, got.Run, got.Error)
	}
	check(id, runs)
	for run := 1; run < runs; run++ {
		check(fmt.Sprintf("%s@run%d", id, run), run)
	}
	for run := 1; run <= runs; run++ {
		for i := range steps {
			if n := c.get(fmt.Sprintf("r%d-s%d", run, i)); n != 1 {
				t.Fatalf("r%d-s%d ran %d times, want once", run, i, n)
			}
		}
	}
}

// A continue-as-new whose next input is over the 128 KiB inline payload
// limit (200 KB) is kept in the payload bucket, as an enqueued payload
// is: the next run reads it whole, the task's item holds a reference, and
// the archived run keeps its own (small) input.
func TestContinueAsNewLargeInput(t *testing.T) {
	type loop struct {
		Run  int
		Blob string
	}
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "grow", func(ctx context.Context, task *leasehold.Task[loop]) (int, error) {
		if task.Payload.Run == 0 {
			return 0, workflow.ContinueAsNew(ctx, loop{Run: 1, Blob: strings.Repeat("x", 200_000)})
		}
		return len(task.Payload.Blob), nil
	})
	env := leaseholdtest.New(t, hs)
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "grow", Payload: loop{}})
	mustRun(t, env)
	got := mustTask(t, env, id)
	if got.Status != leasehold.StatusSucceeded || string(got.Result) != "200000" || got.Run != 2 {
		t.Fatalf("grow: %s %s run %d (%q), want SUCCEEDED 200000 in run 2", got.Status, got.Result, got.Run, got.Error)
	}
	if len(got.Payload) < 200_000 {
		t.Errorf("the task's payload reads back as %d bytes, want the 200 KB input", len(got.Payload))
	}
	stored, _, err := env.StoredPayload(id)
	if err != nil || len(stored) > 1024 || !strings.Contains(string(stored), "leasehold-blob") {
		t.Errorf("the item's payload: %.80q (%d bytes), %v; want a reference", stored, len(stored), err)
	}
	if a := mustTask(t, env, id+"@run1"); string(a.Payload) != `{"Run":0,"Blob":""}` {
		t.Errorf("archived run 1's input: %s", a.Payload)
	}
}
