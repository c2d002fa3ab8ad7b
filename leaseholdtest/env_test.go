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
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/workflow"
)

// Every goroutine an Env or its worker starts is joined before the test
// ends.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// counter counts calls by name; handlers run on the worker's goroutines.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) add(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[name]++
}

func (c *counter) get(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[name]
}

// all returns a copy of the counts.
func (c *counter) all() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.n)
}

func mustEnqueue(t *testing.T, env *leaseholdtest.Env, s leasehold.Submission) string {
	t.Helper()
	id, err := env.Enqueue(s)
	if err != nil {
		t.Fatalf("enqueue %s: %v", s.Kind, err)
	}
	return id
}

func mustRun(t *testing.T, env *leaseholdtest.Env) {
	t.Helper()
	if err := env.Run(); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

func mustTask(t *testing.T, env *leaseholdtest.Env, id string) leaseholdtest.TaskState {
	t.Helper()
	s, err := env.Task(id)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Two steps, a durable sleep of three days, a step: the task succeeds in
// one attempt, each step runs once (the runs after the sleep replay them),
// and the fake clock, not the test, waits the three days.
func TestEnvSleepSkipsTheWaitAndRunsEachStepOnce(t *testing.T) {
	t.Parallel()
	var c counter
	step := func(ctx context.Context, name string) (string, error) {
		return workflow.Step(ctx, name, func(context.Context) (string, error) {
			c.add(name)
			return name + " done", nil
		})
	}
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "remind", func(ctx context.Context, task *leasehold.Task[string]) (string, error) {
		c.add("handler")
		if _, err := step(ctx, "invoice"); err != nil {
			return "", err
		}
		if _, err := step(ctx, "email"); err != nil {
			return "", err
		}
		if err := workflow.Sleep(ctx, 72*time.Hour); err != nil {
			return "", err
		}
		last, err := step(ctx, "remind")
		return task.Payload + ": " + last, err
	})
	env := leaseholdtest.New(t, hs)
	begin, wall := env.Clock().Now(), time.Now()
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "remind", Payload: "order-7", ID: "order-7"})
	mustRun(t, env)

	got := mustTask(t, env, id)
	if got.Status != leasehold.StatusSucceeded || string(got.Result) != `"order-7: remind done"` {
		t.Fatalf("task %s %s (error %q), want SUCCEEDED \"order-7: remind done\"", got.Status, got.Result, got.Error)
	}
	if got.Attempt != 1 {
		t.Errorf("attempt %d, want 1: a sleep hands its attempt back", got.Attempt)
	}
	for _, name := range []string{"invoice", "email", "remind"} {
		if n := c.get(name); n != 1 {
			t.Errorf("step %s ran %d times, want once", name, n)
		}
	}
	if n := c.get("handler"); n != 2 {
		t.Errorf("handler ran %d times, want 2 (before and after the sleep)", n)
	}
	if names := got.StepNames(); !slices.Equal(names, []string{"invoice", "email", "sleep#1", "remind"}) {
		t.Errorf("steps %v", names)
	}
	if d := env.Clock().Since(begin); d < 72*time.Hour {
		t.Errorf("the fake clock advanced %s, want at least 72h", d)
	}
	if d := time.Since(wall); d > time.Minute {
		t.Errorf("the test waited %s of wall-clock time", d)
	}
}

// A parent fans out to three children, which run by their own handlers,
// and sums their results once it resumes. While they run the parent is
// WAITING for them.
func TestEnvFanOutAndIn(t *testing.T) {
	t.Parallel()
	var (
		env       *leaseholdtest.Env
		mu        sync.Mutex
		seenWaits []string
	)
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "sum-squares", func(ctx context.Context, task *leasehold.Task[[]int]) (int, error) {
		if _, err := workflow.Step(ctx, "plan", func(context.Context) (int, error) { return len(task.Payload), nil }); err != nil {
			return 0, err
		}
		children := make([]workflow.Child, len(task.Payload))
		for i, n := range task.Payload {
			children[i] = workflow.Child{Kind: "square", Payload: n}
		}
		kids, err := workflow.All(ctx, "squares", children...)
		if err != nil {
			return 0, err
		}
		sum := 0
		for _, k := range kids {
			if k.Status != leasehold.StatusSucceeded {
				return 0, leasehold.Fail(fmt.Errorf("child %s %s", k.ID, k.Status))
			}
			var n int
			if err := json.Unmarshal(k.Result, &n); err != nil {
				return 0, err
			}
			sum += n
		}
		return sum, nil
	})
	leasehold.Handle(hs, "square", func(ctx context.Context, task *leasehold.Task[int]) (int, error) {
		p, err := env.Task("p")
		if err != nil {
			return 0, err
		}
		mu.Lock()
		seenWaits = append(seenWaits, fmt.Sprintf("%s %s %d", p.Status, p.Wait, len(p.WaitFor)))
		mu.Unlock()
		return task.Payload * task.Payload, nil
	})
	env = leaseholdtest.New(t, hs)
	mustEnqueue(t, env, leasehold.Submission{Kind: "sum-squares", Payload: []int{1, 2, 3}, ID: "p"})
	mustRun(t, env)

	got := mustTask(t, env, "p")
	if got.Status != leasehold.StatusSucceeded || string(got.Result) != "14" {
		t.Fatalf("parent %s %s (error %q), want SUCCEEDED 14", got.Status, got.Result, got.Error)
	}
	if got.Wait != "children" || !slices.Equal(got.WaitFor, []string{workflow.ChildIDIn("p", "squares", 0), workflow.ChildIDIn("p", "squares", 1), workflow.ChildIDIn("p", "squares", 2)}) {
		t.Errorf("parent waited for %s %v, want its 3 children", got.Wait, got.WaitFor)
	}
	// The outcomes All read are not written: the run that read them ended
	// the task, so no run replays them (the children are their record).
	if names := got.StepNames(); !slices.Equal(names, []string{"plan"}) {
		t.Errorf("parent steps %v, want [plan] (recorded once across its two runs; the children's outcomes need no record)", names)
	}
	for i := range 3 {
		kid := mustTask(t, env, workflow.ChildIDIn("p", "squares", i))
		if kid.Status != leasehold.StatusSucceeded || kid.Parent != "p" || string(kid.Result) != fmt.Sprint((i+1)*(i+1)) {
			t.Errorf("child %d: %s %s, parent %q", i, kid.Status, kid.Result, kid.Parent)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seenWaits) != 3 || seenWaits[0] != "WAITING children 3" {
		t.Errorf("the children saw their parent as %q, want WAITING for its 3 children", seenWaits)
	}
}

// A handler hands out its callback token and waits; Run stops there. The
// test completes the callback and the task succeeds with its result; the
// token is accepted once.
func TestEnvCallback(t *testing.T) {
	t.Parallel()
	handed := make(chan string, 4)
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "approve", func(ctx context.Context, task *leasehold.Task[string]) (json.RawMessage, error) {
		return workflow.WaitForCallback[json.RawMessage](ctx, "approval", time.Hour, func(_ context.Context, tok string) error {
			handed <- tok // to the "outside system"
			return nil
		})
	})
	env := leaseholdtest.New(t, hs)
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "approve", Payload: "refund 7"})
	mustRun(t, env)

	waiting := mustTask(t, env, id)
	if waiting.Status != leasehold.StatusWaiting || waiting.Wait != "callback" || waiting.WaitUntil.IsZero() {
		t.Fatalf("after Run: %s waiting for %q until %v, want WAITING for a callback", waiting.Status, waiting.Wait, waiting.WaitUntil)
	}
	tok := <-handed
	if got, err := env.CallbackToken(id); err != nil || got != tok {
		t.Fatalf("CallbackToken = %q, %v; want the token the handler handed out", got, err)
	}
	if err := env.CompleteCallback(tok, map[string]bool{"approved": true}); err != nil {
		t.Fatal(err)
	}
	mustRun(t, env)
	got := mustTask(t, env, id)
	if got.Status != leasehold.StatusSucceeded || string(got.Result) != `{"approved":true}` {
		t.Fatalf("after the callback: %s %s, want SUCCEEDED with the callback's result", got.Status, got.Result)
	}
	if err := env.CompleteCallback(tok, "again"); !errors.Is(err, leasehold.ErrBadCallback) {
		t.Errorf("second completion: %v, want ErrBadCallback", err)
	}
	if err := env.FailCallback(tok, "too late"); !errors.Is(err, leasehold.ErrBadCallback) {
		t.Errorf("failure after the completion: %v, want ErrBadCallback", err)
	}
	if got := mustTask(t, env, id); string(got.Result) != `{"approved":true}` {
		t.Errorf("a rejected callback changed the result to %s", got.Result)
	}
	if _, err := env.CallbackToken(id); !errors.Is(err, leasehold.ErrNotWaiting) {
		t.Errorf("CallbackToken of a finished task: %v, want ErrNotWaiting", err)
	}
	if len(handed) != 0 {
		t.Errorf("the handler handed out a token again after its callback")
	}
}

// A callback that never comes fails its attempt at the timeout, once the
// test advances the clock past it; the retry hands out a new token and the
// old one is refused. A child's callback wakes its parent.
func TestEnvCallbackTimeoutAndParent(t *testing.T) {
	t.Parallel()
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "approve", func(ctx context.Context, task *leasehold.Task[string]) (string, error) {
		return workflow.WaitForCallback[string](ctx, "approval", 10*time.Minute, func(context.Context, string) error { return nil })
	})
	leasehold.Handle(hs, "order", func(ctx context.Context, task *leasehold.Task[string]) (string, error) {
		kids, err := workflow.All(ctx, "approve", workflow.Child{Kind: "approve", Payload: task.Payload, MaxAttempts: 3})
		if err != nil {
			return "", err
		}
		return "approved by " + string(kids[0].Result), nil
	})
	env := leaseholdtest.New(t, hs)
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "order", Payload: "o-1"})
	mustRun(t, env)
	child := workflow.ChildIDIn(id, "approve", 0)
	first, err := env.CallbackToken(child)
	if err != nil {
		t.Fatal(err)
	}
	if p := mustTask(t, env, id); p.Status != leasehold.StatusWaiting || p.Wait != "children" {
		t.Fatalf("parent %s waiting for %q", p.Status, p.Wait)
	}

	env.Clock().Advance(11 * time.Minute)
	mustRun(t, env)
	kid := mustTask(t, env, child)
	if kid.Status != leasehold.StatusWaiting || kid.Attempt != 2 || !slices.ContainsFunc(kid.History, func(a leasehold.AttemptInfo) bool { return strings.Contains(a.Error, "callback not received") }) {
		t.Fatalf("child after its timeout: %s attempt %d history %+v, want WAITING again in attempt 2", kid.Status, kid.Attempt, kid.History)
	}
	second, err := env.CallbackToken(child)
	if err != nil || second == first {
		t.Fatalf("token of attempt 2: %q, %v; want a new one", second, err)
	}
	if err := env.CompleteCallback(first, "stale"); !errors.Is(err, leasehold.ErrBadCallback) {
		t.Fatalf("the first attempt's token: %v, want ErrBadCallback", err)
	}
	if err := env.CompleteCallback(second, "alice"); err != nil {
		t.Fatal(err)
	}
	mustRun(t, env)
	if p := mustTask(t, env, id); p.Status != leasehold.StatusSucceeded || string(p.Result) != `"approved by \"alice\""` {
		t.Fatalf("parent %s %s (error %q)", p.Status, p.Result, p.Error)
	}
}

// A failing handler is retried with backoff until its max attempts, then
// FAILED; the backoffs pass on the fake clock.
func TestEnvRetriesWithBackoffThenFails(t *testing.T) {
	t.Parallel()
	var c counter
	var mu sync.Mutex
	var starts []time.Time
	var env *leaseholdtest.Env
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "flaky", func(ctx context.Context, task *leasehold.Task[int]) (int, error) {
		c.add("flaky")
		mu.Lock()
		starts = append(starts, env.Clock().Now())
		mu.Unlock()
		return 0, errors.New("service down")
	})
	leasehold.Handle(hs, "heals", func(ctx context.Context, task *leasehold.Task[int]) (int, error) {
		c.add("heals")
		if task.Attempt < 3 {
			return 0, errors.New("not yet")
		}
		return task.Attempt, nil
	})
	env = leaseholdtest.New(t, hs)
	wall := time.Now()
	flaky := mustEnqueue(t, env, leasehold.Submission{Kind: "flaky", Payload: 1, MaxAttempts: 4})
	heals := mustEnqueue(t, env, leasehold.Submission{Kind: "heals", Payload: 1, MaxAttempts: 5})
	mustRun(t, env)

	got := mustTask(t, env, flaky)
	if got.Status != leasehold.StatusFailed || got.Attempt != 4 || got.Error != "service down" {
		t.Fatalf("flaky: %s after %d attempts (error %q), want FAILED after 4", got.Status, got.Attempt, got.Error)
	}
	if n := c.get("flaky"); n != 4 || len(got.History) != 4 {
		t.Errorf("flaky ran %d times with %d history entries, want 4 and 4", n, len(got.History))
	}
	mu.Lock()
	for i := 1; i < len(starts); i++ {
		if gap := starts[i].Sub(starts[i-1]); gap < time.Second {
			t.Errorf("attempt %d started %s after attempt %d: no backoff", i+1, gap, i)
		}
	}
	mu.Unlock()
	if h := mustTask(t, env, heals); h.Status != leasehold.StatusSucceeded || string(h.Result) != "3" || c.get("heals") != 3 {
		t.Errorf("heals: %s %s after %d runs, want SUCCEEDED 3 after 3", h.Status, h.Result, c.get("heals"))
	}
	if d := time.Since(wall); d > time.Minute {
		t.Errorf("the test waited %s of wall-clock time", d)
	}
}

// A task enqueued After another runs once it succeeded and reads its
// outcome.
func TestEnvDependencies(t *testing.T) {
	t.Parallel()
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "fetch", func(ctx context.Context, task *leasehold.Task[string]) (string, error) {
		return "data of " + task.Payload, nil
	})
	leasehold.Handle(hs, "report", func(ctx context.Context, task *leasehold.Task[string]) (string, error) {
		deps, ok := workflow.Dependencies(ctx)
		if !ok || len(deps) != 1 {
			return "", leasehold.Fail(fmt.Errorf("dependencies %v, %v", deps, ok))
		}
		return "report on " + string(deps[0].Result), nil
	})
	env := leaseholdtest.New(t, hs)
	fetch := mustEnqueue(t, env, leasehold.Submission{Kind: "fetch", Payload: "q3", Delay: time.Hour})
	report := mustEnqueue(t, env, leasehold.Submission{Kind: "report", After: []string{fetch}})
	mustRun(t, env)
	got := mustTask(t, env, report)
	if got.Status != leasehold.StatusSucceeded || string(got.Result) != `"report on \"data of q3\""` || got.Wait != "after" {
		t.Fatalf("report: %s %s (error %q, wait %q)", got.Status, got.Result, got.Error, got.Wait)
	}
}

// Unknown kinds and bad input give errors at once, not a hang.
func TestEnvBadInput(t *testing.T) {
	t.Parallel()
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "resize", func(ctx context.Context, task *leasehold.Task[resize]) (string, error) {
		return task.Payload.URL, nil
	})
	leasehold.Handle(hs, "parent", func(ctx context.Context, task *leasehold.Task[struct{}]) (string, error) {
		if _, err := workflow.All(ctx, "kids", workflow.Child{Kind: "unregistered"}); err != nil {
			return "", err
		}
		return "done", nil
	})
	leasehold.Handle(hs, "snoozer", func(ctx context.Context, task *leasehold.Task[struct{}]) (string, error) {
		return "", leasehold.Snooze(time.Second)
	})

	t.Run("enqueue", func(t *testing.T) {
		t.Parallel()
		env := leaseholdtest.New(t, hs)
		cases := []struct {
			sub  leasehold.Submission
			want error
		}{
			{leasehold.Submission{Kind: "nobody"}, leaseholdtest.ErrNoHandler},
			{leasehold.Submission{Kind: "resize", Payload: make(chan int)}, leasehold.ErrInvalid},
			{leasehold.Submission{Kind: "resize", Payload: json.RawMessage(`{"url":`)}, leasehold.ErrInvalid},
			{leasehold.Submission{Kind: "resize", ID: "bad\x00id"}, leasehold.ErrInvalid},
			{leasehold.Submission{Kind: "resize", MaxAttempts: 101}, leasehold.ErrInvalid},
			{leasehold.Submission{Kind: "resize", After: []string{"x"}, Delay: time.Minute}, leasehold.ErrInvalid},
		}
		for _, tc := range cases {
			if _, err := env.Enqueue(tc.sub); !errors.Is(err, tc.want) {
				t.Errorf("Enqueue(%q, %v): %v, want %v", tc.sub.Kind, tc.sub.Payload, err, tc.want)
			}
		}
		id := mustEnqueue(t, env, leasehold.Submission{Kind: "resize", Payload: resize{URL: "a"}, ID: "r"})
		if _, err := env.Enqueue(leasehold.Submission{Kind: "resize", Payload: resize{URL: "a"}, ID: id}); !errors.Is(err, leasehold.ErrAlreadyExists) {
			t.Errorf("the same task again: %v, want ErrAlreadyExists", err)
		}
		var conflict *leasehold.ConflictError
		if _, err := env.Enqueue(leasehold.Submission{Kind: "resize", Payload: resize{URL: "b"}, ID: id}); !errors.Is(err, leasehold.ErrConflict) || !errors.As(err, &conflict) || conflict.Field != "payload" {
			t.Errorf("another payload under the id: %v, want a *leasehold.ConflictError on the payload, as the Client's", err)
		}
		if _, err := env.Task("missing"); !errors.Is(err, leasehold.ErrNotFound) {
			t.Errorf("Task of a missing id: %v, want ErrNotFound", err)
		}
		if err := env.CompleteCallback("not a token", 1); !errors.Is(err, leasehold.ErrBadCallback) {
			t.Errorf("CompleteCallback of garbage: %v, want ErrBadCallback", err)
		}
	})

	t.Run("payload that does not decode", func(t *testing.T) {
		t.Parallel()
		env := leaseholdtest.New(t, hs)
		id := mustEnqueue(t, env, leasehold.Submission{Kind: "resize", Payload: "not an object"})
		mustRun(t, env)
		got := mustTask(t, env, id)
		if got.Status != leasehold.StatusFailed || got.Attempt != 1 || !strings.Contains(got.Error, "does not decode") {
			t.Errorf("%s after %d attempts: %q; want FAILED at once, naming the decoding", got.Status, got.Attempt, got.Error)
		}
	})

	t.Run("child of an unregistered kind", func(t *testing.T) {
		t.Parallel()
		env := leaseholdtest.New(t, hs)
		id := mustEnqueue(t, env, leasehold.Submission{Kind: "parent"})
		begin := env.Clock().Now()
		err := env.Run()
		if !errors.Is(err, leaseholdtest.ErrNoHandler) || !strings.Contains(err.Error(), workflow.ChildIDIn(id, "kids", 0)) || !strings.Contains(err.Error(), `"unregistered"`) {
			t.Fatalf("Run: %v, want ErrNoHandler naming the child and its kind", err)
		}
		if d := env.Clock().Since(begin); d > time.Minute {
			t.Errorf("Run advanced the clock %s before reporting the unknown kind", d)
		}
	})

	t.Run("a task that never settles", func(t *testing.T) {
		t.Parallel()
		env := leaseholdtest.New(t, hs)
		env.SetMaxDeliveries(300)
		id := mustEnqueue(t, env, leasehold.Submission{Kind: "snoozer"})
		begin := env.Clock().Now()
		if err := env.Run(); !errors.Is(err, leaseholdtest.ErrTooManyDeliveries) || !strings.Contains(err.Error(), id) {
			t.Fatalf("Run: %v, want ErrTooManyDeliveries naming %s", err, id)
		}
		if got := mustTask(t, env, id); got.Snoozes < 299 || env.Clock().Since(begin) < 299*time.Second {
			t.Errorf("%d snoozes in %s of fake time, want 300 snoozes of a second", got.Snoozes, env.Clock().Since(begin))
		}
	})
}

// Run and RunKind still call a handler directly: workflow calls fail
// there, with an error that says why.
func TestRunIsNotAWorker(t *testing.T) {
	t.Parallel()
	_, err := leaseholdtest.Run(context.Background(), func(ctx context.Context, _ *leasehold.Task[int]) (int, error) {
		return workflow.Step(ctx, "s", func(context.Context) (int, error) { return 1, nil })
	}, leaseholdtest.Task[int]{})
	if err == nil || !strings.Contains(err.Error(), "not called from a handler run by a leasehold worker") {
		t.Fatalf("Step under Run: %v", err)
	}
}

// TestEnvAllRecordsOutcomesARetryReplays: the outcomes All reads are written
// (the step "children:NAME") when the run that read them does not end the
// task, here a retry, so the next attempt replays them.
func TestEnvAllRecordsOutcomesARetryReplays(t *testing.T) {
	hs := leasehold.NewHandlers()
	var runs atomic.Int32
	leasehold.Handle(hs, "fan", func(ctx context.Context, task *leasehold.Task[struct{}]) (int, error) {
		kids, err := workflow.All(ctx, "kids", workflow.Child{Kind: "one"}, workflow.Child{Kind: "one"})
		if err != nil {
			return 0, err
		}
		if runs.Add(1) == 1 {
			return 0, errors.New("the first run after the wait fails")
		}
		return len(kids), nil
	})
	leasehold.Handle(hs, "one", func(context.Context, *leasehold.Task[struct{}]) (int, error) { return 1, nil })
	env := leaseholdtest.New(t, hs)
	mustEnqueue(t, env, leasehold.Submission{Kind: "fan", Payload: struct{}{}, ID: "f"})
	mustRun(t, env)
	got := mustTask(t, env, "f")
	if got.Status != leasehold.StatusSucceeded || string(got.Result) != "2" || got.Attempt != 2 {
		t.Fatalf("parent %s %s attempt %d (error %q), want SUCCEEDED 2 on attempt 2", got.Status, got.Result, got.Attempt, got.Error)
	}
	if names := got.StepNames(); !slices.Equal(names, []string{"children:kids"}) {
		t.Errorf("parent steps %v, want [children:kids]: the retry's run wrote the outcomes it had read", names)
	}
}

// TestRunAfterTheDeliveryBound (issue 35, point 6): Run stopped by its
// bound of deliveries leaves the message it had in hand on the queue, so a
// Run with a higher bound delivers it and the workflow ends as it would
// have in one Run (it used to hide a child's token for the queue's
// visibility timeout, and the second Run returned nil with the parent
// waiting for a child that did not exist).
func TestRunAfterTheDeliveryBound(t *testing.T) {
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "parent", func(ctx context.Context, task *leasehold.Task[struct{}]) (int, error) {
		kids, err := workflow.All(ctx, "kids", workflow.Child{Kind: "kid"}, workflow.Child{Kind: "kid"}, workflow.Child{Kind: "kid"})
		if err != nil {
			return 0, err
		}
		return len(kids), nil
	})
	leasehold.Handle(hs, "kid", func(context.Context, *leasehold.Task[struct{}]) (int, error) { return 1, nil })
	for bound := 1; bound <= 4; bound++ {
		t.Run(fmt.Sprint(bound), func(t *testing.T) {
			env := leaseholdtest.New(t, hs)
			env.SetMaxDeliveries(bound)
			id := mustEnqueue(t, env, leasehold.Submission{Kind: "parent"})
			begin := env.Clock().Now()
			if err := env.Run(); !errors.Is(err, leaseholdtest.ErrTooManyDeliveries) {
				t.Fatalf("Run with a bound of %d: %v, want ErrTooManyDeliveries", bound, err)
			}
			env.SetMaxDeliveries(100)
			mustRun(t, env)
			got := mustTask(t, env, id)
			if got.Status != leasehold.StatusSucceeded || string(got.Result) != "3" {
				t.Errorf("parent %s %s (error %q), want SUCCEEDED 3", got.Status, got.Result, got.Error)
			}
			if d := env.Clock().Since(begin); d > time.Minute {
				t.Errorf("the two Runs took %s of fake time, want no wait for a hidden message", d)
			}
		})
	}
}
