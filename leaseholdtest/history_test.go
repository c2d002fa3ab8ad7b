package leaseholdtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/workflow"
)

// TestEnvHistoryOf25000Operations (issue 36, point 1): a workflow records
// 25,000 operations, past the 100 its task's item keeps, and a sleep in
// the middle makes the second run replay the first 12,500 from the
// spilled tail: every step runs once, and the replayed results are the
// recorded ones.
func TestEnvHistoryOf25000Operations(t *testing.T) {
	t.Parallel()
	const ops, half = 25_000, 12_500
	var runs, handlerRuns atomic.Int64
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "long", func(ctx context.Context, task *leasehold.Task[string]) (int, error) {
		handlerRuns.Add(1)
		sum := 0
		for i := range ops - 1 { // and one sleep
			if i == half {
				if err := workflow.Sleep(ctx, time.Hour); err != nil {
					return 0, err
				}
			}
			n, err := workflow.Step(ctx, fmt.Sprint("s", i), func(context.Context) (int, error) {
				runs.Add(1)
				return i, nil
			})
			if err != nil {
				return 0, err
			}
			sum += n
		}
		return sum, nil
	})
	env := leaseholdtest.New(t, hs)
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "long", Payload: "x", ID: "long-1"})
	mustRun(t, env)
	got := mustTask(t, env, id)
	want := (ops - 1) * (ops - 2) / 2
	if got.Status != leasehold.StatusSucceeded || string(got.Result) != fmt.Sprint(want) {
		t.Fatalf("task %s %s (error %q), want SUCCEEDED %d", got.Status, got.Result, got.Error, want)
	}
	if runs.Load() != ops-1 || handlerRuns.Load() != 2 {
		t.Fatalf("%d step functions ran in %d runs of the handler, want %d in 2: a replayed step runs again", runs.Load(), handlerRuns.Load(), ops-1)
	}
	if len(got.Steps) != ops || got.Steps[half].Name != "sleep#1" || got.Steps[ops-1].Name != fmt.Sprint("s", ops-2) {
		t.Fatalf("%d operations recorded, want %d with the sleep at %d", len(got.Steps), ops, half)
	}
}

// TestEnvFiftyMegabytesOfResults (issue 36, point 1): 800 steps of 64 KiB
// each, 52 MB of results, recorded and then replayed whole by the retry
// of a handler that fails after them once.
func TestEnvFiftyMegabytesOfResults(t *testing.T) {
	// Not parallel: the process peaks at about 220 MB (650 MB under -race).
	const steps = 800
	big := strings.Repeat("r", 64<<10-2) // a JSON string of 64 KiB
	var runs, handlerRuns atomic.Int64
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "big", func(ctx context.Context, task *leasehold.Task[string]) (int, error) {
		first := handlerRuns.Add(1) == 1
		total := 0
		for i := range steps {
			s, err := workflow.Step(ctx, fmt.Sprint("s", i), func(context.Context) (string, error) {
				runs.Add(1)
				return big, nil
			})
			if err != nil {
				return 0, err
			}
			if s != big {
				return 0, fmt.Errorf("step %d replayed %d bytes, want %d", i, len(s), len(big))
			}
			total += len(s) + 2
		}
		if first {
			return 0, errors.New("fail once, after every step: the retry replays them")
		}
		return total, nil
	})
	env := leaseholdtest.New(t, hs)
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "big", Payload: "x", ID: "big-1", MaxAttempts: 3})
	mustRun(t, env)
	got := mustTask(t, env, id)
	if got.Status != leasehold.StatusSucceeded || string(got.Result) != fmt.Sprint(steps*(64<<10)) {
		t.Fatalf("task %s %s (error %q), want SUCCEEDED %d", got.Status, got.Result, got.Error, steps*(64<<10))
	}
	if runs.Load() != steps || handlerRuns.Load() != 2 {
		t.Fatalf("%d step functions ran in %d runs, want %d in 2", runs.Load(), handlerRuns.Load(), steps)
	}
	if len(got.Steps) != steps {
		t.Fatalf("%d steps recorded, want %d", len(got.Steps), steps)
	}
}

// TestEnvChildrenPastTheItem: the children of a map recorded past the
// task's item (after 100 steps) are listed as those of one recorded in it.
func TestEnvChildrenPastTheItem(t *testing.T) {
	t.Parallel()
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "echo", func(_ context.Context, task *leasehold.Task[int]) (int, error) { return task.Payload, nil })
	leasehold.Handle(hs, "late", func(ctx context.Context, task *leasehold.Task[string]) (int, error) {
		for i := range 120 {
			if _, err := workflow.Step(ctx, fmt.Sprint("s", i), func(context.Context) (int, error) { return i, nil }); err != nil {
				return 0, err
			}
		}
		res, err := workflow.Map(ctx, "kids", 2, func(i int) workflow.Child { return workflow.Child{Kind: "echo", Payload: i} }, workflow.MapOptions{MaxConcurrency: 1})
		if err != nil {
			return 0, err
		}
		// A later await: the task's wait is no longer the map's.
		outs, err := workflow.All(ctx, "then", workflow.Child{Kind: "echo", Payload: 3})
		if err != nil {
			return 0, err
		}
		return res.Succeeded + len(outs) - 1, nil
	})
	env := leaseholdtest.New(t, hs)
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "late", Payload: "x", ID: "late-1"})
	mustRun(t, env)
	if got := mustTask(t, env, id); got.Status != leasehold.StatusSucceeded || string(got.Result) != "2" || len(got.Steps) != 121 {
		t.Fatalf("task %s %s (%q), %d operations; want SUCCEEDED 2 after 121 (120 steps, the map)", got.Status, got.Result, got.Error, len(got.Steps))
	}
	// The history file (leasehold replay --out) holds the whole history.
	raw, err := env.History(id)
	var file struct {
		Steps []struct{ Name string } `json:"steps"`
	}
	if err != nil || json.Unmarshal(raw, &file) != nil || len(file.Steps) != 121 || file.Steps[120].Name != "map:kids" {
		t.Fatalf("history file of %d operations (%v), want 121 ending with the map", len(file.Steps), err)
	}
	ids, err := env.Client().ChildIDs(t.Context(), id)
	if err != nil || !slices.Equal(ids, []string{"late-1/kids/0", "late-1/kids/1", "late-1/then/0"}) {
		t.Fatalf("children %v, %v; want late-1/kids/0, /1 and late-1/then/0", ids, err)
	}
}
