package wiring

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold/internal/durable"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lifecycle"
	"github.com/leasehold/leasehold/internal/replay"
	"github.com/leasehold/leasehold/internal/tracing"
)

// Handlers maps task kinds to handlers. Build one with leasehold.NewHandlers
// and leasehold.Handle.
type Handlers struct {
	mu    sync.RWMutex
	kinds map[string]lifecycle.Handler
}

// NewHandlers returns an empty registry (leasehold.NewHandlers).
func NewHandlers() *Handlers { return &Handlers{kinds: map[string]lifecycle.Handler{}} }

// Register adds h, a handler already adapted to the executor's form, for
// kind; leasehold.Handle adapts and checks. It reports false when kind is
// taken, and then registers nothing.
func Register(hs *Handlers, kind string, h lifecycle.Handler) bool {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if _, dup := hs.kinds[kind]; dup {
		return false
	}
	hs.kinds[kind] = h
	return true
}

// Lookup returns the adapted handler registered for kind: the one the
// worker runs (payload decoding, result encoding), without middleware.
func Lookup(hs *Handlers, kind string) (lifecycle.Handler, bool) { return hs.lookup(kind) }

func (hs *Handlers) lookup(kind string) (lifecycle.Handler, bool) {
	hs.mu.RLock()
	defer hs.mu.RUnlock()
	h, ok := hs.kinds[kind]
	return h, ok
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

// Middleware wraps every handler run of a worker; its contract is
// documented on its alias, leasehold.Middleware, where users read it.
type Middleware func(ctx context.Context, r HandlerRun, next func(context.Context) ([]byte, error)) ([]byte, error)

// HandlerRun is one run of a handler, as a Middleware sees it; documented
// on its alias, leasehold.HandlerRun.
type HandlerRun struct {
	Kind, ID             string
	Attempt, MaxAttempts int
	// Fence is the attempt's fencing token; LeaseUntil its lease's expiry
	// when the run started.
	Fence      int64
	LeaseUntil time.Time
	// Payload is the task's payload, the JSON document as stored (nil for
	// none): read it, never change it.
	Payload json.RawMessage
	// Metadata is the task's metadata (leasehold.Submission.Metadata, the client's
	// EnqueueMiddleware, inherited by a workflow's children); nil for
	// none: read it, never change it.
	Metadata map[string]string
}

// tracingMiddleware is the Middleware WorkerConfig.TracerProvider installs,
// outermost: it runs each handler under an OpenTelemetry span
// "leasehold.run" from tp, a child of the attempt span, with the run's
// kind, id, attempt and fence as attributes (never its payload or
// metadata), and an error status when the run fails (a wait or a snooze
// is no failure). The handler's context carries the span, so the spans of
// its own calls nest under it. See docs/observability.md.
func tracingMiddleware(tp trace.TracerProvider) Middleware {
	tracer := tp.Tracer(tracing.ScopeName)
	return func(ctx context.Context, r HandlerRun, next func(context.Context) ([]byte, error)) ([]byte, error) {
		ctx, span := tracer.Start(ctx, "leasehold.run", trace.WithAttributes(
			attribute.String(tracing.AttrKind, r.Kind), attribute.String(tracing.AttrID, r.ID),
			attribute.Int(tracing.AttrAttempt, r.Attempt), attribute.Int64(tracing.AttrFence, r.Fence)))
		var err error
		defer func() { durable.EndRunSpan(span, err) }() // a panic ends it too
		var out []byte
		out, err = next(ctx)
		return out, err
	}
}

// wrap returns h run through mws, the first outermost.
func wrap(h lifecycle.Handler, mws []Middleware) lifecycle.Handler {
	return func(ctx context.Context, t lease.Task) ([]byte, error) {
		r := HandlerRun{Kind: t.Kind, ID: t.ID, Attempt: t.Attempt, MaxAttempts: t.MaxAttempts, Fence: t.Fence, LeaseUntil: t.LeaseUntil,
			Payload: t.Payload, Metadata: t.Metadata}
		next := func(ctx context.Context) ([]byte, error) { return h(ctx, t) }
		for i := len(mws) - 1; i >= 0; i-- {
			mw, inner := mws[i], next
			next = func(ctx context.Context) ([]byte, error) { return mw(ctx, r, inner) }
		}
		out, err := next(ctx)
		if err != nil {
			return nil, err
		}
		return out, nil
	}
}

// Replay replays history, a task's history as `leasehold replay --out`
// writes it (a file of JSON), through the handler registered for its
// kind, with nothing run beyond what the history records: no step's
// function, no read, no write. It returns one line saying what the replay
// found, and an error (with the same line) when the code diverges from
// the history, as a worker would hold the task for, or fails in the
// replay, or when history is not a history this build reads. Run it
// before a deploy over the histories of the tasks in flight (docs/deploy.md;
// leaseholdtest.Replay does it in a test).
func (hs *Handlers) Replay(ctx context.Context, history []byte) (string, error) {
	h, err := replay.Decode(history)
	if err != nil {
		return "", err
	}
	r := replay.Run(ctx, hs.lookup, h)
	if !r.OK() {
		return r.String(), errors.New(r.String())
	}
	return r.String(), nil
}
