package leasehold_test

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/leasemem"
	"github.com/leasehold/leasehold/workflow"
)

// Metadata set at enqueue (by Submission.Metadata and by the client's
// middleware) reaches the worker's middleware on every run, is stored on
// the task, and passes on to the children a workflow spawns; the caller's
// map is never written, and metadata outside the bounds is refused.
func TestMetadataTravelsFromEnqueueToRunAndChildren(t *testing.T) {
	t.Parallel()
	store := leasemem.New(lease.Options{LeaseDuration: 30 * time.Second})
	q := &memQueue{}
	var (
		mu   sync.Mutex
		seen = map[string]map[string]string{}
	)
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "kid", func(context.Context, *leasehold.Task[int]) (int, error) { return 1, nil })
	leasehold.Handle(hs, "fan", func(ctx context.Context, _ *leasehold.Task[int]) (int, error) {
		_, err := workflow.All(ctx, "kids", workflow.Child{Kind: "kid"}, workflow.Child{Kind: "kid"})
		return 0, err
	})
	record := func(ctx context.Context, r leasehold.HandlerRun, next func(context.Context) ([]byte, error)) ([]byte, error) {
		mu.Lock()
		seen[r.ID] = maps.Clone(r.Metadata)
		mu.Unlock()
		return next(ctx)
	}
	w, err := leasehold.NewWorkerOn(store, q, leasehold.WorkerConfig{QueueURL: traceQueueURL, Handlers: hs,
		Logger: slog.New(slog.DiscardHandler), Owner: "test", Middleware: []leasehold.Middleware{record}})
	if err != nil {
		t.Fatal(err)
	}
	stamp := func(ctx context.Context, subs []leasehold.Submission, next func(context.Context) ([]leasehold.EnqueueResult, error)) ([]leasehold.EnqueueResult, error) {
		for i := range subs {
			if subs[i].Metadata == nil {
				subs[i].Metadata = map[string]string{}
			}
			subs[i].Metadata["tenant"] = "acme"
		}
		return next(ctx)
	}
	c := leasehold.NewClientOn(store, q, traceQueueURL, nil, stamp)

	mine := map[string]string{"request": "r-1"}
	if _, err := c.Enqueue(t.Context(), leasehold.Submission{Kind: "fan", Payload: 0, ID: "fan-1", Metadata: mine}); err != nil {
		t.Fatal(err)
	}
	subs := []leasehold.Submission{{Kind: "kid", ID: "solo", Metadata: mine}}
	if res, err := c.EnqueueMany(t.Context(), subs); err != nil || res[0].Err != nil {
		t.Fatalf("EnqueueMany: %v, %+v", err, res)
	}
	if len(mine) != 1 || subs[0].Metadata["tenant"] != "" {
		t.Fatalf("the caller's metadata was written: %v, %v", mine, subs[0].Metadata)
	}
	drain(t, w, q)

	want := map[string]string{"request": "r-1", "tenant": "acme"}
	for _, id := range []string{"fan-1", "fan-1/kids/0", "fan-1/kids/1", "solo"} {
		mu.Lock()
		got, ran := seen[id]
		mu.Unlock()
		if !ran {
			t.Errorf("%s did not run (ran: %v)", id, seen)
			continue
		}
		if !maps.Equal(got, want) {
			t.Errorf("the middleware saw %s's metadata %v, want %v", id, got, want)
		}
		info, err := c.Get(t.Context(), id)
		if err != nil || !maps.Equal(info.Metadata, want) {
			t.Errorf("Get(%s).Metadata = %v, %v; want %v", id, info.Metadata, err, want)
		}
	}

	for _, bad := range []map[string]string{{"a b": "v"}, {"k": "line\nbreak"}} {
		if _, err := c.Enqueue(t.Context(), leasehold.Submission{Kind: "kid", Payload: 0, Metadata: bad}); !errors.Is(err, leasehold.ErrInvalid) {
			t.Errorf("Enqueue with metadata %q: %v, want ErrInvalid", bad, err)
		}
	}
}

// The trace context is ordinary metadata: a payload that holds "tp" and
// "ts" keys (the trace fields of the token codec before metadata, which
// dropped the trace of such a payload) keeps its trace from the enqueue
// span to the worker's attempt.
func TestTraceSurvivesATraceLikePayload(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	store := leasemem.New(lease.Options{LeaseDuration: 30 * time.Second})
	q := &memQueue{}
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "echo", func(_ context.Context, task *leasehold.Task[map[string]string]) (string, error) {
		return task.Payload["tp"], nil
	})
	w, err := leasehold.NewWorkerOn(store, q, leasehold.WorkerConfig{QueueURL: traceQueueURL, Handlers: hs,
		Logger: slog.New(slog.DiscardHandler), Owner: "test", TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	c := leasehold.NewClientOn(store, q, traceQueueURL, tp)
	if _, err := c.Enqueue(t.Context(), leasehold.Submission{
		Kind:    "echo",
		Payload: map[string]string{"tp": "user data", "ts": "more"},
		ID:      "e-1",
	}); err != nil {
		t.Fatal(err)
	}
	drain(t, w, q)
	if got, err := c.Get(t.Context(), "e-1"); err != nil || string(got.Result) != `"user data"` {
		t.Fatalf("e-1: %+v, %v", got, err)
	}
	var enqueue, attempt sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		switch s.Name() {
		case "leasehold.enqueue":
			enqueue = s
		case "leasehold.attempt":
			attempt = s
		}
	}
	if enqueue == nil || attempt == nil {
		t.Fatalf("spans: enqueue %v, attempt %v", enqueue, attempt)
	}
	if attempt.Parent().SpanID() != enqueue.SpanContext().SpanID() || attempt.SpanContext().TraceID() != enqueue.SpanContext().TraceID() {
		t.Errorf("the attempt's parent is %v, want the enqueue span %v", attempt.Parent(), enqueue.SpanContext())
	}
}
