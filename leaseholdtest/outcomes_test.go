package leaseholdtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/workflow"
)

// padded is a child's result in the outcome tests: its index and some
// padding, so that a fan-in's results together outgrow a task's steps.
type padded struct {
	I   int    `json:"i"`
	Pad string `json:"pad"`
}

// fanIn is what a fan-in parent saw as it read its children's outcomes.
type fanIn struct {
	mu sync.Mutex
	// statuses counts the outcomes by status; sum adds the succeeded
	// children's indexes and bytes their results' sizes.
	statuses   map[leasehold.Status]int
	sum, bytes int
	// reads and mostIDs are the store's batched reads while the parent
	// iterated, and the most ids one of them took (over the whole run).
	reads, mostIDs int
	// order says whether the outcomes came child 0 first, in order.
	order bool
	// present and absent count the NOT_STARTED children whose record
	// exists (wrongly) and does not.
	present, absent int
}

// fanInHandlers: "fanin" maps job.N "padded" children (job.MinOK and
// job.Conc as in mapJob), then reads them all back with
// MapResult.Outcomes; child job.FailAt's record is expired before the
// read when job.FailEvery is -1 (the test's marker for "expire one").
func fanInHandlers(env **leaseholdtest.Env, seen *fanIn) *leasehold.Handlers {
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "fanin", func(ctx context.Context, task *leasehold.Task[mapJob]) (string, error) {
		job := task.Payload
		res, err := workflow.Map(ctx, "parts", job.N, func(i int) workflow.Child {
			return workflow.Child{Kind: "padded", Payload: i}
		}, workflow.MapOptions{MaxConcurrency: job.Conc, MinSuccessful: job.MinOK})
		if err != nil {
			return "", err
		}
		if job.FailEvery == -1 && !(*env).ExpireTask(workflow.ChildIDIn(task.ID, "parts", job.FailAt)) {
			return "", errors.New("child to expire not found")
		}
		reads0, _ := (*env).ManyReads()
		seen.mu.Lock()
		defer seen.mu.Unlock()
		seen.statuses, seen.order = map[leasehold.Status]int{}, true
		next := 0
		for o, err := range res.Outcomes(ctx) {
			if err != nil {
				return "", err
			}
			if o.ID != workflow.ChildIDIn(task.ID, "parts", next) {
				seen.order = false
			}
			next++
			seen.statuses[o.Status]++
			switch o.Status {
			case leasehold.StatusSucceeded:
				var p padded
				if err := json.Unmarshal(o.Result, &p); err != nil {
					return "", err
				}
				seen.sum += p.I
				seen.bytes += len(o.Result)
			case "NOT_STARTED":
				if _, err := (*env).Task(o.ID); err == nil {
					seen.present++
				} else {
					seen.absent++
				}
			}
		}
		reads1, most := (*env).ManyReads()
		seen.reads, seen.mostIDs = reads1-reads0, most
		return fmt.Sprintf("%s: %d of %d started, %d ok", res.Stopped, res.Started, res.Total, res.Succeeded), nil
	})
	leasehold.Handle(hs, "padded", func(ctx context.Context, task *leasehold.Task[int]) (padded, error) {
		return padded{I: task.Payload, Pad: strings.Repeat("x", 100)}, nil
	})
	return hs
}

func runFanIn(t *testing.T, job mapJob) (leaseholdtest.TaskState, *fanIn) {
	t.Helper()
	var env *leaseholdtest.Env
	seen := &fanIn{}
	env = leaseholdtest.New(t, fanInHandlers(&env, seen))
	env.SetMaxDeliveries(10 * (job.N + 100))
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "fanin", Payload: job, MaxAttempts: 1})
	mustRun(t, env)
	return mustTask(t, env, id), seen
}

// TestEnvMapOutcomesTenThousand (issue 36, point 1): a map of 10,000
// children, each returning about 120 bytes, read back by its parent
// through MapResult.Outcomes. The parent sums them, in child order, in
// 100 batched reads of at most 100 ids: never one slice of 10,000. Their
// results together (1.2 MB) are far over the 64 KiB a task's steps share,
// which an All of them would have had to record: the fan-in does not fail.
func TestEnvMapOutcomesTenThousand(t *testing.T) {
	t.Parallel()
	const n = 10_000
	got, seen := runFanIn(t, mapJob{N: n, Conc: 1000})
	if want := `"all: 10000 of 10000 started, 10000 ok"`; got.Status != leasehold.StatusSucceeded || string(got.Result) != want {
		t.Fatalf("fanin: %s %s (%q), want %s", got.Status, got.Result, got.Error, want)
	}
	if want := n * (n - 1) / 2; seen.sum != want || seen.statuses[leasehold.StatusSucceeded] != n || !seen.order {
		t.Errorf("read %v outcomes (in order %v) summing to %d, want %d SUCCEEDED in order summing to %d", seen.statuses, seen.order, seen.sum, n, want)
	}
	if want := (n + 99) / 100; seen.reads > want || seen.mostIDs > 100 {
		t.Errorf("the outcomes took %d batched reads, the largest of %d ids; want at most %d reads of at most 100", seen.reads, seen.mostIDs, want)
	}
	if seen.bytes <= lease.MaxStepsBytes {
		t.Errorf("the results came to %d bytes, want over the %d a task's steps share (what All records)", seen.bytes, lease.MaxStepsBytes)
	}
	t.Logf("%d outcomes, %d bytes of results, in %d reads of at most %d ids", n, seen.bytes, seen.reads, seen.mostIDs)
}

// A map stopped by MinSuccessful: the children it never started are
// NOT_STARTED (no record, none read), the others as they ended; a child
// whose record expired reads EXPIRED.
func TestEnvMapOutcomesNotStartedAndExpired(t *testing.T) {
	t.Parallel()
	got, seen := runFanIn(t, mapJob{N: 500, Conc: 20, MinOK: 50, FailEvery: -1, FailAt: 3})
	var started, ok int
	if _, err := fmt.Sscanf(string(got.Result), `"min_successful: %d of 500 started, %d ok"`, &started, &ok); err != nil || got.Status != leasehold.StatusSucceeded {
		t.Fatalf("fanin: %s %s (%q): want min_successful", got.Status, got.Result, got.Error)
	}
	if seen.statuses["EXPIRED"] != 1 || seen.statuses[leasehold.StatusSucceeded] != ok-1 || seen.statuses["NOT_STARTED"] != 500-started || !seen.order {
		t.Errorf("read %v (in order %v), want 1 EXPIRED, %d SUCCEEDED, %d NOT_STARTED, in order", seen.statuses, seen.order, ok-1, 500-started)
	}
	if seen.present != 0 || seen.absent != 500-started {
		t.Errorf("%d NOT_STARTED children have a record and %d have none, want 0 and %d", seen.present, seen.absent, 500-started)
	}
	if want := 5; seen.reads > want {
		t.Errorf("%d batched reads, want at most %d (a page of 100 children each)", seen.reads, want)
	}
}

// Outcomes is for a map that ended in this run: a MapResult Map did not
// return fails the task, with the reason.
func TestEnvMapOutcomesOfAnotherResult(t *testing.T) {
	t.Parallel()
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "lost", func(ctx context.Context, task *leasehold.Task[int]) (int, error) {
		for _, err := range (workflow.MapResult{Total: 3}).Outcomes(ctx) {
			return 0, err
		}
		return 0, errors.New("no error yielded")
	})
	env := leaseholdtest.New(t, hs)
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "lost", MaxAttempts: 3})
	mustRun(t, env)
	if got := mustTask(t, env, id); got.Status != leasehold.StatusFailed || got.Attempt != 1 || !strings.Contains(got.Error, "did not return") {
		t.Errorf("lost: %s in attempt %d (%q), want FAILED at once with the reason", got.Status, got.Attempt, got.Error)
	}
}

// A child's result over 64 KiB is kept in the payload bucket, its record
// holding a reference: Outcomes reads the value back for the handler.
func TestEnvMapOutcomesReadLargeResultsBack(t *testing.T) {
	t.Parallel()
	var lens []int
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "big", func(ctx context.Context, task *leasehold.Task[int]) (string, error) {
		return strings.Repeat("r", task.Payload), nil
	})
	leasehold.Handle(hs, "fanin", func(ctx context.Context, task *leasehold.Task[int]) (int, error) {
		res, err := workflow.Map(ctx, "parts", 3, func(i int) workflow.Child {
			return workflow.Child{Kind: "big", Payload: []int{10, 200 << 10, 20}[i]}
		}, workflow.MapOptions{})
		if err != nil {
			return 0, err
		}
		lens = lens[:0]
		for o, err := range res.Outcomes(ctx) {
			if err != nil {
				return 0, err
			}
			var s string
			if err := json.Unmarshal(o.Result, &s); err != nil {
				return 0, fmt.Errorf("%s: %w", o.ID, err)
			}
			lens = append(lens, len(s))
		}
		return len(lens), nil
	})
	env := leaseholdtest.New(t, hs)
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "fanin", MaxAttempts: 1})
	mustRun(t, env)
	if got := mustTask(t, env, id); got.Status != leasehold.StatusSucceeded {
		t.Fatalf("fanin: %s (%q)", got.Status, got.Error)
	}
	if _, stored, err := env.StoredPayload(workflow.ChildIDIn(id, "parts", 1)); err != nil || len(stored) > 1<<10 {
		t.Fatalf("the large child's record keeps %d bytes of result (%v), want a reference", len(stored), err)
	}
	if want := []int{10, 200 << 10, 20}; fmt.Sprint(lens) != fmt.Sprint(want) {
		t.Errorf("read results of %v bytes, want %v", lens, want)
	}
}

// The docs' pattern: the outcomes folded inside a Step, then a sleep. The
// run after the sleep replays the step's total without reading the
// children again, and the map ended once.
func TestEnvMapOutcomesFoldedInAStep(t *testing.T) {
	t.Parallel()
	var (
		env         *leaseholdtest.Env
		folds, runs int
		readsAfter  []int
	)
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "one", func(ctx context.Context, task *leasehold.Task[int]) (int, error) { return task.Payload, nil })
	leasehold.Handle(hs, "fanin", func(ctx context.Context, task *leasehold.Task[int]) (int, error) {
		runs++
		res, err := workflow.Map(ctx, "parts", 250, func(i int) workflow.Child {
			return workflow.Child{Kind: "one", Payload: i}
		}, workflow.MapOptions{MaxConcurrency: 25})
		if err != nil {
			return 0, err
		}
		total, err := workflow.Step(ctx, "total", func(ctx context.Context) (int, error) {
			folds++
			sum := 0
			for o, err := range res.Outcomes(ctx) {
				if err != nil {
					return 0, err
				}
				var v int
				if err := json.Unmarshal(o.Result, &v); err != nil {
					return 0, err
				}
				sum += v
			}
			return sum, nil
		})
		if err != nil {
			return 0, err
		}
		if err := workflow.Sleep(ctx, time.Hour); err != nil {
			reads, _ := env.ManyReads()
			readsAfter = append(readsAfter, reads)
			return 0, err
		}
		if reads, _ := env.ManyReads(); len(readsAfter) != 1 || reads != readsAfter[0] {
			return 0, fmt.Errorf("batched reads %d after the sleep, %v before it: the replay read the children again", reads, readsAfter)
		}
		return total, nil
	})
	env = leaseholdtest.New(t, hs)
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "fanin", MaxAttempts: 1})
	mustRun(t, env)
	if got := mustTask(t, env, id); got.Status != leasehold.StatusSucceeded || string(got.Result) != fmt.Sprint(250*249/2) {
		t.Fatalf("fanin: %s %s (%q), want SUCCEEDED %d", got.Status, got.Result, got.Error, 250*249/2)
	}
	if folds != 1 {
		t.Errorf("the outcomes were folded %d times in %d runs, want once", folds, runs)
	}
}
