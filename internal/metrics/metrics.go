// Package metrics reports what happens to tasks as CloudWatch metrics in the
// embedded metric format (EMF): JSON documents, one a line, which CloudWatch
// Logs turns into metrics when a Lambda function writes them to stdout. No
// PutMetricData call, permission or extra latency is involved.
//
// # Metrics
//
// All are in the namespace "Leasehold", each both per task kind (dimension
// Kind) and across kinds (no dimension):
//
//	EnqueueToClaim   Milliseconds  first attempts: from the task's creation to its claim
//	DueToClaim       Milliseconds  every claimed attempt: from when it was due (run_at) to its claim
//	TasksSucceeded   Count         the result was recorded
//	TasksFailed      Count         failed for good (no attempts left, or a permanent error)
//	TasksRetried     Count         failed; another attempt is scheduled with backoff
//	TasksReleased    Count         the invocation deadline came first; released for an immediate retry
//	TasksSnoozed     Count         the handler asked to run later
//	TasksCancelled   Count         cancelled on request or by the handler
//	LeasesLost       Count         another worker took the task over; this attempt's result was discarded
//	TasksUnknownKind Count         no handler for the kind here; released without using an attempt
//	TasksHeld        Count         the kind or its queue was at its limit; released without using an attempt
//	TasksDiverged    Count         a workflow's run diverged from its history; the task is held
//	HandlerDuration  Milliseconds  how long the attempt ran, for every outcome above
//
// # Per batch, not per attempt
//
// An attempt adds to its kind's pending figures when it ends: one to its
// outcome's counter, its HandlerDuration, and the claim's EnqueueToClaim and
// DueToClaim. Nothing is written then. Flush writes one document per Kind
// value with pending figures: each counter as the number of attempts it
// counts, each duration as EMF's {"Values":[...],"Counts":[...]} (or a
// plain array or number when that is shorter), durations rounded to two
// significant digits so that a batch's values repeat. The worker flushes at
// the end of every Lambda batch (before HandleSQS returns) and, under
// Worker.Run, every FlushEvery and when it stops. A kind's figures are also
// written at once when one of its durations reaches MaxValues distinct
// values (EMF's limit per array) or it holds MaxPending attempts, so that
// memory and a document's size stay bounded whatever the traffic.
//
// A counter's Sum is the number of attempts, as before; its SampleCount is
// the number of documents, so read counters with Sum. The durations keep
// their per-attempt statistics (SampleCount, Average, percentiles), within
// the rounding. A document names no task: task ids, attempts and payloads
// never appear (a succeeded task's id is in its DEBUG log line and its
// record). There is no claim counter of its own: every claim whose outcome
// is recorded ends in exactly one of the counters above, so their sum
// counts the claims.
//
// The Kind dimension is bounded, as each of its values makes new metrics
// and whoever can send to the work queue chooses kinds: every task of a
// kind no handler is registered for counts under Kind "(unknown)", and past
// the first MaxKinds (100) kinds one worker process has seen, further kinds
// count under "(other)". Such a document lists the first kinds it counts
// (at most sharedKindNames) in its "kinds" property.
//
// # Attempt lines
//
// A writer that implements AttemptWriter (the chaos harness's evidence
// file) gets the former shape instead: one line per attempt when it ends,
// with task_id, attempt and outcome as plain properties.
package metrics

import (
	"context"
	"io"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lifecycle"
)

// Namespace is the CloudWatch namespace of every metric.
const Namespace = "Leasehold"

// DimensionKind is the dimension that carries the task kind.
const DimensionKind = "Kind"

// Metric names.
const (
	EnqueueToClaim = "EnqueueToClaim"
	DueToClaim     = "DueToClaim"
	TasksSucceeded = "TasksSucceeded"
	TasksFailed    = "TasksFailed"
	TasksRetried   = "TasksRetried"
	TasksReleased  = "TasksReleased"
	TasksSnoozed   = "TasksSnoozed"
	TasksCancelled = "TasksCancelled"
	LeasesLost     = "LeasesLost"
	// TasksUnknownKind counts releases of tasks whose kind the worker has
	// no handler for (no attempt used).
	TasksUnknownKind = "TasksUnknownKind"
	// TasksHeld counts releases of tasks whose kind was at its concurrency
	// limit, or whose queue's rate window was full (no attempt used).
	TasksHeld = "TasksHeld"
	// TasksDiverged counts runs of workflows that diverged from their
	// recorded history (code deployed under them): each holds its task.
	TasksDiverged   = "TasksDiverged"
	HandlerDuration = "HandlerDuration"
)

// The Kind dimension's values are bounded (issue 18, item 17): whoever can
// send to the work queue chooses kinds, and each new value makes four new
// CloudWatch metrics.
const (
	// UnknownKind is the Kind of every attempt of OutcomeUnknownKind:
	// kinds no handler is registered for share one series. The kinds
	// themselves are the document's "kinds" property (searchable, not a
	// dimension).
	UnknownKind = "(unknown)"
	// OtherKind is the Kind of an attempt whose kind is not among the
	// first MaxKinds kinds this EMF has counted.
	OtherKind = "(other)"
	// MaxKinds bounds the distinct Kind values one EMF writes, besides
	// UnknownKind and OtherKind.
	MaxKinds = 100
)

// Units used.
const (
	UnitCount        = "Count"
	UnitMilliseconds = "Milliseconds"
)

// Bounds of what one EMF holds before it writes.
const (
	// MaxValues is the most distinct values of one duration in one
	// document: EMF's limit for a metric's array. A kind whose duration
	// would take one more is written first.
	MaxValues = 100
	// MaxPending is the most attempts one kind's pending figures count: at
	// that many they are written without waiting for the flush.
	MaxPending = 10_000
	// FlushEvery is how often Worker.Run writes what is pending: CloudWatch
	// keeps these metrics at one-minute resolution, so a few documents a
	// minute per kind lose nothing.
	FlushEvery = 10 * time.Second
	// sharedKindNames bounds the kinds a document of UnknownKind or
	// OtherKind lists in its "kinds" property.
	sharedKindNames = 10
)

// outcomes are the outcomes with a counter, in the order a document lists
// them; counters[i] is outcomes[i]'s.
var (
	outcomes = [...]lifecycle.Outcome{
		lifecycle.OutcomeSucceeded, lifecycle.OutcomeFailed, lifecycle.OutcomeRetried,
		lifecycle.OutcomeReleased, lifecycle.OutcomeSnoozed, lifecycle.OutcomeCancelled,
		lifecycle.OutcomeLeaseLost, lifecycle.OutcomeUnknownKind, lifecycle.OutcomeHeld,
		lifecycle.OutcomeDiverged,
	}
	counters = [len(outcomes)]string{
		TasksSucceeded, TasksFailed, TasksRetried,
		TasksReleased, TasksSnoozed, TasksCancelled,
		LeasesLost, TasksUnknownKind, TasksHeld,
		TasksDiverged,
	}
)

// outcomeIndex is the index of o in outcomes, or -1.
func outcomeIndex(o lifecycle.Outcome) int {
	for i, x := range outcomes {
		if x == o {
			return i
		}
	}
	return -1
}

// AttemptWriter is a writer that wants one line per attempt (task_id,
// attempt and outcome as properties) rather than documents per batch: the
// chaos harness reads each attempt's outcome from them. Its
// MetricsPerAttempt reports whether it does.
type AttemptWriter interface {
	io.Writer
	MetricsPerAttempt() bool
}

// EMF aggregates the attempts that end into one EMF document per Kind
// value, written by Flush (or when a kind's figures reach a bound). It
// implements lifecycle.Observer and is safe for concurrent use: documents
// never interleave.
type EMF struct {
	mu         sync.Mutex
	w          io.Writer
	perAttempt bool
	clock      clockwork.Clock
	kinds      map[string]struct{} // the Kind values counted, at most MaxKinds; under mu
	// pending holds each Kind value's figures since its last document;
	// order lists the Kind values in the order they were first seen, so
	// that a flush writes them in a stable order. Both under mu; a series
	// is kept (emptied) after it is written, so that a steady stream of
	// batches allocates nothing.
	pending map[string]*series
	order   []string
	buf     []byte // the document being written; under mu
}

var _ lifecycle.Observer = (*EMF)(nil)

// NewEMF returns an observer writing to w (in Lambda: os.Stdout). A nil
// clock is the real one; it stamps the documents and paces FlushLoop.
func NewEMF(w io.Writer, clock clockwork.Clock) *EMF {
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	aw, ok := w.(AttemptWriter)
	return &EMF{
		w: w, clock: clock, kinds: make(map[string]struct{}), pending: make(map[string]*series),
		perAttempt: ok && aw.MetricsPerAttempt(),
	}
}

// Ended implements lifecycle.Observer: it adds the attempt to its kind's
// pending figures, its outcome's counter, the handler's duration and, for
// a claimed attempt, how late the claim came. It writes only when the
// kind's figures reach a bound (MaxValues, MaxPending).
func (e *EMF) Ended(a lifecycle.Ended) {
	oi := outcomeIndex(a.Outcome)
	if oi < 0 {
		return
	}
	var (
		enqueue, due       time.Duration
		hasEnqueue, hasDue bool
	)
	if c := a.Claim; c != nil {
		if c.Attempt <= 1 {
			enqueue, hasEnqueue = c.SinceEnqueue, true
		}
		if !c.RunAt.IsZero() && !c.CreatedAt.IsZero() {
			// since enqueue minus the wait that was asked for: the lateness.
			due, hasDue = max(c.SinceEnqueue-c.RunAt.Sub(c.CreatedAt), 0), true
		}
	}
	if e.perAttempt {
		e.writeAttempt(a, oi, enqueue, hasEnqueue, due, hasDue)
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	kind, shared := e.dimension(a.Task, a.Outcome)
	s := e.series(kind)
	if s.full(hasEnqueue, hasDue) {
		e.writeSeries(kind, s)
	}
	s.add(oi, a.HandlerTime, enqueue, hasEnqueue, due, hasDue)
	if shared {
		s.addKindName(a.Task.Kind)
	}
	if s.attempts >= MaxPending {
		e.writeSeries(kind, s)
	}
}

// series is kind's pending figures, made on first use. Under mu.
func (e *EMF) series(kind string) *series {
	s, ok := e.pending[kind]
	if !ok {
		s = new(series)
		e.pending[kind] = s
		e.order = append(e.order, kind)
	}
	return s
}

// Flush writes one document per Kind value with pending figures, and
// empties them. HandleSQS calls it before it returns, so that nothing is
// pending while Lambda freezes the process; it is cheap when nothing is.
func (e *EMF) Flush() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, kind := range e.order {
		if s := e.pending[kind]; s.attempts > 0 {
			e.writeSeries(kind, s)
		}
	}
}

// FlushLoop flushes every period until ctx is done, then once more, and
// returns: its caller (Worker.Run) starts it in a goroutine, cancels ctx
// once its batches have ended, and waits for it.
func (e *EMF) FlushLoop(ctx context.Context, period time.Duration) {
	tick := e.clock.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			e.Flush()
			return
		case <-tick.Chan():
			e.Flush()
		}
	}
}

// dimension is the Kind value of an attempt of t's: its kind, or, when
// shared, UnknownKind (no handler for it) or OtherKind (past MaxKinds
// kinds). Under mu.
func (e *EMF) dimension(t lease.Task, outcome lifecycle.Outcome) (kind string, shared bool) {
	switch {
	case outcome == lifecycle.OutcomeUnknownKind:
		return UnknownKind, true
	case t.Kind == "":
		return "unknown", false // CloudWatch rejects an empty dimension value
	}
	if _, ok := e.kinds[t.Kind]; ok {
		return t.Kind, false
	}
	if len(e.kinds) < MaxKinds {
		e.kinds[t.Kind] = struct{}{}
		return t.Kind, false
	}
	return OtherKind, true
}
