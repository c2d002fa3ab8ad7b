package leasehold

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/leasehold/leasehold/internal/durable"
	"github.com/leasehold/leasehold/internal/handlerhook"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lifecycle"
	"github.com/leasehold/leasehold/internal/tracing"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Task is what a handler sees of the task it runs.
type Task[P any] struct {
	ID   string
	Kind string
	// Attempt counts from 1.
	Attempt     int
	MaxAttempts int
	// Fence is the fencing token of this attempt: it grows with every
	// claim. Make downstream writes conditional on it (store it and refuse
	// writes carrying a smaller one) and a worker that lost its lease can
	// never overwrite a newer attempt's work.
	Fence int64
	// LeaseUntil is when the lease of this attempt expires as of the claim.
	// The worker renews it while the handler runs, so the task is not taken
	// over at this time unless renewals fail; but work that must be done
	// under one unrenewed lease (a call to an outside system that checks
	// the deadline) can pass it on. Once the lease is lost the handler's
	// context ends with ErrLeaseLost.
	LeaseUntil time.Time
	Payload    P
	CreatedAt  time.Time
}

// IdempotencyKey is a key for an outside system that must apply this
// attempt's effect at most once: the task id and the fence. Every retry and
// every takeover of the task has a new fence, so use the task ID alone for
// an effect that must happen once per task whatever the attempt.
func (t *Task[P]) IdempotencyKey() string { return fmt.Sprintf("%s/%d", t.ID, t.Fence) }

// HandlerFunc runs one attempt of a task of kind P and returns its result.
// Its error steers the task: nil succeeds; Snooze, Fail and Cancel do what
// they say; any other error is retried with backoff until max attempts.
type HandlerFunc[P, R any] func(ctx context.Context, t *Task[P]) (R, error)

// Handlers maps task kinds to handlers. Build one with NewHandlers and Handle.
type Handlers struct {
	mu    sync.RWMutex
	kinds map[string]lifecycle.Handler
}

// NewHandlers returns an empty registry.
func NewHandlers() *Handlers { return &Handlers{kinds: map[string]lifecycle.Handler{}} }

// Handle registers h for kind. Payloads are decoded from JSON into P, and
// results encoded to JSON. It panics if kind is empty or taken, as a
// programming error at start-up.
func Handle[P, R any](hs *Handlers, kind string, h HandlerFunc[P, R]) {
	if kind == "" || len(kind) > lease.MaxKindBytes {
		panic(fmt.Sprintf("leasehold: invalid task kind %q", kind))
	}
	if h == nil {
		panic("leasehold: nil handler for kind " + kind)
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if _, dup := hs.kinds[kind]; dup {
		panic("leasehold: kind registered twice: " + kind)
	}
	hs.kinds[kind] = func(ctx context.Context, t lease.Task) ([]byte, error) {
		task := &Task[P]{
			ID: t.ID, Kind: t.Kind, Attempt: t.Attempt, MaxAttempts: t.MaxAttempts,
			Fence: t.Fence, LeaseUntil: t.LeaseUntil, CreatedAt: t.CreatedAt,
		}
		// An absent payload is JSON null, which leaves P at its zero value
		// (a nil pointer, map or slice): a handler that must tell "no
		// payload" from an empty one takes a pointer type.
		payload := t.Payload
		if len(payload) == 0 {
			payload = []byte("null")
		}
		if err := json.Unmarshal(payload, &task.Payload); err != nil {
			// The same bytes will never decode: do not retry.
			return nil, Fail(fmt.Errorf("payload does not decode into %T: %w", task.Payload, err))
		}
		r, err := h(ctx, task)
		if err != nil {
			return nil, err
		}
		out, err := json.Marshal(r)
		if err != nil {
			return nil, Fail(fmt.Errorf("result does not encode as JSON: %w", err))
		}
		return out, nil
	}
}

// Kinds lists the registered kinds.
func (hs *Handlers) Kinds() []string {
	hs.mu.RLock()
	defer hs.mu.RUnlock()
	out := make([]string, 0, len(hs.kinds))
	for k := range hs.kinds {
		out = append(out, k)
	}
	return out
}

func (hs *Handlers) lookup(kind string) (lifecycle.Handler, bool) {
	hs.mu.RLock()
	defer hs.mu.RUnlock()
	h, ok := hs.kinds[kind]
	return h, ok
}

// Middleware wraps every handler run of a worker (WorkerConfig.Middleware,
// the first outermost). It sees the run and calls next to run the rest of
// the chain and the handler; the error it returns is the run's: nil, or an
// error that steers the task as a handler's does (Fail, Cancel, Snooze, or
// any other for a retry). A middleware that does not call next skips the
// handler: the run then succeeds with a null result unless it returns an
// error. A panic in a middleware is a panic of the run, recorded as the
// handler's would be. Use it for what every kind needs: logging, metrics,
// tracing, authorisation, a policy for some errors.
//
//	func logRuns(ctx context.Context, r leasehold.HandlerRun, next func(context.Context) error) error {
//		start := time.Now()
//		err := next(ctx)
//		slog.InfoContext(ctx, "run", "kind", r.Kind, "id", r.ID, "attempt", r.Attempt, "took", time.Since(start), "error", err)
//		return err
//	}
type Middleware func(ctx context.Context, r HandlerRun, next func(context.Context) error) error

// HandlerRun is one run of a handler, as a Middleware sees it.
type HandlerRun struct {
	Kind, ID             string
	Attempt, MaxAttempts int
	// Fence is the attempt's fencing token; LeaseUntil its lease's expiry
	// when the run started.
	Fence      int64
	LeaseUntil time.Time
}

// tracingMiddleware is the Middleware WorkerConfig.TracerProvider installs,
// outermost: it runs each handler under an OpenTelemetry span
// "leasehold.run" from tp, a child of the attempt span, with the run's
// kind, id, attempt and fence as attributes (never its payload), and an
// error status when the run fails (a wait or a snooze is no failure). The
// handler's context carries the span, so the spans of its own calls nest
// under it. See docs/observability.md.
func tracingMiddleware(tp trace.TracerProvider) Middleware {
	tracer := tp.Tracer(tracing.ScopeName)
	return func(ctx context.Context, r HandlerRun, next func(context.Context) error) error {
		ctx, span := tracer.Start(ctx, "leasehold.run", trace.WithAttributes(
			attribute.String(tracing.AttrKind, r.Kind), attribute.String(tracing.AttrID, r.ID),
			attribute.Int(tracing.AttrAttempt, r.Attempt), attribute.Int64(tracing.AttrFence, r.Fence)))
		var err error
		defer func() { durable.EndRunSpan(span, err) }() // a panic ends it too
		err = next(ctx)
		return err
	}
}

// wrap returns h run through mws, the first outermost.
func wrap(h lifecycle.Handler, mws []Middleware) lifecycle.Handler {
	return func(ctx context.Context, t lease.Task) ([]byte, error) {
		r := HandlerRun{Kind: t.Kind, ID: t.ID, Attempt: t.Attempt, MaxAttempts: t.MaxAttempts, Fence: t.Fence, LeaseUntil: t.LeaseUntil}
		var out []byte
		next := func(ctx context.Context) error {
			var err error
			out, err = h(ctx, t)
			return err
		}
		for i := len(mws) - 1; i >= 0; i-- {
			mw, inner := mws[i], next
			next = func(ctx context.Context) error { return mw(ctx, r, inner) }
		}
		if err := next(ctx); err != nil {
			return nil, err
		}
		return out, nil
	}
}

// leaseholdtest runs registered handlers through lookup (internal/handlerhook).
func init() {
	handlerhook.Lookup = func(hs any, kind string) (lifecycle.Handler, bool) {
		return hs.(*Handlers).lookup(kind)
	}
}
