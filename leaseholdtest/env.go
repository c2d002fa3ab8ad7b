package leaseholdtest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/jonboulle/clockwork"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/claimcheck"
	"github.com/leasehold/leasehold/internal/defaults"
	"github.com/leasehold/leasehold/internal/dispatch"
	"github.com/leasehold/leasehold/internal/durable"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/leasemem"
	"github.com/leasehold/leasehold/internal/lifecycle"
	"github.com/leasehold/leasehold/internal/submit"
	"github.com/leasehold/leasehold/internal/token"
	"github.com/leasehold/leasehold/internal/wiring"
)

// defaultMaxDeliveries bounds the messages one Env.Run delivers unless
// SetMaxDeliveries says otherwise: a workflow that has not settled by then
// (a handler that snoozes for ever, say) makes Run return an error
// matching ErrTooManyDeliveries instead of looping.
const defaultMaxDeliveries = 10_000

// Errors of an Env.
var (
	// ErrNoHandler: a task's kind has no handler in the Env's handlers. In
	// production another worker might know the kind and the task would be
	// offered again for a day; in an Env nothing else ever will, so it is
	// an error at once. Register the kind, or a stub handler for a child's.
	ErrNoHandler = errors.New("no handler registered for the task's kind")
	// ErrTooManyDeliveries: Run delivered its bound of messages
	// (10,000, or SetMaxDeliveries) and tasks were still due
	// to run.
	ErrTooManyDeliveries = errors.New("too many deliveries in one Run")
)

// errDeadLetter: the worker rejected a message (sent it to the dead-letter
// queue), or a message reached the queue's maxReceiveCount. Neither should
// happen to a task made through the Env (Enqueue, its Client, a handler):
// it is a fault of the worker or the Env, not an outcome a test expects, so
// Run's error says so, with the worker's reason, and is not a sentinel.
var errDeadLetter = errors.New("message dead-lettered")

// start is the fake clock's time when New returns.
var start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Env is a leasehold in memory for unit tests of workflows: the real
// worker (the executor a deployed worker runs), the in-memory lease store
// (the one that passes the DynamoDB store's conformance suite), in-memory
// work queues with SQS's delays and visibility, the real sweep, and a fake
// clock. Handlers run as they would deployed, so workflow.Step,
// workflow.Sleep, workflow.All, workflow.Map, workflow.WaitForCallback
// and workflow.Dependencies all work, and every
// step and wait is recorded in the store, where Task reads it.
//
// Time is the fake clock's: Run moves it forward to the next thing due
// (a delayed message, a backoff, a snooze, a sleep's wake-up, a wait's
// deadline), so a 72-hour workflow.Sleep or a retry's backoff costs no
// wall-clock time. The clock starts at 2026-01-01T00:00:00Z.
//
// Run delivers messages one at a time, in the order they become visible,
// from the goroutine that calls it; the worker runs each handler on a
// goroutine of its own and joins it before it moves on. An Env starts no
// goroutine of its own. Its methods are safe for concurrent use, except
// that Run must not be called from a handler (it returns an error) and a
// handler must not wait on the fake clock (nothing advances it while a
// handler runs): the short delay a workflow.StepPolicy waits between two
// tries in the handler takes no time here, and a long one moves the fake
// clock, as a sleep does.
type Env struct {
	t        testing.TB
	ctx      context.Context
	handlers *leasehold.Handlers
	clock    *clockwork.FakeClock
	store    *leasemem.Store
	created  createdStore // store, noting the tasks created
	tracer   trace.TracerProvider
	queue    *memQueue
	blobs    *claimcheck.Memory // the payload bucket, in memory: payloads and results over the inline limits
	exec     *lifecycle.Executor
	sweeper  *dispatch.Dispatcher

	mu            sync.Mutex
	faults        faults // tests: answers lost (export_test.go)
	maxDeliveries int
	running       bool
	closed        bool
	ids           int
	tokens        map[string]string // task id: the last callback token its handler took
	unknown       []lease.Task      // tasks claimed with a kind that has no handler
	diverged      map[string]bool   // tasks held for a divergence from their history (Run stops for them)
	seen          map[string]bool   // ids of the tasks created, as in order
	order         []string          // the tasks created, oldest first
}

// New returns an empty Env that runs the handlers registered in handlers,
// with the worker opts configure (Middleware, RateLimits,
// KindConcurrency, TracerProvider: the WorkerConfig fields of the same
// names), built by the code that builds a deployed worker's executor. It
// registers nothing itself: a test stubs a kind (a child's, say) by
// registering a stub handler for it. The Env is closed when t's test ends;
// a config the worker would refuse fails t.
func New(t testing.TB, handlers *leasehold.Handlers, opts ...Option) *Env {
	t.Helper()
	if handlers == nil {
		t.Fatal("leaseholdtest.New: handlers is nil; build them with leasehold.NewHandlers and leasehold.Handle")
	}
	e := &Env{
		t: t, ctx: t.Context(), handlers: handlers,
		clock:  clockwork.NewFakeClockAt(start),
		tokens: map[string]string{}, seen: map[string]bool{}, diverged: map[string]bool{}, maxDeliveries: defaultMaxDeliveries,
	}
	e.queue = &memQueue{clock: e.clock}
	e.store = leasemem.New(lease.Options{Clock: e.clock})
	e.created = createdStore{Store: e.store, e: e}
	e.blobs = claimcheck.NewMemory()
	cfg := e.workerConfig(opts)
	e.tracer = cfg.TracerProvider
	exec, err := lifecycle.New(e.executorConfig(cfg))
	if err != nil {
		t.Fatalf("leaseholdtest.New: %v", err)
		return nil
	}
	e.exec = exec
	e.sweeper, err = dispatch.New(e.dispatchConfig())
	if err != nil {
		t.Fatalf("leaseholdtest.New: %v", err)
		return nil
	}
	t.Cleanup(func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.closed = true
	})
	return e
}

func (e *Env) dispatchConfig() dispatch.Config {
	return dispatch.Config{
		Store: e.created, SQS: e.queue, WorkQueueURL: workQueueURL, Queues: names{},
		DispatchGrace:      e.store.Options().DispatchGrace,
		DefaultMaxAttempts: defaults.MaxAttempts,
		Concurrency:        1, SweepConcurrency: 1,
		Clock: e.clock,
	}
}

// observer hears how each attempt ended; it notes the tasks whose kind had
// no handler.
type observer struct{ e *Env }

func (o observer) Ended(a lifecycle.Ended) {
	o.e.mu.Lock()
	defer o.e.mu.Unlock()
	if a.Outcome == lifecycle.OutcomeUnknownKind {
		o.e.unknown = append(o.e.unknown, a.Task)
	}
	if a.Outcome == lifecycle.OutcomeDiverged {
		o.e.diverged[a.Task.ID] = true
	} else {
		delete(o.e.diverged, a.Task.ID)
	}
}

// liveNotHeld returns up to 5 tasks that are due to run (PENDING or
// RUNNING), not held for a divergence from their history and not waiting
// for a message (receiving).
func (e *Env) liveNotHeld() []string {
	e.mu.Lock()
	held := maps.Clone(e.diverged)
	e.mu.Unlock()
	for limit := len(held) + 5; ; limit *= 2 {
		var out []string
		ids := e.store.Live(limit)
		for _, id := range ids {
			if !held[id] && !e.receiving(id) && len(out) < 5 {
				out = append(out, id)
			}
		}
		if len(out) == 5 || len(ids) < limit {
			return out
		}
	}
}

// SetMaxDeliveries sets the bound of the messages one Run delivers (at
// least 1; 10,000 until set). A Run that stops at the bound leaves the
// next message on the queue undelivered, so a later Run (with a higher
// bound, say) goes on where it stopped.
func (e *Env) SetMaxDeliveries(n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.maxDeliveries = max(n, 1)
}

// Client returns a leasehold.Client on the Env's store and queues, with its
// fake clock: what a tool built on the client (an inspector, a script's
// test) sees of the tasks the Env runs. Its Enqueue, Cancel and Retry
// dispatch to the Env's queues, so the next Run takes them.
func (e *Env) Client() *leasehold.Client {
	cfg := leasehold.ClientConfig{Table: "leaseholdtest", QueueURL: workQueueURL, Clock: e.clock, TracerProvider: e.tracer}
	wiring.SetClientBackend(&cfg, wiring.ClientBackend{Store: e.created, SQS: e.queue, Blobs: e.blobs})
	c, err := leasehold.NewClient(cfg)
	if err != nil { // NewClient checks nothing this config can break
		panic("leaseholdtest: the Env's client: " + err.Error())
	}
	return c
}

// Clock is the Env's fake clock. Advance it to let time pass between Runs
// (a callback's timeout, say); Run advances it itself while tasks are due.
func (e *Env) Clock() *clockwork.FakeClock { return e.clock }

// Enqueue stores the task s describes (its payload encoded as JSON; a
// json.RawMessage passes through) and puts its token on its queue, as
// leasehold.Client.Enqueue does, and returns its id. It reads the
// submission's ID, MaxAttempts, Delay, RunAt, After, AfterAny,
// WaitTimeout, Then, Metadata and Queue (any valid name: every queue
// exists). Without ID the task gets the id "task-1", "task-2", ....
// Nothing runs until Run.
//
// A kind with no handler gives an error matching ErrNoHandler, a
// submission the client would refuse one matching leasehold.ErrInvalid,
// an id taken by the same kind and payload leasehold.ErrAlreadyExists
// (the id is returned) and by another leasehold.ErrConflict.
func (e *Env) Enqueue(s leasehold.Submission) (string, error) {
	if err := e.usable(); err != nil {
		return "", err
	}
	if _, ok := wiring.Lookup(e.handlers, s.Kind); !ok {
		return "", fmt.Errorf("leaseholdtest: enqueue of kind %q: %w", s.Kind, ErrNoHandler)
	}
	if s.ID == "" {
		s.ID = e.newID()
	}
	nt, err := e.newTask(s, e.clock.Now())
	if err != nil {
		return "", fmt.Errorf("leaseholdtest: enqueue %s: %w", s.ID, err)
	}
	res, err := dispatch.Enqueue(e.ctx, e.created, e.queue, workQueueURL, []lease.NewTask{nt}, func(c *dispatch.Config) { *c = e.dispatchConfig() })
	var conflict *lease.ConflictError
	switch {
	case len(res) == 1 && errors.As(res[0].Err, &conflict):
		// As the Client reports it: a *leasehold.ConflictError.
		return s.ID, fmt.Errorf("leaseholdtest: enqueue %s: %w", s.ID, &leasehold.ConflictError{TaskID: conflict.TaskID, Field: conflict.Field, Status: leasehold.Status(conflict.Status)})
	case len(res) == 1 && res[0].Err != nil:
		return s.ID, fmt.Errorf("leaseholdtest: enqueue %s: %w", s.ID, res[0].Err)
	case err != nil:
		return "", fmt.Errorf("leaseholdtest: enqueue %s: %w", s.ID, err)
	case res[0].Duplicate:
		return s.ID, fmt.Errorf("leaseholdtest: enqueue %s: %w", s.ID, leasehold.ErrAlreadyExists)
	}
	return s.ID, nil
}

// newID returns the first id "task-N" not taken.
func (e *Env) newID() string {
	for {
		e.mu.Lock()
		e.ids++
		id := fmt.Sprintf("task-%d", e.ids)
		e.mu.Unlock()
		if _, err := e.store.Get(e.ctx, id); errors.Is(err, lease.ErrNotFound) {
			return id
		}
	}
}

// newTask turns a submission into a task record with the client's rules
// (internal/submit), a payload over the inline limit kept in the Env's
// payload bucket as a deployed client with one keeps it.
func (e *Env) newTask(s leasehold.Submission, now time.Time) (lease.NewTask, error) {
	claims := &claimcheck.Checker{Blobs: e.blobs}
	return submit.NewTask(submit.Request{ID: s.ID, Kind: s.Kind, Payload: s.Payload,
		MaxAttempts: cmp.Or(s.MaxAttempts, defaults.MaxAttempts), Queue: s.Queue,
		After: s.After, AfterAny: s.AfterAny, Delay: s.Delay, RunAt: s.RunAt, WaitTimeout: s.WaitTimeout, Then: links(s.Then),
		Metadata: s.Metadata, Stow: func(id string, payload []byte) ([]byte, error) {
			return claims.Stow(e.ctx, id, claimcheck.WhatPayload, payload, 0)
		}}, now)
}

func links(ls []leasehold.Link) []submit.Link {
	out := make([]submit.Link, len(ls))
	for i, l := range ls {
		out[i] = submit.Link(l)
	}
	return out
}

// Run delivers the queued messages to the worker, one at a time, until no
// task can make progress, and returns nil then. When no message is visible
// it runs the sweep (which dispatches tasks due beyond SQS's 15-minute
// delay, such as a long sleep's wake-up), and when that dispatches
// nothing either while some task is PENDING or RUNNING, it advances the
// fake clock to the next message or sweep entry and goes on. It stops when
// every task has ended or WAITS (for a callback, for children or
// dependencies that wait too, or for a message: workflow.Receive): it
// does not advance the clock for waits alone, so a waiting callback or
// receive does not time out unless the test advances the clock itself and
// calls Run again (or sends the message: Send).
//
// Run's error is about the Env, not the tasks (a task that FAILED is a
// result; read it with Task): ErrNoHandler when a task (a child, say) is
// claimed whose kind has no handler, ErrTooManyDeliveries past its bound
// (SetMaxDeliveries), a dead-lettered message (the worker's fault, with
// its reason), or the error of a store or sweep call.
func (e *Env) Run() error {
	e.mu.Lock()
	switch {
	case e.closed:
		e.mu.Unlock()
		return errors.New("leaseholdtest: Run after the test ended")
	case e.running:
		e.mu.Unlock()
		return errors.New("leaseholdtest: Run called while Run runs (from a handler?)")
	}
	e.running = true
	maxDeliveries := e.maxDeliveries
	// Tasks held for a divergence are checked again: this Run may have
	// other code (the test switched its handlers back, say), and
	// advances the fake clock to their next check.
	clear(e.diverged)
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		e.running = false
		e.mu.Unlock()
	}()

	deliveries := 0
	for {
		if err := e.trouble(); err != nil {
			return err
		}
		m, dead, ok := e.queue.receive()
		if dead {
			continue // trouble reports it
		}
		if ok {
			if deliveries == maxDeliveries {
				// Not delivered: it stays on the queue, visible, for the
				// next Run (after SetMaxDeliveries, say).
				e.queue.unreceive(m.ReceiptHandle)
				live := e.store.Live(5)
				return fmt.Errorf("leaseholdtest: %w: %d, and tasks %s are still due to run", ErrTooManyDeliveries, maxDeliveries, strings.Join(live, ", "))
			}
			deliveries++
			if r := e.exec.Process(e.ctx, nil, m); r.Ack {
				_, _ = e.queue.DeleteMessage(e.ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(m.QueueURL), ReceiptHandle: aws.String(m.ReceiptHandle)})
			}
			continue
		}
		now := e.clock.Now()
		due, ok, err := e.nextDue()
		if err != nil {
			return err
		}
		if ok && !due.After(now) {
			st, err := e.sweeper.Sweep(e.ctx, now)
			if err != nil {
				return fmt.Errorf("leaseholdtest: sweep: %w", err)
			}
			if st.Dispatched > 0 {
				continue
			}
			if due, ok, err = e.nextDue(); err != nil { // the sweep moved entries it left to their holders
				return err
			}
		}
		// Listed or not (a child has no listing entry of its own); a task
		// held for a divergence waits for other code, as a callback waits
		// for its answer: Run stops for it (Task shows why).
		// A task that ended with its message handed back (its waiters
		// not all told: a store call failed) is told again when the
		// message comes back, as on SQS: Run waits for it.
		live := e.liveNotHeld()
		if len(live) == 0 && !e.notifying() {
			return nil
		}
		next, queued := e.queue.nextVisible()
		if !queued || ok && due.Before(next) {
			next = due
		}
		if !next.After(now) {
			return fmt.Errorf("leaseholdtest: tasks %s are due to run, but no message or sweep entry will bring them (a bug in leasehold or the kit)", strings.Join(live, ", "))
		}
		e.clock.Advance(next.Sub(now))
	}
}

// notifying reports whether a message handed back names a task that has
// ended: its next delivery tells the task's waiters.
func (e *Env) notifying() bool {
	for _, body := range e.queue.kept() {
		tok, err := token.Decode(body)
		if err != nil {
			continue
		}
		if t, err := e.store.Get(e.ctx, tok.ID); err == nil && t.Status.Terminal() {
			return true
		}
	}
	return false
}

// trouble returns the first error Run must stop for: a task whose kind has
// no handler, or a dead-lettered message.
func (e *Env) trouble() error {
	e.mu.Lock()
	unknown := e.unknown
	e.unknown = nil
	e.mu.Unlock()
	if len(unknown) > 0 {
		t := unknown[0]
		return fmt.Errorf("leaseholdtest: task %s of kind %q: %w (register one, or a stub handler for a child's kind, with leasehold.Handle)", t.ID, t.Kind, ErrNoHandler)
	}
	if dead := e.queue.takeDead(); len(dead) > 0 {
		return fmt.Errorf("leaseholdtest: %w: %s (message %s)", errDeadLetter, dead[0].reason, dead[0].body)
	}
	return nil
}

// nextDue is the earliest time in the sweep index.
func (e *Env) nextDue() (time.Time, bool, error) {
	var next time.Time
	horizon := e.clock.Now().Add(100 * 365 * 24 * time.Hour)
	for _, shard := range lease.Shards() {
		due, err := e.store.Due(e.ctx, shard, horizon, 1)
		if err != nil {
			return time.Time{}, false, fmt.Errorf("leaseholdtest: read the sweep index: %w", err)
		}
		if len(due) == 1 && (next.IsZero() || due[0].DispatchAt.Before(next)) {
			next = due[0].DispatchAt
		}
	}
	return next, !next.IsZero(), nil
}

// TaskState is a task as the store holds it: the client's view
// (leasehold.TaskInfo: status, attempt, result, error, history, and what
// it waits for in Wait, WaitFor, Ended and WaitUntil) and its recorded
// steps.
type TaskState struct {
	leasehold.TaskInfo
	// Steps are the steps the handler recorded, in the order they were
	// first finished: those of workflow.Step, and the sleeps of
	// workflow.Sleep ("sleep#1", ...: their result is the wake-up time in
	// Unix milliseconds).
	Steps []Step
}

// Step is one recorded step: its name and its JSON result.
type Step struct {
	Name   string
	Result json.RawMessage
}

// StepNames lists the names of s.Steps, in order.
func (s TaskState) StepNames() []string {
	names := make([]string, len(s.Steps))
	for i, st := range s.Steps {
		names[i] = st.Name
	}
	return names
}

// Task reads the task id as the store holds it now. A task that does not
// exist gives an error matching leasehold.ErrNotFound.
func (e *Env) Task(id string) (TaskState, error) {
	t, err := e.store.Get(e.ctx, id)
	if err != nil {
		return TaskState{}, fmt.Errorf("leaseholdtest: task %s: %w", id, err)
	}
	// A history past the task's item: Steps lists it whole.
	if t.Steps, err = lease.ReadHistory(e.ctx, e.store, t, 0); err != nil {
		return TaskState{}, fmt.Errorf("leaseholdtest: task %s: %w", id, err)
	}
	claims := &claimcheck.Checker{Blobs: e.blobs}
	if t.Payload, err = claims.Fetch(e.ctx, t.Payload); err != nil {
		return TaskState{}, fmt.Errorf("leaseholdtest: task %s: payload: %w", id, err)
	}
	if t.Result, err = claims.Fetch(e.ctx, t.Result); err != nil {
		return TaskState{}, fmt.Errorf("leaseholdtest: task %s: result: %w", id, err)
	}
	// Steps whose results are in the payload bucket: read back, on a copy
	// (the store's slice is its own).
	t.Steps = slices.Clone(t.Steps)
	for i := range t.Steps {
		if t.Steps[i].Result, err = claims.Fetch(e.ctx, t.Steps[i].Result); err != nil {
			return TaskState{}, fmt.Errorf("leaseholdtest: task %s: step %q: %w", id, t.Steps[i].Name, err)
		}
	}
	return stateOf(t), nil
}

// stateOf is the TaskState of a stored task.
func stateOf(t lease.Task) TaskState {
	raw := func(b []byte) json.RawMessage {
		if len(b) == 0 {
			return nil
		}
		return json.RawMessage(append([]byte(nil), b...))
	}
	s := TaskState{TaskInfo: leasehold.TaskInfo{
		ID: t.ID, Kind: t.Kind, Status: leasehold.Status(t.Status), Attempt: t.Attempt, MaxAttempts: t.MaxAttempts,
		Payload: raw(t.Payload), Result: raw(t.Result), Error: t.Error, CancelRequested: t.CancelRequested,
		RunAt: t.RunAt, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt, FinishedAt: t.FinishedAt,
		HistoryDropped: t.HistoryDropped, Snoozes: t.Snoozes, Queue: t.Queue, Run: int(t.Run) + 1,
		Parent: t.Parent, Wait: string(t.Wait), WaitFor: t.WaitFor, Ended: t.Ended, WaitUntil: t.WaitUntil,
	}}
	if t.Status == lease.StatusRunning {
		s.LeaseOwner, s.LeaseUntil = t.LeaseOwner, t.LeaseUntil
	}
	for _, w := range t.Waiters {
		s.Waiters = append(s.Waiters, w.ID)
	}
	for _, a := range t.History {
		s.History = append(s.History, leasehold.AttemptInfo{Attempt: a.Attempt, Status: leasehold.Status(a.Status), Error: a.Error, At: a.At})
	}
	for _, st := range t.Steps {
		s.Steps = append(s.Steps, Step{Name: st.Name, Result: raw(st.Result)})
	}
	return s
}

// CallbackToken returns the callback token the handler of task id handed
// to workflow.WaitForCallback's submit in the attempt that now waits for
// its callback: the very token it handed out. A task that does not wait for a
// callback gives an error matching leasehold.ErrNotWaiting.
func (e *Env) CallbackToken(id string) (string, error) {
	t, err := e.store.Get(e.ctx, id)
	if err != nil {
		return "", fmt.Errorf("leaseholdtest: task %s: %w", id, err)
	}
	if t.Status != lease.StatusWaiting || t.Wait != lease.WaitCallback {
		return "", fmt.Errorf("leaseholdtest: %w: task %s is %s, not waiting for a callback", leasehold.ErrNotWaiting, id, t.Status)
	}
	e.mu.Lock()
	tok, ok := e.tokens[id]
	e.mu.Unlock()
	if cb, err := token.ParseCallback(tok); !ok || err != nil || cb.Fence != t.Fence || cb.Attempt != t.Attempt {
		return "", fmt.Errorf("leaseholdtest: task %s waits for a callback, but the kit saw no token of its attempt %d taken", id, t.Attempt)
	}
	return tok, nil
}

// CompleteCallback answers the wait the callback token names with result
// (encoded as JSON), as leasehold.Client.CompleteCallback does, with the
// same store write: the answer is recorded for workflow.WaitForCallback,
// and the handler runs again, at the next Run, to read it. A token is
// accepted once; any other use gives an error matching
// leasehold.ErrBadCallback. Call it between Runs: a token whose attempt
// has not suspended yet (a handler that completes its own callback) is
// refused.
func (e *Env) CompleteCallback(callbackToken string, result any) error {
	r, err := lease.EncodeJSON("result", result)
	if err != nil {
		return fmt.Errorf("leaseholdtest: complete callback: %w", err)
	}
	return e.endWait(callbackToken, lease.StatusSucceeded, r, "")
}

// FailCallback answers the wait the callback token names with a failure,
// as leasehold.Client.FailCallback does: at the next Run the handler's
// workflow.WaitForCallback returns a *workflow.CallbackFailedError with
// reason.
func (e *Env) FailCallback(callbackToken, reason string) error {
	if reason == "" {
		return fmt.Errorf("leaseholdtest: %w: a failed callback needs a reason", leasehold.ErrInvalid)
	}
	if durable.Reserved(reason) {
		return fmt.Errorf("leaseholdtest: %w: a failed callback's reason may not be one leasehold reserves for a raced timer, message or child", leasehold.ErrInvalid)
	}
	return e.endWait(callbackToken, lease.StatusFailed, nil, reason)
}

// HeartbeatCallback beats for the wait the callback token names, as
// leasehold.Client.HeartbeatCallback does, with the same store write: a
// wait with a heartbeat timeout (workflow.HeartbeatTimeout) goes on for
// the timeout from the fake clock's now. Call it between Runs, advancing
// the clock yourself; the Run after the heartbeat deadline passed without
// a beat fails the attempt. A beat for a wait that has ended, or is past
// a deadline, gives an error matching leasehold.ErrBadCallback (and
// leasehold.ErrNotWaiting, or ErrFinished); a wait without a heartbeat
// timeout one matching leasehold.ErrInvalid.
func (e *Env) HeartbeatCallback(callbackToken string) error {
	if err := e.usable(); err != nil {
		return err
	}
	cb, err := token.ParseCallback(callbackToken)
	if err != nil {
		return fmt.Errorf("leaseholdtest: %w: %w", leasehold.ErrBadCallback, err)
	}
	if lease.IsCallbackHash(cb.Nonce) {
		return fmt.Errorf("leaseholdtest: %w: the token carries the stored hash of a callback's secret, not the secret: only the token the handler took beats for a wait", leasehold.ErrBadCallback)
	}
	_, err = e.store.BeatCallback(e.ctx, lease.WaitEnd{ID: cb.ID, Fence: cb.Fence, Attempt: cb.Attempt, Nonce: cb.Nonce, Status: lease.StatusSucceeded})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, leasehold.ErrBadCallback), errors.Is(err, leasehold.ErrInvalid):
		return fmt.Errorf("leaseholdtest: %w", err)
	}
	return fmt.Errorf("leaseholdtest: %w: %w", leasehold.ErrBadCallback, err)
}

func (e *Env) endWait(callbackToken string, status lease.Status, result []byte, reason string) error {
	if err := e.usable(); err != nil {
		return err
	}
	cb, err := token.ParseCallback(callbackToken)
	if err != nil {
		return fmt.Errorf("leaseholdtest: %w: %w", leasehold.ErrBadCallback, err)
	}
	if lease.IsCallbackHash(cb.Nonce) {
		// Built from what the table holds, as leasehold.Client refuses it.
		return fmt.Errorf("leaseholdtest: %w: the token carries the stored hash of a callback's secret, not the secret: only the token the handler took answers a wait", leasehold.ErrBadCallback)
	}
	w := lease.WaitEnd{ID: cb.ID, Fence: cb.Fence, Attempt: cb.Attempt, Nonce: cb.Nonce, Status: status, Result: result, Error: reason}
	if err := (&claimcheck.Checker{Blobs: e.blobs}).StowAnswer(e.ctx, &w); err != nil {
		return fmt.Errorf("leaseholdtest: complete callback: %w", err)
	}
	t, err := e.store.EndWait(e.ctx, w)
	var we *lease.WaitError
	switch {
	case err == nil:
	case errors.As(err, &we) && we.Task.Status == lease.StatusRunning && we.Task.Fence == cb.Fence:
		return fmt.Errorf("leaseholdtest: %w: task %s has not suspended yet; complete its callback after Run returns", leasehold.ErrBadCallback, cb.ID)
	case errors.Is(err, leasehold.ErrBadCallback):
		return fmt.Errorf("leaseholdtest: %w", err)
	default:
		return fmt.Errorf("leaseholdtest: %w: %w", leasehold.ErrBadCallback, err)
	}
	if len(t.Waiters) == 0 && t.Status != lease.StatusPending {
		return nil
	}
	// Hand the telling of its waiters to the worker, as the client does:
	// a reference token, which finds the task ended. A resumable wait's
	// answer (PENDING) runs the task again by the same token.
	url, err := names{}.URL(e.ctx, t.Queue)
	if err == nil {
		_, err = e.queue.SendMessage(e.ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(token.Ref(t.ID))})
	}
	return err
}

// usable refuses calls after the test ended.
func (e *Env) usable() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return errors.New("leaseholdtest: the Env's test has ended")
	}
	return nil
}
