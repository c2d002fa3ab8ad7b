// Package metrics reports what happens to tasks as CloudWatch metrics in the
// embedded metric format (EMF): one JSON object per line, which CloudWatch
// Logs turns into metrics when a Lambda function writes it to stdout. No
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
//	HandlerDuration  Milliseconds  how long the attempt ran, for every outcome above
//
// An attempt writes one line, when it ends: its outcome's counter,
// HandlerDuration, and the claim's EnqueueToClaim and DueToClaim. There is
// no claim counter of its own: every claim whose outcome is recorded ends in
// exactly one of the counters above, so their sum counts the claims. Each
// line also carries task_id, attempt and outcome as plain properties
// (searchable in CloudWatch Logs Insights, not dimensions). Payloads and
// results never appear.
//
// The Kind dimension is bounded, as each of its values makes new metrics
// and whoever can send to the work queue chooses kinds: every task of a
// kind no handler is registered for counts under Kind "(unknown)", and past
// the first MaxKinds (100) kinds one worker process has seen, further kinds
// count under "(other)". Such a line keeps the kind as its "kind" property.
package metrics

import (
	"io"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

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
	// UnknownKind is the Kind of every line of OutcomeUnknownKind: kinds
	// no handler is registered for share one series. The kind itself is
	// the line's "kind" property (searchable, not a dimension).
	UnknownKind = "(unknown)"
	// OtherKind is the Kind of a line whose kind is not among the first
	// MaxKinds kinds this EMF has written.
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

// outcomeMetric is the counter of each outcome.
var outcomeMetric = map[lifecycle.Outcome]string{
	lifecycle.OutcomeSucceeded:   TasksSucceeded,
	lifecycle.OutcomeFailed:      TasksFailed,
	lifecycle.OutcomeRetried:     TasksRetried,
	lifecycle.OutcomeReleased:    TasksReleased,
	lifecycle.OutcomeSnoozed:     TasksSnoozed,
	lifecycle.OutcomeCancelled:   TasksCancelled,
	lifecycle.OutcomeLeaseLost:   LeasesLost,
	lifecycle.OutcomeUnknownKind: TasksUnknownKind,
	lifecycle.OutcomeHeld:        TasksHeld,
	lifecycle.OutcomeDiverged:    TasksDiverged,
}

// EMF writes one EMF line per attempt to a writer, when the attempt ends.
// It implements lifecycle.Observer and is safe for concurrent use: lines
// never interleave.
type EMF struct {
	mu    sync.Mutex
	w     io.Writer
	clock clockwork.Clock
	kinds map[string]struct{} // the Kind values written, at most MaxKinds; under mu
}

var _ lifecycle.Observer = (*EMF)(nil)

// NewEMF returns an observer writing to w (in Lambda: os.Stdout). A nil
// clock is the real one; it stamps the lines.
func NewEMF(w io.Writer, clock clockwork.Clock) *EMF {
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	return &EMF{w: w, clock: clock, kinds: make(map[string]struct{})}
}

// value is one metric of a line.
type value struct {
	name  string
	unit  string
	value float64
}

// Ended implements lifecycle.Observer: one line with the outcome's counter,
// the handler's duration and, for a claimed attempt, how late the claim
// came.
func (e *EMF) Ended(a lifecycle.Ended) {
	name, ok := outcomeMetric[a.Outcome]
	if !ok {
		return
	}
	var buf [4]value
	vals := append(buf[:0],
		value{name, UnitCount, 1},
		value{HandlerDuration, UnitMilliseconds, millis(a.HandlerTime)})
	if c := a.Claim; c != nil {
		if c.Attempt <= 1 {
			vals = append(vals, value{EnqueueToClaim, UnitMilliseconds, millis(c.SinceEnqueue)})
		}
		if !c.RunAt.IsZero() && !c.CreatedAt.IsZero() {
			// since enqueue minus the wait that was asked for: the lateness.
			late := c.SinceEnqueue - c.RunAt.Sub(c.CreatedAt)
			vals = append(vals, value{DueToClaim, UnitMilliseconds, millis(max(late, 0))})
		}
	}
	e.write(a.Task, string(a.Outcome), vals)
}

// millis is d in milliseconds, to the microsecond.
func millis(d time.Duration) float64 {
	return float64(d.Round(time.Microsecond)) / float64(time.Millisecond)
}

// linePool holds line buffers: one line per attempt should not cost an
// allocation.
var linePool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// write emits one line: the metadata, the Kind dimension, the task's id,
// attempt and outcome, and the values. It is built by hand, in the order
// EMF documents show: about half the allocations and none of the reflection
// of encoding/json, for a shape that never changes.
func (e *EMF) write(t lease.Task, outcome string, vals []value) {
	kind, shared := e.dimension(t, outcome)
	bp := linePool.Get().(*[]byte)
	b := (*bp)[:0]
	b = append(b, `{"_aws":{"Timestamp":`...)
	b = strconv.AppendInt(b, e.clock.Now().UnixMilli(), 10)
	b = append(b, `,"CloudWatchMetrics":[{"Namespace":"`+Namespace+`","Dimensions":[["`+DimensionKind+`"],[]],"Metrics":[`...)
	for i, v := range vals {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"Name":"`...)
		b = append(b, v.name...)
		b = append(b, `","Unit":"`...)
		b = append(b, v.unit...)
		b = append(b, `"}`...)
	}
	b = append(b, `]}]},"`+DimensionKind+`":`...)
	b = appendString(b, kind)
	if shared {
		b = append(b, `,"kind":`...)
		b = appendString(b, t.Kind)
	}
	b = append(b, `,"task_id":`...)
	b = appendString(b, t.ID)
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(t.Attempt), 10)
	b = append(b, `,"outcome":`...)
	b = appendString(b, outcome)
	for _, v := range vals {
		b = append(b, ',', '"')
		b = append(b, v.name...)
		b = append(b, '"', ':')
		b = strconv.AppendFloat(b, v.value, 'f', -1, 64)
	}
	b = append(b, '}', '\n')
	e.mu.Lock()
	_, _ = e.w.Write(b) // metrics are best effort; a task never fails for them
	e.mu.Unlock()
	*bp = b
	linePool.Put(bp)
}

// dimension is the Kind value of a line of t's: its kind, or, when shared,
// UnknownKind (no handler for it) or OtherKind (past MaxKinds kinds), with
// the kind itself then written as the line's "kind" property.
func (e *EMF) dimension(t lease.Task, outcome string) (kind string, shared bool) {
	switch {
	case outcome == string(lifecycle.OutcomeUnknownKind):
		return UnknownKind, true
	case t.Kind == "":
		return "unknown", false // CloudWatch rejects an empty dimension value
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.kinds[t.Kind]; ok {
		return t.Kind, false
	}
	if len(e.kinds) < MaxKinds {
		e.kinds[t.Kind] = struct{}{}
		return t.Kind, false
	}
	return OtherKind, true
}

// appendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD, as
// encoding/json writes it.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}
