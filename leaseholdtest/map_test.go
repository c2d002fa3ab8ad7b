package leaseholdtest_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/workflow"
)

type mapJob struct {
	N         int `json:"n"`
	Conc      int `json:"conc"`
	MinOK     int `json:"min_ok"`
	Tolerated int `json:"tolerated"`
	Pct       int `json:"pct"`
	FailEvery int `json:"fail_every"` // child i fails when FailEvery > 0 and i%FailEvery == 0
	FailAt    int `json:"fail_at"`    // child FailAt fails too (0: none)
	// SlowFirst: child 0's first attempt fails, to be retried after a
	// backoff, so it ends after the others have run (the Env advances its
	// clock only when nothing else is due).
	SlowFirst bool `json:"slow_first"`
	// CancelAt: child CancelAt's first attempt cancels the parent (with
	// the Env's client), notes what had started, and asks to run again
	// (0: none).
	CancelAt int `json:"cancel_at"`
}

// mapRun is what the children of a map saw as they ran.
type mapRun struct {
	ran sync.Map // child id: ran (a second run is an error)
	// mu guards the rest.
	mu sync.Mutex
	// peak is the most children of the map that were started (their
	// token sent) and had not ended at once, counted as each child starts
	// (maps of up to 300 children).
	peak int
	// pastSlow counts the children that started while child 0, slow, had
	// not ended; slowSaw is what child 0's last attempt saw: the map's
	// children that had ended by then.
	pastSlow, slowSaw int
	// parentRuns counts the parent's runs.
	parentRuns int
	// atCancel are the children that existed or had their token sent when
	// child CancelAt cancelled the parent, ranAtCancel how many had run,
	// endedAtCancel those that had ended.
	atCancel, endedAtCancel map[int]bool
	ranAtCancel             int
}

// mapHandlers: "mapper" maps job.N "item" children and sums their results
// (read back with ReadOutcomes); each "item" records what it saw in run.
func mapHandlers(t *testing.T, env **leaseholdtest.Env, run *mapRun) *leasehold.Handlers {
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "mapper", func(ctx context.Context, task *leasehold.Task[mapJob]) (string, error) {
		job := task.Payload
		run.mu.Lock()
		run.parentRuns++
		run.mu.Unlock()
		res, err := workflow.Map(ctx, "items", job.N, func(i int) workflow.Child {
			return workflow.Child{Kind: "item", Payload: []int{i, job.Conc, job.FailEvery, job.N, job.FailAt, boolInt(job.SlowFirst), job.CancelAt}, MaxAttempts: 2}
		}, workflow.MapOptions{MaxConcurrency: job.Conc, MinSuccessful: job.MinOK, ToleratedFailures: job.Tolerated, ToleratedFailurePercentage: job.Pct})
		if err != nil {
			return "", err
		}
		sum := 0
		if job.N <= 300 {
			ids := make([]string, job.N)
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
		i, conc, failEvery, n, failAt, slow := task.Payload[0], task.Payload[1], task.Payload[2], task.Payload[3], task.Payload[4], task.Payload[5] == 1
		parent, _, _ := strings.Cut(task.ID, "/items/")
		if slow && i == 0 && task.Attempt == 1 {
			return 0, errors.New("slow: try again later")
		}
		if _, dup := run.ran.LoadOrStore(task.ID, true); dup {
			t.Errorf("%s ran twice", task.ID)
		}
		if i >= conc {
			// Its slot's child before it has ended.
			prev, err := (*env).Task(workflow.ChildIDIn(parent, "items", i-conc))
			if err != nil || !prev.Status.Terminal() {
				t.Errorf("child %d started while child %d of its slot was %s (%v)", i, i-conc, prev.Status, err)
			}
		}
		if n <= 300 {
			unended, ended := 0, 0
			for j := range n {
				id := workflow.ChildIDIn(parent, "items", j)
				c, err := (*env).Task(id)
				switch {
				case err == nil && c.Status.Terminal():
					ended++
				case (*env).SentTaskID(id):
					unended++
				}
			}
			run.mu.Lock()
			run.peak = max(run.peak, unended)
			if slow && i != 0 {
				if c0, err := (*env).Task(workflow.ChildIDIn(parent, "items", 0)); err == nil && !c0.Status.Terminal() {
					run.pastSlow++
				}
			}
			if slow && i == 0 {
				run.slowSaw = ended
			}
			run.mu.Unlock()
		}
		if cancelAt := task.Payload[6]; cancelAt > 0 && i == cancelAt && task.Attempt == 1 {
			cancelParent(t, *env, run, parent, n)
			return 0, errors.New("cancelled meanwhile: try again")
		}
		if failEvery > 0 && i%failEvery == 0 || failAt > 0 && i == failAt {
			return 0, leasehold.Fail(errors.New("planned"))
		}
		return i, nil
	})
	return hs
}

// cancelParent notes which of parent's n map children exist or were sent,
// then cancels parent with the Env's client.
func cancelParent(t *testing.T, env *leaseholdtest.Env, run *mapRun, parent string, n int) {
	run.mu.Lock()
	run.atCancel, run.endedAtCancel = map[int]bool{}, map[int]bool{}
	for j := range n {
		id := workflow.ChildIDIn(parent, "items", j)
		c, err := env.Task(id)
		if err == nil || env.SentTaskID(id) {
			run.atCancel[j] = true
		}
		if err == nil && c.Status.Terminal() {
			run.endedAtCancel[j] = true
		}
	}
	run.ranAtCancel = count(&run.ran)
	run.mu.Unlock()
	if _, err := env.Client().Cancel(t.Context(), parent); err != nil {
		t.Errorf("cancel %s: %v", parent, err)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func runMap(t *testing.T, job mapJob) (leaseholdtest.TaskState, *mapRun, *leaseholdtest.Env) {
	t.Helper()
	var env *leaseholdtest.Env
	run := &mapRun{}
	env = leaseholdtest.New(t, mapHandlers(t, &env, run))
	env.TrackSends()
	env.SetMaxDeliveries(10 * (job.N + 100))
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "mapper", Payload: job, MaxAttempts: 1})
	mustRun(t, env)
	return mustTask(t, env, id), run, env
}

func count(m *sync.Map) int {
	n := 0
	m.Range(func(any, any) bool { n++; return true })
	return n
}

// 250 children, 50 at a time: the parent ends in one attempt with every
// child's result; a child starts only once its slot's child before it has
// ended, so at most 50 exist unended at once, and the map reaches 50.
func TestEnvMapRunsFiftyAtATime(t *testing.T) {
	t.Parallel()
	got, run, _ := runMap(t, mapJob{N: 250, Conc: 50})
	if want := `"all: 250 started, 250 ok, 0 failed, sum 31125"`; got.Status != leasehold.StatusSucceeded || string(got.Result) != want {
		t.Fatalf("mapper: %s %s (error %q), want %s", got.Status, got.Result, got.Error, want)
	}
	if got.Attempt != 1 || count(&run.ran) != 250 {
		t.Errorf("attempt %d, %d children ran; want attempt 1 and 250", got.Attempt, count(&run.ran))
	}
	if run.peak > 50 || run.peak < 40 {
		t.Errorf("at most %d children unended at once, want up to MaxConcurrency 50 (and near it)", run.peak)
	}
	if names := got.StepNames(); len(names) != 1 || names[0] != "map:items" {
		t.Errorf("steps %v, want only map:items", names)
	}
}

// A sliding map's parent is woken whatever answer of the writes that
// wake it is lost; before, the parent slept until the sweep found it,
// hours of the fake clock later. Each fault hits every call it names:
//   - a lost wake answer: the notification landed, the SDK's retry
//     answered "notified already";
//   - a failed wake: the notification landed and its answer was lost for
//     good, so the child's message came back, found its end counted and
//     must still do what the count made due;
//   - a lost count answer: the SDK's retry met the count landed
//     (mapstate.ErrCounted), and the wake must still be sent.
func TestEnvMapParentWokenAfterLostAnswers(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		fault func(env *leaseholdtest.Env, parent string)
	}{
		{"lost wake answer", func(env *leaseholdtest.Env, parent string) {
			env.ReplayNotifies(func(waiter string) bool { return waiter == parent })
		}},
		{"failed wake", func(env *leaseholdtest.Env, parent string) {
			env.FailNotifies(func(waiter string) bool { return waiter == parent })
		}},
		{"lost count answer", func(env *leaseholdtest.Env, _ string) { env.ReplayReports() }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var env *leaseholdtest.Env
			env = leaseholdtest.New(t, mapHandlers(t, &env, &mapRun{}))
			env.SetMaxDeliveries(10 * 200)
			id := mustEnqueue(t, env, leasehold.Submission{Kind: "mapper", Payload: mapJob{N: 40, Conc: 8}, MaxAttempts: 1})
			c.fault(env, id)
			start := env.Clock().Now()
			mustRun(t, env)
			got := mustTask(t, env, id)
			if got.Status != leasehold.StatusSucceeded || string(got.Result) != `"all: 40 started, 40 ok, 0 failed, sum 780"` {
				t.Fatalf("mapper: %s %s (error %q), want SUCCEEDED with all 40", got.Status, got.Result, got.Error)
			}
			if took := env.Clock().Now().Sub(start); took > time.Minute {
				t.Errorf("the map ended %s of the fake clock after it began: a lost wake left its parent asleep until the sweep", took)
			}
		})
	}
}

// One slow child does not hold the others back: while child 0 waits for
// its retry, its slot is busy and the other 19 slots run on through the
// whole map (in waves, nothing past the first wave would start). Still at
// most 20 at once.
func TestEnvMapSlidesPastASlowChild(t *testing.T) {
	t.Parallel()
	got, run, _ := runMap(t, mapJob{N: 200, Conc: 20, SlowFirst: true})
	if want := `"all: 200 started, 200 ok, 0 failed, sum 19900"`; got.Status != leasehold.StatusSucceeded || string(got.Result) != want {
		t.Fatalf("mapper: %s %s (error %q), want %s", got.Status, got.Result, got.Error, want)
	}
	// Slots 1..19 run their 10 children each (190) while child 0 waits;
	// slot 0's later children follow it.
	if run.pastSlow != 190 || run.slowSaw != 190 {
		t.Errorf("%d children started while child 0 was slow, and it saw %d ended when it ran; want 190 and 190", run.pastSlow, run.slowSaw)
	}
	if run.peak > 20 {
		t.Errorf("%d children unended at once, more than MaxConcurrency 20", run.peak)
	}
}

// More failures than tolerated stop the map as the child that passes the
// bound ends: at most MaxConcurrency more start (the running ones' slots
// each start at most one), and the task fails with the reason.
func TestEnvMapStopsAtToleratedFailures(t *testing.T) {
	t.Parallel()
	got, run, env := runMap(t, mapJob{N: 1000, Conc: 20, Tolerated: 2, FailEvery: 10})
	// The third failure is child 20's: the map stops within 20 of it.
	if got.Status != leasehold.StatusFailed || !strings.Contains(got.Error, `children failed (2 tolerated)`) {
		t.Fatalf("mapper: %s %q, want FAILED", got.Status, got.Error)
	}
	if n := count(&run.ran); n > 20+1+20 {
		t.Errorf("%d children ran, want at most 41 (child 20 passed the bound, then at most one per slot)", n)
	}
	if _, err := env.Task(workflow.ChildIDIn(got.ID, "items", 60)); err == nil {
		t.Error("child 60 exists, past the stop")
	}
}

// A failure stops the map at once, not when the slow child of its first
// MaxConcurrency ends: child 15 fails (slot 5's second child) while child 0
// waits for its retry, so by the time child 0 runs again the map has
// stopped and every other started child has ended (in waves, child 15
// would not even exist before child 0 ended).
func TestEnvMapFailureStopsWithoutWaitingForASlowChild(t *testing.T) {
	t.Parallel()
	got, run, _ := runMap(t, mapJob{N: 300, Conc: 10, FailAt: 15, SlowFirst: true})
	if got.Status != leasehold.StatusFailed || !strings.Contains(got.Error, `1 of`) {
		t.Fatalf("mapper: %s %q, want FAILED with one failure", got.Status, got.Error)
	}
	n := count(&run.ran)
	if n > 15+1+10 || run.slowSaw != n-1 {
		t.Errorf("%d children ran (want at most 26: the failure at 15, then one per slot), child 0 saw %d ended when it ran (want all the others)", n, run.slowSaw)
	}
}

// ToleratedFailurePercentage sits beside the count: 5% of 200 tolerates
// 10 failures, so the 11th (child 100, with one child in ten failing)
// stops the map; with ToleratedFailures 3 too, the smaller bound applies.
func TestEnvMapToleratedFailurePercentage(t *testing.T) {
	t.Parallel()
	got, run, _ := runMap(t, mapJob{N: 200, Conc: 10, Pct: 5, FailEvery: 10})
	if got.Status != leasehold.StatusFailed || !strings.Contains(got.Error, `(10 tolerated)`) {
		t.Fatalf("mapper: %s %q, want FAILED past 10 tolerated", got.Status, got.Error)
	}
	if n := count(&run.ran); n < 101 || n > 101+10 {
		t.Errorf("%d children ran, want 101 to 111 (the 11th failure is child 100)", n)
	}
	got, run, _ = runMap(t, mapJob{N: 200, Conc: 10, Pct: 5, Tolerated: 3, FailEvery: 10})
	if got.Status != leasehold.StatusFailed || !strings.Contains(got.Error, `(3 tolerated)`) {
		t.Fatalf("with 3 tolerated too: %s %q, want FAILED past 3 tolerated", got.Status, got.Error)
	}
	if n := count(&run.ran); n < 31 || n > 31+10 {
		t.Errorf("%d children ran, want 31 to 41 (the 4th failure is child 30)", n)
	}
	got, _, _ = runMap(t, mapJob{N: 200, Conc: 10, Pct: 10, FailEvery: 10})
	if want := `"all: 200 started, 180 ok, 20 failed, sum 18000"`; got.Status != leasehold.StatusSucceeded || string(got.Result) != want {
		t.Fatalf("10%% tolerated, 10%% failing: %s %s (%q), want %s", got.Status, got.Result, got.Error, want)
	}
}

// MinSuccessful ends the map as soon as enough children have succeeded,
// and no more than MaxConcurrency start after that.
func TestEnvMapStopsAtMinSuccessful(t *testing.T) {
	t.Parallel()
	got, run, _ := runMap(t, mapJob{N: 100, Conc: 20, MinOK: 30})
	if got.Status != leasehold.StatusSucceeded || !strings.HasPrefix(string(got.Result), `"min_successful: `) {
		t.Fatalf("mapper: %s %s (%q), want min_successful", got.Status, got.Result, got.Error)
	}
	if n := count(&run.ran); n < 30 || n > 30+20 {
		t.Errorf("%d children ran, want 30 to 50", n)
	}
}

// Every token of a child, and every wake of the parent, delivered twice:
// each child still runs once, is counted once, and the map still runs at
// most MaxConcurrency at once.
func TestEnvMapEachChildOnceUnderDuplicates(t *testing.T) {
	t.Parallel()
	var env *leaseholdtest.Env
	run := &mapRun{}
	env = leaseholdtest.New(t, mapHandlers(t, &env, run))
	env.TrackSends()
	env.SetMaxDeliveries(100_000)
	env.DuplicateSends(func(id string) bool { return strings.Contains(id, "/items/") }) // the children's tokens, the parent's wakes
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "mapper", Payload: mapJob{N: 300, Conc: 10}, MaxAttempts: 1})
	mustRun(t, env)
	got := mustTask(t, env, id)
	if want := `"all: 300 started, 300 ok, 0 failed, sum 44850"`; got.Status != leasehold.StatusSucceeded || string(got.Result) != want {
		t.Fatalf("mapper: %s %s (error %q), want %s", got.Status, got.Result, got.Error, want)
	}
	if count(&run.ran) != 300 || run.peak > 10 {
		t.Errorf("%d children ran (want 300), %d unended at once (want at most 10)", count(&run.ran), run.peak)
	}
}

// The parent runs once per batch of items, not once per child nor per
// MaxConcurrency: 3,000 children 10 at a time run the parent about
// 3,000 / 256 times (waves would run it 300 times).
func TestEnvMapResumesPerBatch(t *testing.T) {
	t.Parallel()
	got, run, _ := runMap(t, mapJob{N: 3000, Conc: 10})
	if got.Status != leasehold.StatusSucceeded {
		t.Fatalf("mapper: %s %q", got.Status, got.Error)
	}
	if run.parentRuns > 3000/256+3 {
		t.Errorf("the parent ran %d times, want at most %d", run.parentRuns, 3000/256+3)
	}
	t.Logf("3000 children, 10 at a time: %d parent runs", run.parentRuns)
}

// Bad options fail the task at once.
func TestEnvMapBadOptions(t *testing.T) {
	t.Parallel()
	for _, job := range []mapJob{{N: 0, Conc: 1}, {N: 10, Conc: 1001}, {N: 10, Conc: 5, MinOK: 11}, {N: 10, Conc: 5, Tolerated: -1}, {N: 10, Conc: 5, Pct: 101}, {N: 10, Conc: 5, Pct: -1}} {
		got, _, _ := runMap(t, job)
		if got.Status != leasehold.StatusFailed || got.Attempt != 1 {
			t.Errorf("%+v: %s in attempt %d (%q), want FAILED at once", job, got.Status, got.Attempt, got.Error)
		}
	}
}

// 10,000 children, 1,000 at a time: the parent's record stays small (its
// wait names one wake id), whatever the size of the map.
func TestEnvMapTenThousandChildren(t *testing.T) {
	t.Parallel()
	got, run, _ := runMap(t, mapJob{N: 10_000, Conc: 1000})
	if want := `"all: 10000 started, 10000 ok, 0 failed, sum 0"`; got.Status != leasehold.StatusSucceeded || string(got.Result) != want {
		t.Fatalf("mapper: %s %s (%q), want %s", got.Status, got.Result, got.Error, want)
	}
	if count(&run.ran) != 10_000 {
		t.Errorf("%d children ran, want 10000", count(&run.ran))
	}
	if len(got.WaitFor) > 1 {
		t.Errorf("the parent's record names %d ids, want at most its wake id", len(got.WaitFor))
	}
}

// A map of 100,000 children, 1,000 at a time, in memory: it ends in one
// attempt of its parent, which runs once per batch of items, and costs at
// most 3.5 writes a child (the in-memory store counts calls; on DynamoDB
// each of these writes is of an item under 1 KB but the pages, so calls
// and write units are close: make bench measures the units). It logs the
// writes a child, the parent's runs, the time and the peak heap.
func TestEnvMapHundredThousand(t *testing.T) {
	if testing.Short() {
		t.Skip("a map of 100,000 children: seconds, not for -short")
	}
	if raceEnabled {
		// make test runs it in its scale step, without the detector, and
		// make bench reports it; TestEnvMapTenThousandChildren runs the
		// same paths under the detector.
		t.Skip("a map of 100,000 children runs without the race detector (make test's scale step): under it, 85 s instead of 12")
	}
	const n, conc = 100_000, 1000
	var (
		mu                   sync.Mutex
		peak                 uint64
		children, parentRuns int
	)
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "mapper", func(ctx context.Context, task *leasehold.Task[mapJob]) (string, error) {
		mu.Lock()
		parentRuns++
		mu.Unlock()
		res, err := workflow.Map(ctx, "items", n, func(i int) workflow.Child {
			return workflow.Child{Kind: "item", Payload: i}
		}, workflow.MapOptions{MaxConcurrency: conc})
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%s: %d started, %d ok, %d failed, sum 0", res.Stopped, res.Started, res.Succeeded, res.Failed), nil
	})
	leasehold.Handle(hs, "item", func(ctx context.Context, task *leasehold.Task[int]) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		children++
		if children%5000 == 0 {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
		}
		return 1, nil
	})
	env := leaseholdtest.New(t, hs)
	env.SetMaxDeliveries(3 * n)
	begin := time.Now()
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "mapper", Payload: mapJob{N: n, Conc: conc}, MaxAttempts: 1})
	mustRun(t, env)
	took := time.Since(begin)
	got := mustTask(t, env, id)
	if want := `"all: 100000 started, 100000 ok, 0 failed, sum 0"`; got.Status != leasehold.StatusSucceeded || string(got.Result) != want || got.Attempt != 1 {
		t.Fatalf("mapper: %s %s (%q) in attempt %d, want %s in attempt 1", got.Status, got.Result, got.Error, got.Attempt, want)
	}
	perChild := float64(env.WriteCalls()) / n
	t.Logf("map of %d, %d at a time: %.3f writes a child, %d parent runs, %s, peak heap in use %.0f MB",
		n, conc, perChild, parentRuns, took.Round(time.Millisecond), float64(peak)/(1<<20))
	if perChild > 3.5 {
		t.Errorf("%.3f writes a child, want at most 3.5", perChild)
	}
	if parentRuns > n/1000+5 {
		t.Errorf("the parent ran %d times, want at most %d (once per batch of 1,000)", parentRuns, n/1000+5)
	}
}

// Cancelling a map's parent stops the map: 200 children 10 at a time,
// child 35 cancels the parent while it runs (child 0 waits for its retry
// then, PENDING). No child starts after the cancel (the children whose
// tokens were queued get placeholders, and no end starts a successor),
// the running ones end CANCELLED, and nothing is left to run.
func TestEnvMapCancelStopsTheMap(t *testing.T) {
	t.Parallel()
	got, run, env := runMap(t, mapJob{N: 200, Conc: 10, SlowFirst: true, CancelAt: 35})
	if got.Status != leasehold.StatusCancelled {
		t.Fatalf("mapper: %s %q, want CANCELLED", got.Status, got.Error)
	}
	if run.atCancel == nil {
		t.Fatal("child 35 never cancelled the parent")
	}
	if len(run.endedAtCancel) < 25 || len(run.atCancel)-len(run.endedAtCancel) > 10 {
		t.Fatalf("at the cancel %d children had ended and %d more had started; want about 30, and at most 10", len(run.endedAtCancel), len(run.atCancel)-len(run.endedAtCancel))
	}
	if n := count(&run.ran); n != run.ranAtCancel {
		t.Errorf("%d children ran, %d of them after the cancel; want none after it", n, n-run.ranAtCancel)
	}
	for j := range 200 {
		c, err := env.Task(workflow.ChildIDIn(got.ID, "items", j))
		switch {
		case err != nil && run.atCancel[j]:
			t.Errorf("child %d, started before the cancel, has no item: %v", j, err)
		case err != nil:
		case !run.atCancel[j]:
			t.Errorf("child %d was created after the cancel: %s", j, c.Status)
		case !run.endedAtCancel[j] && c.Status != leasehold.StatusCancelled:
			t.Errorf("child %d, running at the cancel, is %s (%q), want CANCELLED", j, c.Status, c.Error)
		}
	}
	// Retried, the parent finds its map stopped by the cancel: it fails
	// saying so instead of waiting for children that never report.
	if _, err := env.Client().Retry(t.Context(), got.ID, 1); err != nil {
		t.Fatal(err)
	}
	mustRun(t, env)
	if again := mustTask(t, env, got.ID); again.Status != leasehold.StatusFailed || !strings.Contains(again.Error, "stopped when its parent was cancelled") {
		t.Errorf("retried parent: %s %q, want FAILED saying the cancel stopped its map", again.Status, again.Error)
	}
	if n := count(&run.ran); n != run.ranAtCancel {
		t.Errorf("%d children ran after the retry, want %d", n, run.ranAtCancel)
	}
}

// runMapFaulty runs a map of job under the Env's map faults (SlowMapCalls)
// and checks that it SUCCEEDED with every child once (the "item" handler
// fails the test on a second run) and at most job.Conc at once.
func runMapFaulty(t *testing.T, job mapJob, slow time.Duration, failEvery int) (*mapRun, *leaseholdtest.Env) {
	t.Helper()
	var env *leaseholdtest.Env
	run := &mapRun{}
	env = leaseholdtest.New(t, mapHandlers(t, &env, run))
	env.TrackSends()
	env.SetMaxDeliveries(10 * (job.N + 100))
	env.SlowMapCalls(slow, failEvery)
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "mapper", Payload: job, MaxAttempts: 1})
	mustRun(t, env)
	got := mustTask(t, env, id)
	sum := job.N * (job.N - 1) / 2
	if want := fmt.Sprintf(`"all: %d started, %d ok, 0 failed, sum %d"`, job.N, job.N, sum); got.Status != leasehold.StatusSucceeded || string(got.Result) != want {
		t.Fatalf("mapper: %s %s (error %q), want %s", got.Status, got.Result, got.Error, want)
	}
	if count(&run.ran) != job.N || run.peak > job.Conc {
		t.Errorf("%d children ran, at most %d at once; want %d, at most %d", count(&run.ran), run.peak, job.N, job.Conc)
	}
	return run, env
}

// A parent's run reads no page it wrote itself, and each other page once:
// the first run writes the pages of 64 items and starts 40 children from
// them without a read; the 24 children started as others end read one
// page each. Before, the parent read a page per child it started (64
// reads in all).
func TestEnvMapParentReadsNoPageItWrote(t *testing.T) {
	t.Parallel()
	_, env := runMapFaulty(t, mapJob{N: 64, Conc: 40}, 0, 0)
	if _, reads, _ := env.MapCalls(); reads > 64-40 {
		t.Errorf("%d page reads, want at most %d (one per child started by another's end)", reads, 64-40)
	}
}

// On a slow store (each page, group or unpark call takes a second) a
// parent's run stops at its budget (half the lease, 5 s at most): it
// writes a few pages or starts a few children, suspends (which starts its
// count of attempts again) and goes on at once in its next run, so a
// worker that dies meets a short run. The map still runs every child once,
// at most MaxConcurrency at once. Before, the first run wrote 19 pages and
// started 50 children (69 steps, over a minute) before it suspended.
func TestEnvMapParentRunStopsAtItsBudget(t *testing.T) {
	t.Parallel()
	run, env := runMapFaulty(t, mapJob{N: 300, Conc: 50}, time.Second, 0)
	calls, _, most := env.MapCalls()
	if most > 6 {
		t.Errorf("a parent's run wrote pages and started children %d times before it suspended, want at most 6 (5 s of 1 s calls, and one)", most)
	}
	t.Logf("%d map calls, %d parent runs, at most %d steps a run", calls, run.parentRuns, most)
}

// A store error in a parent's bookkeeping (every third page, group or
// unpark call throttled) is tried again in place: the map ends with a
// parent of one attempt. Before, the first such error failed the run, and
// with it the task (MaxAttempts 1).
func TestEnvMapRetriesBookkeepingInPlace(t *testing.T) {
	t.Parallel()
	runMapFaulty(t, mapJob{N: 100, Conc: 10}, 0, 3)
}
