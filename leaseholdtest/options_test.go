package leaseholdtest_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/settings"
)

// The Env runs its handlers (not the WorkerConfig's) through the worker's
// middleware (Worker takes it from the program's WorkerConfig), the first
// outermost, on every attempt, and a middleware's error steers the task
// as a handler's would.
func TestEnvRunsTheMiddleware(t *testing.T) {
	t.Parallel()
	var (
		mu   sync.Mutex
		seen []string
	)
	note := func(name string) leasehold.Middleware {
		return func(ctx context.Context, r leasehold.HandlerRun, next func(context.Context) ([]byte, error)) ([]byte, error) {
			mu.Lock()
			seen = append(seen, name+" "+r.Kind+" "+r.ID+" "+string(rune('0'+r.Attempt)))
			mu.Unlock()
			return next(ctx)
		}
	}
	refuse := func(ctx context.Context, r leasehold.HandlerRun, next func(context.Context) ([]byte, error)) ([]byte, error) {
		if r.Kind == "forbidden" {
			return nil, leasehold.Fail(errors.New("refused by policy"))
		}
		return next(ctx)
	}
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "flaky", func(_ context.Context, task *leasehold.Task[int]) (int, error) {
		if task.Attempt == 1 {
			return 0, errors.New("first attempt fails")
		}
		return task.Payload, nil
	})
	ran := false
	leasehold.Handle(hs, "forbidden", func(context.Context, *leasehold.Task[int]) (int, error) {
		ran = true
		return 0, nil
	})
	// The program's whole WorkerConfig: Worker takes its middleware, and
	// leaves the Env its own queues and handlers.
	prog := leasehold.WorkerConfig{
		QueueURL:   "https://sqs.us-east-1.amazonaws.com/123456789012/elsewhere",
		Handlers:   leasehold.NewHandlers(),
		Middleware: []leasehold.Middleware{note("outer"), note("inner"), refuse},
	}
	env := leaseholdtest.New(t, hs, leaseholdtest.Worker(prog))
	mustEnqueue(t, env, leasehold.Submission{Kind: "flaky", Payload: 7, ID: "f"})
	mustEnqueue(t, env, leasehold.Submission{Kind: "forbidden", Payload: 1, ID: "x"})
	mustRun(t, env)

	leaseholdtest.RequireState(t, env, "f", leasehold.StatusSucceeded)
	got := leaseholdtest.RequireState(t, env, "x", leasehold.StatusFailed)
	if ran || !strings.Contains(got.Error, "refused by policy") {
		t.Errorf("the forbidden task ran (%t) or failed with %q, want the middleware's refusal", ran, got.Error)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"outer flaky f 1", "inner flaky f 1", "outer forbidden x 1", "inner forbidden x 1", "outer flaky f 2", "inner flaky f 2"}
	if !slices.Equal(seen, want) {
		t.Errorf("the middleware saw %q, want %q", seen, want)
	}
}

// A queue's rate limit holds tasks back on the fake clock: one start per
// minute on the limited queue, none of the waits using an attempt, and
// the default queue unlimited.
func TestEnvHonoursRateLimits(t *testing.T) {
	t.Parallel()
	var (
		env    *leaseholdtest.Env
		mu     sync.Mutex
		starts = map[string]time.Time{}
	)
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "report", func(_ context.Context, task *leasehold.Task[int]) (int, error) {
		mu.Lock()
		starts[task.ID] = env.Clock().Now()
		mu.Unlock()
		return 0, nil
	})
	env = leaseholdtest.New(t, hs, leaseholdtest.Worker(leasehold.WorkerConfig{RateLimits: map[string]settings.RateLimit{"reports": {Starts: 1, Per: time.Minute}}}))
	begin := env.Clock().Now()
	limited := []string{"r1", "r2", "r3"}
	for _, id := range limited {
		mustEnqueue(t, env, leasehold.Submission{Kind: "report", Payload: 0, ID: id, Queue: "reports"})
	}
	mustEnqueue(t, env, leasehold.Submission{Kind: "report", Payload: 0, ID: "free"})
	mustRun(t, env)

	for _, id := range append(limited, "free") {
		if s := leaseholdtest.RequireState(t, env, id, leasehold.StatusSucceeded); s.Attempt != 1 {
			t.Errorf("task %s took %d attempts, want 1: a held token uses none", id, s.Attempt)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	windows := map[time.Time]string{}
	for _, id := range limited {
		w := starts[id].Truncate(time.Minute)
		if other, taken := windows[w]; taken {
			t.Errorf("tasks %s and %s both started in the minute from %s, over the limit of 1", other, id, w)
		}
		windows[w] = id
	}
	if !starts["free"].Equal(begin) {
		t.Errorf("the unlimited task started at %s, want at once (%s)", starts["free"], begin)
	}
}

// A kind whose only slot is taken elsewhere waits, without using an
// attempt, until that slot's holder's time runs out; then it runs.
func TestEnvHonoursKindConcurrency(t *testing.T) {
	t.Parallel()
	var (
		env   *leaseholdtest.Env
		ranAt time.Time
	)
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "resize", func(context.Context, *leasehold.Task[int]) (int, error) {
		ranAt = env.Clock().Now()
		return 0, nil
	})
	env = leaseholdtest.New(t, hs, leaseholdtest.Worker(leasehold.WorkerConfig{KindConcurrency: map[string]int{"resize": 1}}))
	until := env.Clock().Now().Add(10 * time.Minute)
	if ok, err := env.TakeSlot("resize", "elsewhere", 1, until); !ok || err != nil {
		t.Fatalf("take the slot: %t %v", ok, err)
	}
	mustEnqueue(t, env, leasehold.Submission{Kind: "resize", Payload: 1, ID: "r"})
	mustRun(t, env)

	s := leaseholdtest.RequireState(t, env, "r", leasehold.StatusSucceeded)
	if ranAt.Before(until) {
		t.Errorf("the handler ran at %s, while the kind's one slot was taken until %s", ranAt, until)
	}
	if s.Attempt != 1 || s.Snoozes == 0 {
		t.Errorf("attempt %d, %d snoozes: want 1 attempt and the waits for the slot counted as snoozes", s.Attempt, s.Snoozes)
	}

	// A bound the worker refuses fails New, as NewWorker would.
	ft := &fakeT{TB: t}
	if env := leaseholdtest.New(ft, hs, leaseholdtest.Worker(leasehold.WorkerConfig{KindConcurrency: map[string]int{"resize": 0}})); env != nil || !ft.failed() {
		t.Errorf("New with a kind concurrency of 0 did not fail: %q", ft.messages())
	}
}

// With a TracerProvider the Env's worker records an attempt span and a
// "leasehold.run" span for each delivery, as a deployed worker does.
func TestEnvTracesWithTheTracerProvider(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "traced", func(context.Context, *leasehold.Task[int]) (int, error) { return 1, nil })
	env := leaseholdtest.New(t, hs, leaseholdtest.Worker(leasehold.WorkerConfig{TracerProvider: tp}))
	mustEnqueue(t, env, leasehold.Submission{Kind: "traced", Payload: 1, ID: "t1"})
	mustRun(t, env)
	leaseholdtest.RequireState(t, env, "t1", leasehold.StatusSucceeded)

	var names []string
	var run sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		names = append(names, s.Name())
		if s.Name() == "leasehold.run" {
			run = s
		}
	}
	if run == nil || len(names) < 2 {
		t.Fatalf("spans %q, want an attempt span and leasehold.run", names)
	}
	attrs := map[string]string{}
	for _, a := range run.Attributes() {
		attrs[string(a.Key)] = a.Value.String()
	}
	if attrs["leasehold.task.kind"] != "traced" || attrs["leasehold.task.id"] != "t1" {
		t.Errorf("leasehold.run's attributes %v, want the task's kind and id", attrs)
	}
	if !run.Parent().IsValid() {
		t.Errorf("leasehold.run has no parent, want the attempt span")
	}

	// The Env's Client is traced too, and its token carries the trace to
	// the worker: the enqueue and the run are one trace.
	if _, err := env.Client().Enqueue(t.Context(), leasehold.Submission{Kind: "traced", Payload: 2, ID: "t2"}); err != nil {
		t.Fatal(err)
	}
	mustRun(t, env)
	var enqueue, run2 sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		for _, a := range s.Attributes() {
			if string(a.Key) == "leasehold.task.id" && a.Value.String() == "t2" {
				switch s.Name() {
				case "leasehold.enqueue":
					enqueue = s
				case "leasehold.run":
					run2 = s
				}
			}
		}
	}
	if enqueue == nil || run2 == nil {
		t.Fatalf("no leasehold.enqueue or leasehold.run span of t2 among %d spans", len(rec.Ended()))
	}
	if enqueue.SpanContext().TraceID() != run2.SpanContext().TraceID() {
		t.Errorf("the client's enqueue (trace %s) and the run (trace %s) are not one trace", enqueue.SpanContext().TraceID(), run2.SpanContext().TraceID())
	}
}
