package leasehold

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/wiring"
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

// Handlers maps task kinds to handlers. Build one with NewHandlers and
// Handle. It is defined in internal/wiring, so that package leaseholdtest
// runs a registered handler as the worker does.
type Handlers = wiring.Handlers

// NewHandlers returns an empty registry.
func NewHandlers() *Handlers { return wiring.NewHandlers() }

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
	adapted := func(ctx context.Context, t lease.Task) ([]byte, error) {
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
	if !wiring.Register(hs, kind, adapted) {
		panic("leasehold: kind registered twice: " + kind)
	}
}

// Middleware wraps every handler run of a worker (WorkerConfig.Middleware,
// the first outermost): the worker side of leasehold's one extension seam
// (EnqueueMiddleware is the client side). It sees the run (kind, id,
// attempt, payload, metadata) and calls next to run the rest of the chain
// and the handler; what it returns is the run's result and error: next's,
// or its own. A nil error with a result records that result; an error
// steers the task as a handler's does (Fail, Cancel, Snooze, or any other
// for a retry). A middleware that does not call next skips the handler. A
// panic in a middleware is a panic of the run, recorded as the handler's
// would be. Use it for what every kind needs: logging, metrics, tracing,
// authorisation, reading metadata set at enqueue (a tenant, a request
// id), a policy for some errors.
//
//	func logRuns(ctx context.Context, r leasehold.HandlerRun, next func(context.Context) ([]byte, error)) ([]byte, error) {
//		start := time.Now()
//		result, err := next(ctx)
//		slog.InfoContext(ctx, "run", "kind", r.Kind, "id", r.ID, "attempt", r.Attempt,
//			"tenant", r.Metadata["tenant"], "took", time.Since(start), "error", err)
//		return result, err
//	}
type Middleware = wiring.Middleware

// HandlerRun is one run of a handler, as a Middleware sees it: its kind,
// id, attempt, max attempts, fence and lease expiry, and the task's
// payload and metadata, which are the task's own: read them, never change
// them.
type HandlerRun = wiring.HandlerRun

// EnqueueMiddleware wraps every Enqueue and EnqueueMany of a client
// (ClientConfig.Middleware, the first outermost). It sees the submissions
// before they are checked and stored, and may change them: they are the
// client's copies (the caller's slice and Metadata maps are never
// written), so it may set subs[i].Metadata, say, to stamp every task with
// a tenant or a request id. next enqueues them and returns the results,
// one per submission, which the middleware returns (or its own error).
//
//	func stampTenant(ctx context.Context, subs []leasehold.Submission, next func(context.Context) ([]leasehold.EnqueueResult, error)) ([]leasehold.EnqueueResult, error) {
//		for i := range subs {
//			if subs[i].Metadata == nil {
//				subs[i].Metadata = map[string]string{}
//			}
//			subs[i].Metadata["tenant"] = tenantOf(ctx)
//		}
//		return next(ctx)
//	}
type EnqueueMiddleware func(ctx context.Context, subs []Submission, next func(context.Context) ([]EnqueueResult, error)) ([]EnqueueResult, error)
