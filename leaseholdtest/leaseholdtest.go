// Package leaseholdtest runs task handlers in unit tests, without AWS. It
// has two levels.
//
// # One attempt: Run and RunKind
//
// Run registers a handler with leasehold.Handle and calls it through the
// same adapter the worker calls: the payload is encoded to JSON and decoded
// into the handler's payload type, and the result is encoded to JSON (a
// result that cannot be, or a payload that does not decode, fails as it
// would when deployed) and decoded back into R. The *leasehold.Task the
// handler sees is synthetic: its id, kind, attempt, fence and lease
// deadline are the ones you give, with defaults for those you leave zero.
// Nothing renews a lease and nothing is recorded; OutcomeOf says what the
// worker would record for the error a handler returned (retry, snooze,
// cancel, fail). RunKind does the same for a kind of a *leasehold.Handlers.
// The handler runs outside a worker, so the calls of package workflow
// (Step, Sleep, All, WaitForCallback, ...) fail in it with an
// error saying so: test workflows with an Env.
//
// # Whole workflows: Env
//
// New returns an Env: the real worker on the in-memory lease store, with
// in-memory queues and a fake clock. Enqueue tasks as a client would, let
// Run deliver their messages until nothing can make progress, and read
// each task's status, result, steps and waits with Task:
//
//	hs := leasehold.NewHandlers()
//	leasehold.Handle(hs, "invoice", invoice)    // steps, a 72h workflow.Sleep
//	leasehold.Handle(hs, "ship", stubShip)      // a child's kind, stubbed
//	env := leaseholdtest.New(t, hs)
//	id, err := env.Enqueue(leasehold.Submission{Kind: "invoice", Payload: order, MaxAttempts: 3})
//	...
//	if err := env.Run(); err != nil { // returns at once: the sleep is on the fake clock
//		t.Fatal(err)
//	}
//	got, err := env.Task(id) // got.Status, got.Result, got.StepNames(), got.Wait
//
// Children spawned with workflow.All or workflow.Map run by the handlers
// registered for their kinds; a kind with no handler is an error
// (ErrNoHandler), never a task left pending. Retries wait out their
// backoff, snoozes and sleeps their delay, on the fake clock, which Run
// advances to the next thing due. A task waiting for a callback stops
// Run; take its token with CallbackToken (or from the handler), answer it
// with CompleteCallback or FailCallback, and Run again. So does a task
// held because a run diverged from its recorded history (its handler's
// code changed under it: see workflow.Version): it is PENDING with the
// divergence as its error, and the next Run checks it again.
//
// # The configured worker, and assertions
//
// New takes the program's WorkerConfig (the Worker option), whose
// Middleware, RateLimits, KindConcurrency and TracerProvider the Env's
// executor is built from, by the code that builds a deployed worker's, so
// a test runs the worker the program configures:
//
//	cfg := app.WorkerConfig() // the program's own
//	cfg.TracerProvider = tp   // say, the OpenTelemetry SDK's tracetest recorder
//	env := leaseholdtest.New(t, hs, leaseholdtest.Worker(cfg))
//
// RequireEnqueued fails a test unless one task of a kind was made (by
// Enqueue, the Env's Client or a handler: a child, a chain's link) with a
// payload and Submission fields, and returns it; RequireState fails it
// unless a task is in a status. Their failures list what differs:
//
//	kid := leaseholdtest.RequireEnqueued(t, env, leasehold.Submission{Kind: "ship", Payload: order, MaxAttempts: 3})
//	leaseholdtest.RequireState(t, env, kid.ID, leasehold.StatusSucceeded)
package leaseholdtest

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lifecycle"
	"github.com/leasehold/leasehold/internal/wiring"
)

// Defaults of the fields of Task left zero; Task's doc says them.
const (
	defaultID          = "leaseholdtest-task"
	defaultKind        = "leaseholdtest"
	defaultMaxAttempts = 5
	defaultLease       = 20 * time.Second // LeaseUntil is this after now
)

// Task is the attempt a handler runs: what its *leasehold.Task[P] holds.
// Zero fields get defaults: ID "leaseholdtest-task", Kind "leaseholdtest",
// Attempt 1, MaxAttempts 5 (at least Attempt), Fence Attempt, LeaseUntil
// 20 seconds from now, CreatedAt now.
type Task[P any] struct {
	ID          string
	Kind        string
	Attempt     int
	MaxAttempts int
	Fence       int64
	LeaseUntil  time.Time
	CreatedAt   time.Time
	Payload     P
}

// Run runs h once on t, as the worker would run it for a task of t.Kind
// with t.Payload, and returns its result decoded from the JSON the worker
// would record, or its error. A panic in h is returned as an error, as the
// worker records it.
func Run[P, R any](ctx context.Context, h leasehold.HandlerFunc[P, R], t Task[P]) (R, error) {
	var zero R
	payload, err := json.Marshal(t.Payload)
	if err != nil {
		return zero, fmt.Errorf("leaseholdtest: encode payload: %w", err)
	}
	t = withDefaults(t)
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, t.Kind, h)
	out, err := RunKind(ctx, hs, Task[json.RawMessage]{
		ID: t.ID, Kind: t.Kind, Attempt: t.Attempt, MaxAttempts: t.MaxAttempts,
		Fence: t.Fence, LeaseUntil: t.LeaseUntil, CreatedAt: t.CreatedAt, Payload: payload,
	})
	if err != nil {
		return zero, err
	}
	var r R
	if err := json.Unmarshal(out, &r); err != nil {
		return zero, fmt.Errorf("leaseholdtest: decode result %s into %T: %w", out, r, err)
	}
	return r, nil
}

// RunKind runs the handler registered for t.Kind in handlers on the JSON
// payload t.Payload (absent: JSON null) and returns the JSON result the
// worker would record, or the handler's error. It tests what a program
// registers, such as a payload a handler's type cannot decode. A kind that
// is not registered is an error.
func RunKind(ctx context.Context, handlers *leasehold.Handlers, t Task[json.RawMessage]) (result json.RawMessage, err error) {
	t = withDefaults(t)
	h, ok := wiring.Lookup(handlers, t.Kind)
	if !ok {
		return nil, fmt.Errorf("leaseholdtest: no handler for kind %q", t.Kind)
	}
	defer func() {
		if v := recover(); v != nil {
			result, err = nil, &lifecycle.PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return h(ctx, lease.Task{
		ID: t.ID, Kind: t.Kind, Payload: t.Payload, Status: lease.StatusRunning,
		Attempt: t.Attempt, MaxAttempts: t.MaxAttempts, Fence: t.Fence,
		LeaseUntil: t.LeaseUntil, CreatedAt: t.CreatedAt,
	})
}

func withDefaults[P any](t Task[P]) Task[P] {
	now := time.Now()
	if t.ID == "" {
		t.ID = defaultID
	}
	if t.Kind == "" {
		t.Kind = defaultKind
	}
	if t.Attempt <= 0 {
		t.Attempt = 1
	}
	if t.MaxAttempts <= 0 {
		t.MaxAttempts = max(defaultMaxAttempts, t.Attempt)
	}
	if t.Fence == 0 {
		t.Fence = int64(t.Attempt)
	}
	if t.LeaseUntil.IsZero() {
		t.LeaseUntil = now.Add(defaultLease)
	}
	if t.CreatedAt.IsZero() {
		t.CreatedAt = now
	}
	return t
}
