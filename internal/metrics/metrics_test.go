package metrics_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lifecycle"
	"github.com/leasehold/leasehold/internal/metrics"
)

// emfLine is the part of an EMF document the tests read.
type emfLine struct {
	AWS struct {
		Timestamp         int64 `json:"Timestamp"`
		CloudWatchMetrics []struct {
			Namespace  string     `json:"Namespace"`
			Dimensions [][]string `json:"Dimensions"`
			Metrics    []struct {
				Name string `json:"Name"`
				Unit string `json:"Unit"`
			} `json:"Metrics"`
		} `json:"CloudWatchMetrics"`
	} `json:"_aws"`
	raw map[string]any
}

func parseLines(t *testing.T, out string) []emfLine {
	t.Helper()
	var lines []emfLine
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var l emfLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q is not JSON: %v", sc.Text(), err)
		}
		if err := json.Unmarshal(sc.Bytes(), &l.raw); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, l)
	}
	return lines
}

// checkShape asserts what CloudWatch requires of an EMF line: one directive
// in our namespace, every dimension and metric it names present at the root
// with the right type, and names plus units as given.
func checkShape(t *testing.T, l emfLine, want map[string]string) {
	t.Helper()
	if len(l.AWS.CloudWatchMetrics) != 1 {
		t.Fatalf("want one metric directive, got %d", len(l.AWS.CloudWatchMetrics))
	}
	d := l.AWS.CloudWatchMetrics[0]
	if d.Namespace != metrics.Namespace {
		t.Errorf("namespace %q, want %q", d.Namespace, metrics.Namespace)
	}
	if len(d.Dimensions) != 2 || len(d.Dimensions[0]) != 1 || d.Dimensions[0][0] != metrics.DimensionKind || len(d.Dimensions[1]) != 0 {
		t.Errorf("dimensions %v, want [[Kind] []]", d.Dimensions)
	}
	if _, ok := l.raw[metrics.DimensionKind].(string); !ok {
		t.Errorf("dimension %s missing from the root: %v", metrics.DimensionKind, l.raw)
	}
	got := map[string]string{}
	for _, m := range d.Metrics {
		got[m.Name] = m.Unit
		if _, ok := l.raw[m.Name].(float64); !ok {
			t.Errorf("metric %s has no numeric value at the root: %v", m.Name, l.raw[m.Name])
		}
	}
	if len(got) != len(want) {
		t.Errorf("metrics %v, want %v", got, want)
	}
	for name, unit := range want {
		if got[name] != unit {
			t.Errorf("metric %s unit %q, want %q (all: %v)", name, got[name], unit, got)
		}
	}
}

func TestClaimedLine(t *testing.T) {
	t.Parallel()
	clock := clockwork.NewFakeClockAt(time.UnixMilli(1_700_000_000_123))
	created := time.UnixMilli(1_700_000_000_000)
	cases := []struct {
		name    string
		task    lease.Task
		since   time.Duration
		metrics map[string]string
		due     float64
	}{
		{
			name:    "first attempt",
			task:    lease.Task{ID: "t1", Kind: "resize", Attempt: 1, CreatedAt: created, RunAt: created},
			since:   1500 * time.Millisecond,
			metrics: map[string]string{"TasksClaimed": "Count", "EnqueueToClaim": "Milliseconds", "DueToClaim": "Milliseconds"},
			due:     1500,
		},
		{
			name:    "retry due later",
			task:    lease.Task{ID: "t2", Kind: "resize", Attempt: 3, CreatedAt: created, RunAt: created.Add(time.Minute)},
			since:   time.Minute + 250*time.Millisecond,
			metrics: map[string]string{"TasksClaimed": "Count", "DueToClaim": "Milliseconds"},
			due:     250,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			metrics.NewEMF(&buf, clock).Claimed(c.task, c.since)
			lines := parseLines(t, buf.String())
			if len(lines) != 1 {
				t.Fatalf("want 1 line, got %d: %s", len(lines), buf.String())
			}
			l := lines[0]
			checkShape(t, l, c.metrics)
			if l.AWS.Timestamp != 1_700_000_000_123 {
				t.Errorf("timestamp %d", l.AWS.Timestamp)
			}
			if l.raw["Kind"] != "resize" || l.raw["task_id"] != c.task.ID || l.raw["TasksClaimed"] != 1.0 || l.raw["DueToClaim"] != c.due {
				t.Errorf("values: %v", l.raw)
			}
			if _, ok := c.metrics["EnqueueToClaim"]; ok && l.raw["EnqueueToClaim"] != float64(c.since.Milliseconds()) {
				t.Errorf("EnqueueToClaim = %v, want %d", l.raw["EnqueueToClaim"], c.since.Milliseconds())
			}
		})
	}
}

func TestEndedLines(t *testing.T) {
	t.Parallel()
	outcomes := map[lifecycle.Outcome]string{
		lifecycle.OutcomeSucceeded:   "TasksSucceeded",
		lifecycle.OutcomeFailed:      "TasksFailed",
		lifecycle.OutcomeRetried:     "TasksRetried",
		lifecycle.OutcomeReleased:    "TasksReleased",
		lifecycle.OutcomeSnoozed:     "TasksSnoozed",
		lifecycle.OutcomeCancelled:   "TasksCancelled",
		lifecycle.OutcomeLeaseLost:   "LeasesLost",
		lifecycle.OutcomeUnknownKind: "TasksUnknownKind",
	}
	for outcome, counter := range outcomes {
		t.Run(string(outcome), func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			task := lease.Task{ID: "t", Kind: "k", Attempt: 2, Payload: []byte(`{"secret":"s3cr3t"}`), Result: []byte(`"r3sult"`)}
			metrics.NewEMF(&buf, clockwork.NewFakeClock()).Ended(task, outcome, 42*time.Millisecond)
			if strings.Contains(buf.String(), "s3cr3t") || strings.Contains(buf.String(), "r3sult") {
				t.Fatalf("payload or result in a metrics line: %s", buf.String())
			}
			lines := parseLines(t, buf.String())
			if len(lines) != 1 {
				t.Fatalf("want 1 line, got %d", len(lines))
			}
			checkShape(t, lines[0], map[string]string{counter: "Count", "HandlerDuration": "Milliseconds"})
			if lines[0].raw[counter] != 1.0 || lines[0].raw["HandlerDuration"] != 42.0 || lines[0].raw["outcome"] != string(outcome) {
				t.Errorf("values: %v", lines[0].raw)
			}
		})
	}
}

func TestEmptyKindStillMakesAMetric(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	metrics.NewEMF(&buf, nil).Ended(lease.Task{ID: "t"}, lifecycle.OutcomeFailed, 0)
	l := parseLines(t, buf.String())
	if len(l) != 1 || l[0].raw["Kind"] != "unknown" {
		t.Fatalf("got %s", buf.String())
	}
}

func TestConcurrentLinesDoNotInterleave(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	e := metrics.NewEMF(&buf, nil)
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			e.Ended(lease.Task{ID: strings.Repeat("x", i), Kind: "k"}, lifecycle.OutcomeSucceeded, time.Duration(i))
		})
	}
	wg.Wait()
	if got := len(parseLines(t, buf.String())); got != 50 {
		t.Fatalf("want 50 lines, got %d", got)
	}
}
