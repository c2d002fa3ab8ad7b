package leasehold_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/token"
	"github.com/leasehold/leasehold/workflow"
)

// A race of a callback against a timer on the stack, through the real
// worker, client, queues and tables: one approval answered before its
// timer, which wins; one left alone, whose short timer wins as an outcome
// (same attempt, no failure) when the worker ends the callback wait at its
// deadline. Each decision is recorded once, and a late answer is refused.
func TestRaceOnTheStack(t *testing.T) {
	t.Parallel()
	e := setupStack(t)
	c := newClientOn(t, e)
	const timer = 6 * time.Second
	var mu sync.Mutex
	runs := map[string]int{}
	tokens := make(chan string, 8)
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "approve", func(ctx context.Context, task *leasehold.Task[string]) (string, error) {
		ok := workflow.CallbackAsync[string](ctx, "approval", time.Hour, func(ctx context.Context, tok string) error {
			mu.Lock()
			runs[task.ID+" submit"]++
			mu.Unlock()
			tokens <- tok
			return nil
		})
		first, err := workflow.Race(ctx, "decision", ok, workflow.SleepAsync(ctx, timer))
		if err != nil {
			return "", err
		}
		if first == 1 {
			return "timed out", nil
		}
		return ok.Get(ctx)
	})
	w := e.worker(t, leasehold.WorkerConfig{Handlers: hs})
	ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(3*time.Minute))
	defer cancel()
	for _, id := range []string{"answered", "unanswered"} {
		if _, err := c.Enqueue(ctx, leasehold.Submission{Kind: "approve", Payload: id, ID: id, MaxAttempts: 1}); err != nil {
			t.Fatal(err)
		}
	}
	byTask := map[string]string{}
	e.pump(t, w, 60*time.Second, func() bool {
		for len(tokens) > 0 {
			tok := <-tokens
			cb, err := token.ParseCallback(tok)
			if err != nil {
				t.Fatal(err)
			}
			byTask[cb.ID] = tok
		}
		return len(byTask) == 2 && e.status(t, "answered") == lease.StatusWaiting
	})
	if info, err := c.CompleteCallback(ctx, byTask["answered"], "ops"); err != nil || info.Status != leasehold.StatusPending {
		t.Fatalf("CompleteCallback: %+v, %v; want the task PENDING to resume", info, err)
	}
	e.pump(t, w, 90*time.Second, func() bool {
		return e.status(t, "answered") == lease.StatusSucceeded && e.status(t, "unanswered") == lease.StatusSucceeded
	})
	for id, want := range map[string]string{"answered": `"ops"`, "unanswered": `"timed out"`} {
		got := e.get(t, id)
		names := make([]string, len(got.Steps))
		for i, s := range got.Steps {
			names[i] = s.Name
		}
		if string(got.Result) != want || got.Attempt != 1 || len(names) != 3 || names[1] != "callback:approval" || names[2] != "race:decision" {
			t.Errorf("%s: %s in attempt %d, steps %v; want %s in attempt 1 with sleep#1, callback:approval, race:decision", id, got.Result, got.Attempt, names, want)
		}
	}
	if _, err := c.CompleteCallback(ctx, byTask["unanswered"], "late"); !errors.Is(err, leasehold.ErrBadCallback) {
		t.Errorf("a late answer: %v, want ErrBadCallback", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if runs["answered submit"] != 1 || runs["unanswered submit"] != 1 {
		t.Errorf("submits %v, want one per task", runs)
	}
}

// Branches and a child context on the stack: two branches checkpoint at
// the same time into one task's item, each in its own space, sleep at
// once, and end; a child context is recorded as one unit. Each step runs
// once, in attempt 1.
func TestBranchesOnTheStack(t *testing.T) {
	t.Parallel()
	e := setupStack(t)
	c := newClientOn(t, e)
	var mu sync.Mutex
	runs := map[string]int{}
	count := func(name string) func(context.Context) (string, error) {
		return func(context.Context) (string, error) {
			mu.Lock()
			defer mu.Unlock()
			runs[name]++
			return name, nil
		}
	}
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "branches", func(ctx context.Context, _ *leasehold.Task[string]) (string, error) {
		branch := func(name string, nap time.Duration) func(context.Context) (string, error) {
			return func(ctx context.Context) (string, error) {
				if _, err := workflow.Step(ctx, "first", count(name+" first")); err != nil {
					return "", err
				}
				if err := workflow.Sleep(ctx, nap); err != nil {
					return "", err
				}
				return workflow.Step(ctx, "second", count(name))
			}
		}
		a, b := workflow.Go(ctx, "a", branch("a", 2*time.Second)), workflow.Go(ctx, "b", branch("b", 4*time.Second))
		if err := workflow.AwaitAll(ctx, "ab", a, b); err != nil {
			return "", err
		}
		va, _ := a.Get(ctx)
		vb, _ := b.Get(ctx)
		vc, err := workflow.RunInChildContext(ctx, "c", func(ctx context.Context) (string, error) {
			return workflow.Step(ctx, "only", count("c"))
		})
		if err != nil {
			return "", err
		}
		return va + vb + vc, nil
	})
	w := e.worker(t, leasehold.WorkerConfig{Handlers: hs})
	ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(2*time.Minute))
	defer cancel()
	if _, err := c.Enqueue(ctx, leasehold.Submission{Kind: "branches", ID: "branchy", MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	e.pump(t, w, 90*time.Second, func() bool { return e.status(t, "branchy") == lease.StatusSucceeded })
	got := e.get(t, "branchy")
	names := map[string]bool{}
	for _, s := range got.Steps {
		names[s.Name] = true
	}
	if string(got.Result) != `"abc"` || got.Attempt != 1 {
		t.Errorf("task: %s in attempt %d, want \"abc\" in attempt 1", got.Result, got.Attempt)
	}
	for _, want := range []string{"@a/first", "@a/sleep#1", "@a/second", "@a/result", "@b/first", "@b/second", "@b/result", "all:ab", "@c/only", "context:c"} {
		if !names[want] {
			t.Errorf("steps %v lack %q", names, want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, name := range []string{"a first", "a", "b first", "b", "c"} {
		if runs[name] != 1 {
			t.Errorf("step %s ran %d times, want once (runs %v)", name, runs[name], runs)
		}
	}
}
