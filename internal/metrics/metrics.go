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
//	TasksClaimed     Count         a worker took the lease of a task
//	EnqueueToClaim   Milliseconds  first attempts: from the task's creation to its claim
//	DueToClaim       Milliseconds  every attempt: from when it was due (run_at) to its claim
//	TasksSucceeded   Count         the result was recorded
//	TasksFailed      Count         failed for good (no attempts left, or a permanent error)
//	TasksRetried     Count         failed; another attempt is scheduled with backoff
//	TasksReleased    Count         the invocation deadline came first; released for an immediate retry
//	TasksSnoozed     Count         the handler asked to run later
//	TasksCancelled   Count         cancelled on request or by the handler
//	LeasesLost       Count         another worker took the task over; this attempt's result was discarded
//	HandlerDuration  Milliseconds  how long the attempt ran, for every outcome above
//
// Each line also carries task_id, attempt and outcome as plain properties
// (searchable in CloudWatch Logs Insights, not dimensions). Payloads and
// results never appear.
package metrics

import (
	"encoding/json"
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
	TasksClaimed   = "TasksClaimed"
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
	HandlerDuration  = "HandlerDuration"
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
}

// EMF writes one EMF line per task event to a writer. It implements
// lifecycle.Observer and is safe for concurrent use: lines never interleave.
type EMF struct {
	mu    sync.Mutex
	w     io.Writer
	clock clockwork.Clock
}

var _ lifecycle.Observer = (*EMF)(nil)

// NewEMF returns an observer writing to w (in Lambda: os.Stdout). A nil
// clock is the real one; it stamps the lines.
func NewEMF(w io.Writer, clock clockwork.Clock) *EMF {
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	return &EMF{w: w, clock: clock}
}

// value is one metric of a line.
type value struct {
	name  string
	unit  string
	value float64
}

// Claimed implements lifecycle.Observer.
func (e *EMF) Claimed(t lease.Task, sinceEnqueue time.Duration) {
	vals := []value{{TasksClaimed, UnitCount, 1}}
	if t.Attempt <= 1 {
		vals = append(vals, value{EnqueueToClaim, UnitMilliseconds, millis(sinceEnqueue)})
	}
	if !t.RunAt.IsZero() && !t.CreatedAt.IsZero() {
		// since enqueue minus the wait that was asked for: the lateness.
		late := sinceEnqueue - t.RunAt.Sub(t.CreatedAt)
		vals = append(vals, value{DueToClaim, UnitMilliseconds, millis(max(late, 0))})
	}
	e.write(t, "claimed", vals)
}

// Ended implements lifecycle.Observer.
func (e *EMF) Ended(t lease.Task, outcome lifecycle.Outcome, handlerTime time.Duration) {
	name, ok := outcomeMetric[outcome]
	if !ok {
		return
	}
	e.write(t, string(outcome), []value{
		{name, UnitCount, 1},
		{HandlerDuration, UnitMilliseconds, millis(handlerTime)},
	})
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// definition and directive are EMF's MetricDefinition and MetricDirective.
type definition struct {
	Name string `json:"Name"`
	Unit string `json:"Unit"`
}

type directive struct {
	Namespace  string       `json:"Namespace"`
	Dimensions [][]string   `json:"Dimensions"`
	Metrics    []definition `json:"Metrics"`
}

type metadata struct {
	Timestamp         int64       `json:"Timestamp"`
	CloudWatchMetrics []directive `json:"CloudWatchMetrics"`
}

// write emits one line: the metadata, the Kind dimension, the values and
// the task's id, attempt and outcome as properties.
func (e *EMF) write(t lease.Task, outcome string, vals []value) {
	doc := map[string]any{
		"task_id": t.ID,
		"attempt": t.Attempt,
		"outcome": outcome,
	}
	defs := make([]definition, len(vals))
	for i, v := range vals {
		defs[i] = definition{Name: v.name, Unit: v.unit}
		doc[v.name] = v.value
	}
	kind := t.Kind
	if kind == "" {
		kind = "unknown" // CloudWatch rejects an empty dimension value
	}
	doc[DimensionKind] = kind
	doc["_aws"] = metadata{
		Timestamp: e.clock.Now().UnixMilli(),
		CloudWatchMetrics: []directive{{
			Namespace: Namespace,
			// Per kind, and across kinds (an empty dimension set).
			Dimensions: [][]string{{DimensionKind}, {}},
			Metrics:    defs,
		}},
	}
	line, err := json.Marshal(doc)
	if err != nil {
		return // cannot happen: every value is a string or a number
	}
	line = append(line, '\n')
	e.mu.Lock()
	defer e.mu.Unlock()
	_, _ = e.w.Write(line) // metrics are best effort; a task never fails for them
}
