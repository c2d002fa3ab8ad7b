package metrics_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"strconv"
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
		if samples(l.raw[m.Name]) == nil {
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

// attemptWriter is an AttemptWriter: the EMF writes it a line per attempt.
type attemptWriter struct{ io.Writer }

func (attemptWriter) MetricsPerAttempt() bool { return true }

func attemptLines(w io.Writer) attemptWriter { return attemptWriter{w} }

// samples is the values a metric's member stands for: a number, an array
// of numbers, or EMF's {"Values":[...],"Counts":[...]}; nil if it is none
// of them.
func samples(v any) []float64 {
	switch v := v.(type) {
	case float64:
		return []float64{v}
	case []any:
		out := []float64{}
		for _, x := range v {
			f, ok := x.(float64)
			if !ok {
				return nil
			}
			out = append(out, f)
		}
		return out
	case map[string]any:
		vals, _ := v["Values"].([]any)
		counts, _ := v["Counts"].([]any)
		if len(vals) == 0 || len(vals) != len(counts) {
			return nil
		}
		out := []float64{}
		for i, x := range vals {
			f, ok1 := x.(float64)
			c, ok2 := counts[i].(float64)
			if !ok1 || !ok2 {
				return nil
			}
			for range int(c) {
				out = append(out, f)
			}
		}
		return out
	}
	return nil
}

// A writer that is an AttemptWriter (the chaos harness's evidence file)
// gets one line per attempt, when the attempt ends. A claimed attempt's line carries how late its claim came, with the
// outcome, when it ends; nothing is written at the claim.
func TestAttemptLineCarriesTheClaim(t *testing.T) {
	t.Parallel()
	clock := clockwork.NewFakeClockAt(time.UnixMilli(1_700_000_000_123))
	created := time.UnixMilli(1_700_000_000_000)
	cases := []struct {
		name    string
		claim   lifecycle.Claim
		metrics map[string]string
		due     float64
	}{
		{
			name:    "first attempt",
			claim:   lifecycle.Claim{Attempt: 1, CreatedAt: created, RunAt: created, SinceEnqueue: 1500 * time.Millisecond},
			metrics: map[string]string{"TasksSucceeded": "Count", "HandlerDuration": "Milliseconds", "EnqueueToClaim": "Milliseconds", "DueToClaim": "Milliseconds"},
			due:     1500,
		},
		{
			name:    "retry due later",
			claim:   lifecycle.Claim{Attempt: 3, CreatedAt: created, RunAt: created.Add(time.Minute), SinceEnqueue: time.Minute + 250*time.Millisecond},
			metrics: map[string]string{"TasksSucceeded": "Count", "HandlerDuration": "Milliseconds", "DueToClaim": "Milliseconds"},
			due:     250,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			// The task as the finish left it: a later run_at must not
			// change the claim's lateness.
			task := lease.Task{ID: "t1", Kind: "resize", Attempt: c.claim.Attempt, CreatedAt: created, RunAt: created.Add(time.Hour)}
			metrics.NewEMF(attemptLines(&buf), clock).Ended(lifecycle.Ended{Task: task, Outcome: lifecycle.OutcomeSucceeded, HandlerTime: 7 * time.Millisecond, Claim: &c.claim})
			lines := parseLines(t, buf.String())
			if len(lines) != 1 {
				t.Fatalf("want 1 line, got %d: %s", len(lines), buf.String())
			}
			l := lines[0]
			checkShape(t, l, c.metrics)
			if l.AWS.Timestamp != 1_700_000_000_123 {
				t.Errorf("timestamp %d", l.AWS.Timestamp)
			}
			if l.raw["Kind"] != "resize" || l.raw["task_id"] != "t1" || l.raw["TasksSucceeded"] != 1.0 || l.raw["DueToClaim"] != c.due || l.raw["HandlerDuration"] != 7.0 {
				t.Errorf("values: %v", l.raw)
			}
			if _, ok := c.metrics["EnqueueToClaim"]; ok && l.raw["EnqueueToClaim"] != float64(c.claim.SinceEnqueue.Milliseconds()) {
				t.Errorf("EnqueueToClaim = %v, want %d", l.raw["EnqueueToClaim"], c.claim.SinceEnqueue.Milliseconds())
			}
		})
	}
}

func TestAttemptLines(t *testing.T) {
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
		lifecycle.OutcomeHeld:        "TasksHeld",
		lifecycle.OutcomeDiverged:    "TasksDiverged",
	}
	for outcome, counter := range outcomes {
		t.Run(string(outcome), func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			task := lease.Task{ID: "t", Kind: "k", Attempt: 2, Payload: []byte(`{"secret":"s3cr3t"}`), Result: []byte(`"r3sult"`)}
			metrics.NewEMF(attemptLines(&buf), clockwork.NewFakeClock()).Ended(lifecycle.Ended{Task: task, Outcome: outcome, HandlerTime: 42 * time.Millisecond})
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

func TestAttemptLineOfEmptyKindStillMakesAMetric(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	metrics.NewEMF(attemptLines(&buf), nil).Ended(lifecycle.Ended{Task: lease.Task{ID: "t"}, Outcome: lifecycle.OutcomeFailed})
	l := parseLines(t, buf.String())
	if len(l) != 1 || l[0].raw["Kind"] != "unknown" {
		t.Fatalf("got %s", buf.String())
	}
}

func TestConcurrentAttemptLinesDoNotInterleave(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	e := metrics.NewEMF(attemptLines(&buf), nil)
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			e.Ended(lifecycle.Ended{Task: lease.Task{ID: strings.Repeat("x", i), Kind: "k"}, Outcome: lifecycle.OutcomeSucceeded, HandlerTime: time.Duration(i)})
		})
	}
	wg.Wait()
	if got := len(parseLines(t, buf.String())); got != 50 {
		t.Fatalf("want 50 lines, got %d", got)
	}
}

// Strings are written as encoding/json writes them, whatever they hold.
func TestAttemptLineStringsAreJSON(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"plain", `q"uote\back`, "ctl\x00\x1f\n\t", "é€😀", "bad\xffutf8\xc3", "\u2028"} {
		var buf bytes.Buffer
		metrics.NewEMF(attemptLines(&buf), nil).Ended(lifecycle.Ended{Task: lease.Task{ID: id, Kind: id}, Outcome: lifecycle.OutcomeFailed})
		l := parseLines(t, buf.String())
		want := strings.ToValidUTF8(id, "\ufffd")
		if len(l) != 1 || l[0].raw["task_id"] != want || l[0].raw["Kind"] != want {
			t.Errorf("%q: got %s", id, buf.String())
		}
	}
}

// A line costs no more than a handful of allocations (the observer's
// argument and the writer's own are outside it).
func TestAttemptLineAllocations(t *testing.T) {
	e := metrics.NewEMF(attemptLines(io.Discard), clockwork.NewFakeClock())
	end := lifecycle.Ended{
		Task: lease.Task{ID: "4f6c1a52-9d0e-4a53-8f7e-2f5b4a1c0001", Kind: "resize", Attempt: 1}, Outcome: lifecycle.OutcomeSucceeded,
		HandlerTime: 1234567 * time.Nanosecond, Claim: &lifecycle.Claim{Attempt: 1, SinceEnqueue: 42 * time.Millisecond},
	}
	if n := testing.AllocsPerRun(200, func() { e.Ended(end) }); n > 1 {
		t.Errorf("%v allocations per line, want at most 1", n)
	}
}

// kindsOf is the set of Kind dimension values of out's lines.
func kindsOf(t *testing.T, out string) map[string]int {
	t.Helper()
	kinds := map[string]int{}
	for _, l := range parseLines(t, out) {
		k, _ := l.raw[metrics.DimensionKind].(string)
		kinds[k]++
	}
	return kinds
}

// Kinds with no handler all count in one series, whatever kinds a sender
// to the work queue makes up: a thousand of them make no new metrics.
func TestAttemptLinesOfUnknownKindsShareOneSeries(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	e := metrics.NewEMF(attemptLines(&buf), clockwork.NewFakeClock())
	for i := range 1000 {
		task := lease.Task{ID: "t", Kind: "made-up-" + strconv.Itoa(i), Attempt: 1}
		e.Ended(lifecycle.Ended{Task: task, Outcome: lifecycle.OutcomeUnknownKind, Claim: &lifecycle.Claim{Attempt: 1}})
	}
	kinds := kindsOf(t, buf.String())
	if len(kinds) != 1 || kinds[metrics.UnknownKind] != 1000 {
		t.Fatalf("Kind values of 1000 unknown kinds: %d distinct (want 1, %q): %v", len(kinds), metrics.UnknownKind, first(kinds, 5))
	}
	l := parseLines(t, buf.String())[999]
	if l.raw["kind"] != "made-up-999" {
		t.Errorf("the unknown kind is not kept as the kind property: %v", l.raw)
	}
}

// Any outcome can come with a kind a sender chose (a task failed as it was
// created has no handler run): past MaxKinds distinct kinds, the rest share
// OtherKind.
func TestAttemptLinesKindDimensionIsBounded(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	e := metrics.NewEMF(attemptLines(&buf), clockwork.NewFakeClock())
	for i := range 1000 {
		task := lease.Task{ID: "t", Kind: "k" + strconv.Itoa(i), Attempt: 1}
		e.Ended(lifecycle.Ended{Task: task, Outcome: lifecycle.OutcomeFailed})
	}
	// A kind seen before the bound keeps its own series after it.
	e.Ended(lifecycle.Ended{Task: lease.Task{ID: "t", Kind: "k0"}, Outcome: lifecycle.OutcomeSucceeded})
	kinds := kindsOf(t, buf.String())
	if len(kinds) != metrics.MaxKinds+1 || kinds[metrics.OtherKind] != 1000-metrics.MaxKinds || kinds["k0"] != 2 {
		t.Fatalf("Kind values of 1000 kinds: %d distinct, %d lines of %q, %d of k0; want %d, %d, 2",
			len(kinds), kinds[metrics.OtherKind], metrics.OtherKind, kinds["k0"], metrics.MaxKinds+1, 1000-metrics.MaxKinds)
	}
}

func first(m map[string]int, n int) []string {
	var out []string
	for k := range m {
		if len(out) == n {
			break
		}
		out = append(out, k)
	}
	return out
}
