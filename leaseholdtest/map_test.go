package leaseholdtest_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/workflow"
)

type mapJob struct {
	N         int `json:"n"`
	Conc      int `json:"conc"`
	MinOK     int `json:"min_ok"`
	Tolerated int `json:"tolerated"`
	FailEvery int `json:"fail_every"` // child i fails when FailEvery > 0 and i%FailEvery == 0
}

// mapHandlers: "mapper" maps job.N "item" children and sums their results
// (read back with ReadOutcomes); each "item" checks that every child of
// the waves before its own has ended.
func mapHandlers(t *testing.T, env **leaseholdtest.Env, ran *sync.Map) *leasehold.Handlers {
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "mapper", func(ctx context.Context, task *leasehold.Task[mapJob]) (string, error) {
		job := task.Payload
		res, err := workflow.Map(ctx, "items", job.N, func(i int) workflow.Child {
			return workflow.Child{Kind: "item", Payload: []int{i, job.Conc, job.FailEvery}, MaxAttempts: 1}
		}, workflow.MapOptions{MaxConcurrency: job.Conc, MinSuccessful: job.MinOK, ToleratedFailures: job.Tolerated})
		if err != nil {
			return "", err
		}
		sum := 0
		if job.N <= 300 {
			ids := make([]string, res.Started)
			for i := range ids {
				ids[i] = workflow.ChildIDIn(task.ID, "items", i)
			}
			outs, err := workflow.ReadOutcomes(ctx, ids...)
			if err != nil {
				return "", err
			}
			for _, o := range outs {
				v, _ := strconv.Atoi(string(o.Result))
				sum += v
			}
		}
		return fmt.Sprintf("%s: %d started, %d ok, %d failed, sum %d", res.Stopped, res.Started, res.Succeeded, res.Failed, sum), nil
	})
	leasehold.Handle(hs, "item", func(ctx context.Context, task *leasehold.Task[[]int]) (int, error) {
		i, conc, failEvery := task.Payload[0], task.Payload[1], task.Payload[2]
		if _, dup := ran.LoadOrStore(task.ID, true); dup {
			t.Errorf("%s ran twice", task.ID)
		}
		parent, _, _ := strings.Cut(task.ID, "/items/")
		if i%conc == 0 && i > 0 { // the first of a wave: the wave before has ended
			prev, err := (*env).Task(workflow.ChildIDIn(parent, "items", i-1))
			if err != nil || !prev.Status.Terminal() {
				t.Errorf("child %d started while child %d of the wave before was %s (%v)", i, i-1, prev.Status, err)
			}
			p, _ := (*env).Task(parent)
			if len(p.WaitFor) > conc {
				t.Errorf("the parent waits for %d ids, more than a wave of %d", len(p.WaitFor), conc)
			}
		}
		if failEvery > 0 && i%failEvery == 0 {
			return 0, leasehold.Fail(errors.New("planned"))
		}
		return i, nil
	})
	return hs
}

func runMap(t *testing.T, job mapJob) (leaseholdtest.TaskState, *sync.Map, *leaseholdtest.Env) {
	t.Helper()
	var env *leaseholdtest.Env
	ran := &sync.Map{}
	env = leaseholdtest.New(t, mapHandlers(t, &env, ran))
	env.SetMaxDeliveries(10 * (job.N + 100))
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "mapper", Payload: job, MaxAttempts: 1})
	mustRun(t, env)
	return mustTask(t, env, id), ran, env
}

func count(m *sync.Map) int {
	n := 0
	m.Range(func(any, any) bool { n++; return true })
	return n
}

// 250 children, 50 at a time: five waves; the parent ends in one attempt
// with every child's result; no child of a wave starts before the wave
// before has ended, and the parent never waits for more than a wave's ids.
func TestEnvMapRunsInWaves(t *testing.T) {
	t.Parallel()
	got, ran, _ := runMap(t, mapJob{N: 250, Conc: 50})
	if want := `"all: 250 started, 250 ok, 0 failed, sum 31125"`; got.Status != leasehold.StatusSucceeded || string(got.Result) != want {
		t.Fatalf("mapper: %s %s (error %q), want %s", got.Status, got.Result, got.Error, want)
	}
	if got.Attempt != 1 || count(ran) != 250 {
		t.Errorf("attempt %d, %d children ran; want attempt 1 and 250", got.Attempt, count(ran))
	}
	if names := got.StepNames(); len(names) != 1 || names[0] != "map:items" {
		t.Errorf("steps %v, want only map:items", names)
	}
}

// More failures than tolerated end the map at the wave that passes the
// bound: later children are never created, and the task fails with the
// reason.
func TestEnvMapStopsAtToleratedFailures(t *testing.T) {
	t.Parallel()
	got, ran, env := runMap(t, mapJob{N: 100, Conc: 20, Tolerated: 2, FailEvery: 10})
	if got.Status != leasehold.StatusFailed || !strings.Contains(got.Error, `map "items": 4 of 40 children failed (2 tolerated)`) {
		t.Fatalf("mapper: %s %q, want FAILED after two waves", got.Status, got.Error)
	}
	if count(ran) != 40 {
		t.Errorf("%d children ran, want 40 (two waves)", count(ran))
	}
	if _, err := env.Task(workflow.ChildIDIn(got.ID, "items", 40)); err == nil {
		t.Error("a child of the third wave exists")
	}
}

// MinSuccessful ends the map as soon as enough children have succeeded.
func TestEnvMapStopsAtMinSuccessful(t *testing.T) {
	t.Parallel()
	got, ran, _ := runMap(t, mapJob{N: 100, Conc: 20, MinOK: 30})
	if want := `"min_successful: 40 started, 40 ok, 0 failed, sum 780"`; got.Status != leasehold.StatusSucceeded || string(got.Result) != want {
		t.Fatalf("mapper: %s %s (%q), want %s", got.Status, got.Result, got.Error, want)
	}
	if count(ran) != 40 {
		t.Errorf("%d children ran, want 40", count(ran))
	}
}

// Bad options fail the task at once.
func TestEnvMapBadOptions(t *testing.T) {
	t.Parallel()
	for _, job := range []mapJob{{N: 0, Conc: 1}, {N: 10, Conc: 101}, {N: 10, Conc: 5, MinOK: 11}, {N: 10, Conc: 5, Tolerated: -1}} {
		got, _, _ := runMap(t, job)
		if got.Status != leasehold.StatusFailed || got.Attempt != 1 {
			t.Errorf("%+v: %s in attempt %d (%q), want FAILED at once", job, got.Status, got.Attempt, got.Error)
		}
	}
}

// 10,000 children, 100 at a time: the parent's record stays small (one
// wave's ids and its progress), whatever the size of the map.
func TestEnvMapTenThousandChildren(t *testing.T) {
	t.Parallel()
	got, ran, _ := runMap(t, mapJob{N: 10_000, Conc: 100})
	if want := `"all: 10000 started, 10000 ok, 0 failed, sum 0"`; got.Status != leasehold.StatusSucceeded || string(got.Result) != want {
		t.Fatalf("mapper: %s %s (%q), want %s", got.Status, got.Result, got.Error, want)
	}
	if count(ran) != 10_000 {
		t.Errorf("%d children ran, want 10000", count(ran))
	}
	if len(got.WaitFor) > 100 {
		t.Errorf("the parent's record names %d children, want at most a wave's 100", len(got.WaitFor))
	}
}
