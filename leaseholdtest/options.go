package leaseholdtest

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/claimcheck"
	"github.com/leasehold/leasehold/internal/durable"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/leasemem"
	"github.com/leasehold/leasehold/internal/lease/mapstate"
	"github.com/leasehold/leasehold/internal/lifecycle"
	"github.com/leasehold/leasehold/internal/wiring"
)

// Option configures the worker of an Env. Worker is the one leaseholdtest
// offers: it gives the Env the options of the worker a program configures.
type Option func(*leasehold.WorkerConfig)

// Worker makes the Env run the worker cfg configures: its Middleware,
// RateLimits, KindConcurrency and TracerProvider, the fields that change
// what a test can observe, act in the Env as they do in a deployed worker.
// Pass the WorkerConfig the program builds, so that a test runs the
// configured worker and not a look-alike. The other fields of cfg are not
// read: the Env's handlers are New's, and its queues, store, owner, lease,
// clock and logger are the Env's own.
//
//   - Middleware runs every handler, the first outermost.
//   - RateLimits bounds the task starts of each queue per window: a token
//     that finds its window full waits on its queue for a later one, on
//     the Env's fake clock. In an Env the default work queue is named
//     "work" (or "", as a worker's is).
//   - KindConcurrency bounds the attempts of each kind that hold a slot at
//     once: a claimed task whose kind has no free slot is released, its
//     attempt handed back, and offered again later. An Env runs one
//     attempt at a time, and an attempt gives its slot back when it ends
//     or suspends, so a bound of 1 or more holds a task back in an Env only
//     while a slot is taken from outside it; what it gives a test is the
//     worker's own check of the bounds and each attempt's taking and
//     giving back of its slot.
//   - TracerProvider traces the Env's worker and its Client: an attempt
//     span for each delivery and a "leasehold.run" span around each
//     handler run. Give it an in-memory exporter's provider (the
//     OpenTelemetry SDK's tracetest) to assert on the spans.
//
// Given twice, the last wins.
func Worker(cfg leasehold.WorkerConfig) Option {
	mws, rates, kinds, tp := slices.Clone(cfg.Middleware), maps.Clone(cfg.RateLimits), maps.Clone(cfg.KindConcurrency), cfg.TracerProvider
	return func(c *leasehold.WorkerConfig) {
		c.Middleware, c.RateLimits, c.KindConcurrency, c.TracerProvider = mws, rates, kinds, tp
	}
}

// workerConfig is the WorkerConfig of an Env's worker: the kit's queues,
// owner, lease, clock and a silent logger, then opts.
func (e *Env) workerConfig(opts []Option) leasehold.WorkerConfig {
	cfg := leasehold.WorkerConfig{
		QueueURL:           workQueueURL,
		DeadLetterQueueURL: deadLetterURL,
		Handlers:           e.handlers,
		Owner:              "leaseholdtest",
		LeaseDuration:      e.store.Options().LeaseDuration,
		Clock:              e.clock,
		Logger:             slog.New(slog.DiscardHandler),
	}
	for _, o := range opts {
		o(&cfg)
	}
	return cfg
}

// executorConfig is the executor of cfg, built by the code NewWorker
// builds a deployed worker's with (wiring.LifecycleConfig), on the Env's
// store and queues; its handlers record the callback tokens they take, for
// CallbackToken, and its observer notes unknown kinds.
func (e *Env) executorConfig(cfg leasehold.WorkerConfig) lifecycle.Config {
	lc := wiring.LifecycleConfig(cfg)
	lc.Store = e.created
	lc.SQS = e.queue
	lc.Claims = &claimcheck.Checker{Blobs: e.blobs}
	lc.Queues = names{}
	lc.Observer = observer{e}
	// A step's short delays between tries take no time: nothing moves the
	// fake clock while a handler runs.
	lc.Pause = func(ctx context.Context, _ time.Duration) error { return context.Cause(ctx) }
	handlers := lc.Handlers
	lc.Handlers = func(kind string) (lifecycle.Handler, bool) {
		h, ok := handlers(kind)
		if !ok {
			return nil, false
		}
		return func(ctx context.Context, t lease.Task) ([]byte, error) {
			defer func() {
				if tok, ok := durable.TakenCallbackToken(ctx); ok {
					e.mu.Lock()
					e.tokens[t.ID] = tok
					e.mu.Unlock()
				}
			}()
			return h(ctx, t)
		}, true
	}
	return lc
}

// createdStore is the Env's store as its worker, sweep and client use it:
// the in-memory store, noting the id of every task created, in order, for
// RequireEnqueued. Every other call (and every optional capability the
// executor finds by type assertion) is the in-memory store's own.
type createdStore struct {
	*leasemem.Store
	e *Env
}

// faults are the answers of the Env's store that tests lose
// (export_test.go), as DynamoDB's are when a response is dropped; the
// Env's mu guards them.
type faults struct {
	// replayNotify names waiters whose notifications land and whose
	// answer is lost: the caller gets the SDK's retry's (ErrNotified).
	replayNotify func(waiter string) bool
	// failNotify names waiters whose first notification of each ended
	// id lands and whose answer is lost for good: the caller gets an
	// error (lease.ErrBackend), and its next try meets the first.
	failNotify func(waiter string) bool
	failed     map[string]bool // waiter and ended id: failed once
	// replayReport: every sliding map's report lands and its answer is
	// lost: the caller gets the SDK's retry's (mapstate.ErrCounted).
	replayReport bool
	// mapSlow: every sliding map's page, group or unpark call takes this
	// long of the fake clock (a store under load).
	mapSlow time.Duration
	// mapFailEvery: every mapFailEvery-th such call fails before it
	// lands, with lease.ErrBackend (0: none).
	mapFailEvery int
	// mapCalls counts those calls; pageReads the page reads among them;
	// runSteps the pages written and slots unparked since the last
	// suspension, and mostSteps its largest value at a suspension.
	mapCalls, pageReads, runSteps, mostSteps int
}

// mapCall is the fault of a sliding map's bookkeeping call: it moves the
// fake clock by mapSlow, counts the call (a step of a parent's run when
// step is set, a page read when read is) and fails it when its turn
// comes.
func (s createdStore) mapCall(what string, step, read bool) error {
	s.e.mu.Lock()
	f := &s.e.faults
	f.mapCalls++
	if read {
		f.pageReads++
	}
	fail := f.mapFailEvery > 0 && f.mapCalls%f.mapFailEvery == 0
	if step && !fail {
		f.runSteps++
	}
	slow := f.mapSlow
	s.e.mu.Unlock()
	if slow > 0 {
		s.e.clock.Advance(slow)
	}
	if fail {
		return fmt.Errorf("%s: %w: throttled (leaseholdtest)", what, lease.ErrBackend)
	}
	return nil
}

// PutPage is the in-memory store's, under the Env's map faults.
func (s createdStore) PutPage(ctx context.Context, id string, items [][]byte, expires time.Time) error {
	if err := s.mapCall("put map page", true, false); err != nil {
		return err
	}
	return s.Store.PutPage(ctx, id, items, expires)
}

// GetPage is the in-memory store's, under the Env's map faults.
func (s createdStore) GetPage(ctx context.Context, id string) ([][]byte, error) {
	if err := s.mapCall("get map page", false, true); err != nil {
		return nil, err
	}
	return s.Store.GetPage(ctx, id)
}

// Unpark is the in-memory store's, under the Env's map faults.
func (s createdStore) Unpark(ctx context.Context, id string, slot, seq int) (mapstate.Group, error) {
	if err := s.mapCall("unpark map slot", true, false); err != nil {
		return mapstate.Group{}, err
	}
	return s.Store.Unpark(ctx, id, slot, seq)
}

// Raise is the in-memory store's, under the Env's map faults.
func (s createdStore) Raise(ctx context.Context, id string, produced int) (mapstate.Group, error) {
	if err := s.mapCall("raise map group", false, false); err != nil {
		return mapstate.Group{}, err
	}
	return s.Store.Raise(ctx, id, produced)
}

// Suspend is the in-memory store's; it notes the steps of the run it
// ends for the Env's map faults.
func (s createdStore) Suspend(ctx context.Context, l lease.Lease, w lease.Wait) (lease.Task, error) {
	t, err := s.Store.Suspend(ctx, l, w)
	if err == nil {
		s.e.mu.Lock()
		s.e.faults.mostSteps = max(s.e.faults.mostSteps, s.e.faults.runSteps)
		s.e.faults.runSteps = 0
		s.e.mu.Unlock()
	}
	return t, err
}

// Notify is the in-memory store's, except for the waiters the Env's
// faults name.
func (s createdStore) Notify(ctx context.Context, w lease.Waiter, ended lease.Task) (lease.Task, error) {
	s.e.mu.Lock()
	f := s.e.faults
	fail := f.failNotify != nil && f.failNotify(w.ID) && !f.failed[w.ID+" "+ended.ID]
	if fail {
		if s.e.faults.failed == nil {
			s.e.faults.failed = map[string]bool{}
		}
		s.e.faults.failed[w.ID+" "+ended.ID] = true
	}
	s.e.mu.Unlock()
	if fail {
		if _, err := s.Store.Notify(ctx, w, ended); err != nil {
			return lease.Task{}, err
		}
		return lease.Task{}, fmt.Errorf("notify %s: %w: its answer was lost (leaseholdtest)", w.ID, lease.ErrBackend)
	}
	if f.replayNotify != nil && f.replayNotify(w.ID) {
		if _, err := s.Store.Notify(ctx, w, ended); err != nil {
			return lease.Task{}, err
		}
	}
	return s.Store.Notify(ctx, w, ended)
}

// Report is the in-memory store's, landing twice when the Env's faults
// say so (the caller sees the second answer).
func (s createdStore) Report(ctx context.Context, r mapstate.Report) (mapstate.Group, error) {
	s.e.mu.Lock()
	replay := s.e.faults.replayReport
	s.e.mu.Unlock()
	if replay {
		if _, err := s.Store.Report(ctx, r); err != nil {
			return mapstate.Group{}, err
		}
	}
	return s.Store.Report(ctx, r)
}

func (s createdStore) Create(ctx context.Context, t lease.NewTask) (lease.Task, error) {
	return s.note(s.Store.Create(ctx, t))
}

func (s createdStore) CreateClaimed(ctx context.Context, t lease.NewTask, owner string) (lease.Task, error) {
	return s.note(s.Store.CreateClaimed(ctx, t, owner))
}

func (s createdStore) CreateFailed(ctx context.Context, t lease.NewTask, reason string) (lease.Task, error) {
	return s.note(s.Store.CreateFailed(ctx, t, reason))
}

func (s createdStore) CreateCancelled(ctx context.Context, id, parent, reason string) (lease.Task, error) {
	return s.note(s.Store.CreateCancelled(ctx, id, parent, reason))
}

// note records the task a create returned, unless the call failed.
func (s createdStore) note(t lease.Task, err error) (lease.Task, error) {
	if err == nil && t.ID != "" {
		s.e.mu.Lock()
		if !s.e.seen[t.ID] {
			s.e.seen[t.ID] = true
			s.e.order = append(s.e.order, t.ID)
		}
		s.e.mu.Unlock()
	}
	return t, err
}

// StopMap stops a cancelled parent's sliding map with the placeholders it
// writes noted, as CreateCancelled's are.
func (s createdStore) StopMap(ctx context.Context, parent lease.Task, reason string, cancelled func(lease.Task)) error {
	return mapstate.StopChildren(ctx, s.Store, s, parent, reason, cancelled)
}
