package metrics_test

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"slices"
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

// inlineAttempt is a succeeded first attempt of an inline task of kind:
// a handler of a few microseconds, claimed tens of milliseconds after its
// creation (the bench's echo task, as HandleSQS reports it).
func inlineAttempt(rng *rand.Rand, i int, kind string) lifecycle.Ended {
	created := time.UnixMilli(1_700_000_000_000)
	since := 30*time.Millisecond + time.Duration(rng.IntN(40_000))*time.Microsecond
	return lifecycle.Ended{
		Task:        lease.Task{ID: "4f6c1a52-9d0e-4a53-8f7e-" + strconv.Itoa(100000000000+i), Kind: kind, Attempt: 1, CreatedAt: created, RunAt: created},
		Outcome:     lifecycle.OutcomeSucceeded,
		HandlerTime: time.Duration(2_000+rng.IntN(60_000)) * time.Nanosecond,
		Claim:       &lifecycle.Claim{Attempt: 1, CreatedAt: created, RunAt: created, SinceEnqueue: since},
	}
}

// A batch's attempts write nothing until Flush, then one document for
// their kind: each counter the number of attempts it counts, each duration
// every attempt's value (rounded), and no task id.
func TestBatchIsOneDocumentPerKind(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	clock := clockwork.NewFakeClockAt(time.UnixMilli(1_700_000_000_123))
	e := metrics.NewEMF(&buf, clock)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 10 {
		e.Ended(inlineAttempt(rng, i, "echo"))
	}
	retry := inlineAttempt(rng, 10, "resize")
	retry.Outcome, retry.HandlerTime = lifecycle.OutcomeRetried, 1234*time.Millisecond
	retry.Claim.Attempt = 2 // no EnqueueToClaim
	e.Ended(retry)
	failed := inlineAttempt(rng, 11, "resize")
	failed.Outcome, failed.HandlerTime = lifecycle.OutcomeFailed, 1236*time.Millisecond
	e.Ended(failed)
	if buf.Len() != 0 {
		t.Fatalf("written before the flush: %s", buf.String())
	}
	e.Flush()
	lines := parseLines(t, buf.String())
	if len(lines) != 2 {
		t.Fatalf("want 2 documents (echo, resize), got %d: %s", len(lines), buf.String())
	}
	echo, resize := lines[0], lines[1]
	checkShape(t, echo, map[string]string{"TasksSucceeded": "Count", "HandlerDuration": "Milliseconds", "EnqueueToClaim": "Milliseconds", "DueToClaim": "Milliseconds"})
	checkShape(t, resize, map[string]string{"TasksRetried": "Count", "TasksFailed": "Count", "HandlerDuration": "Milliseconds", "EnqueueToClaim": "Milliseconds", "DueToClaim": "Milliseconds"})
	if echo.AWS.Timestamp != 1_700_000_000_123 || echo.raw["Kind"] != "echo" || echo.raw["TasksSucceeded"] != 10.0 {
		t.Errorf("echo: %v", echo.raw)
	}
	for _, name := range []string{"HandlerDuration", "EnqueueToClaim", "DueToClaim"} {
		if n := len(samples(echo.raw[name])); n != 10 {
			t.Errorf("echo %s: %d samples, want 10: %v", name, n, echo.raw[name])
		}
	}
	if resize.raw["TasksRetried"] != 1.0 || resize.raw["TasksFailed"] != 1.0 {
		t.Errorf("resize counters: %v", resize.raw)
	}
	// Two significant digits: 1234 and 1236 ms both count as 1200.
	if got := samples(resize.raw["HandlerDuration"]); !slices.Equal(got, []float64{1200, 1200}) {
		t.Errorf("resize HandlerDuration %v, want [1200 1200]", got)
	}
	if got := samples(resize.raw["EnqueueToClaim"]); len(got) != 1 {
		t.Errorf("resize EnqueueToClaim %v: want only the first attempt's", got)
	}
	if strings.Contains(buf.String(), "4f6c1a52") || strings.Contains(buf.String(), "task_id") {
		t.Errorf("a document names a task: %s", buf.String())
	}
	// Flushed figures are not written again.
	buf.Reset()
	e.Flush()
	if buf.Len() != 0 {
		t.Errorf("a second flush wrote %s", buf.String())
	}
}

// Issue 38, point 4: at most 50 bytes of metrics per task on average, for a
// Lambda batch of ten inline tasks and for a hundred flushed together (Run).
func TestBytesPerTask(t *testing.T) {
	t.Parallel()
	for _, n := range []int{10, 100} {
		var buf bytes.Buffer
		e := metrics.NewEMF(&buf, clockwork.NewFakeClockAt(time.UnixMilli(1_765_130_000_000)))
		rng := rand.New(rand.NewPCG(uint64(n), 7))
		for i := range n {
			e.Ended(inlineAttempt(rng, i, "echo"))
		}
		e.Flush()
		per := float64(buf.Len()) / float64(n)
		t.Logf("%d tasks: %d bytes, %.1f per task: %s", n, buf.Len(), per, buf.String())
		if per > 50 {
			t.Errorf("%d tasks: %.1f bytes of metrics per task, want at most 50", n, per)
		}
		parseLines(t, buf.String())
	}
}

// A duration never has more than MaxValues distinct values in a document:
// the kind's figures are written first. The values all arrive.
func TestValuesPerDocumentAreBounded(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	e := metrics.NewEMF(&buf, clockwork.NewFakeClock())
	const n = 180
	for i := range n {
		// 180 distinct values: 1.0, 1.1, ... 9.9 ms, then 10, 11, ... 99 ms.
		d := time.Duration(10+i) * 100 * time.Microsecond
		if i >= 90 {
			d = time.Duration(i-80) * time.Millisecond
		}
		e.Ended(lifecycle.Ended{Task: lease.Task{Kind: "k"}, Outcome: lifecycle.OutcomeSucceeded, HandlerTime: d})
	}
	e.Flush()
	total := 0
	lines := parseLines(t, buf.String())
	for _, l := range lines {
		h := l.raw["HandlerDuration"]
		if m, ok := h.(map[string]any); ok && len(m["Values"].([]any)) > metrics.MaxValues {
			t.Errorf("%d values in one document", len(m["Values"].([]any)))
		}
		if a, ok := h.([]any); ok && len(a) > metrics.MaxValues {
			t.Errorf("an array of %d values", len(a))
		}
		total += len(samples(h))
	}
	if len(lines) != 2 || total != n {
		t.Errorf("%d documents with %d samples, want 2 with %d", len(lines), total, n)
	}
}

// A kind's figures are written once they count MaxPending attempts, even
// with no flush and nothing new in their values.
func TestPendingAttemptsAreBounded(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	e := metrics.NewEMF(&buf, clockwork.NewFakeClock())
	for range metrics.MaxPending {
		e.Ended(lifecycle.Ended{Task: lease.Task{Kind: "k"}, Outcome: lifecycle.OutcomeSucceeded, HandlerTime: time.Millisecond})
	}
	lines := parseLines(t, buf.String())
	if len(lines) != 1 || lines[0].raw["TasksSucceeded"] != float64(metrics.MaxPending) {
		t.Fatalf("after %d attempts: %s", metrics.MaxPending, buf.String())
	}
}

// Run's flusher writes on every tick and once more when it stops.
func TestFlushLoop(t *testing.T) {
	t.Parallel()
	buf := &syncBuffer{}
	clock := clockwork.NewFakeClock()
	e := metrics.NewEMF(buf, clock)
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { e.FlushLoop(ctx, time.Second) })
	e.Ended(lifecycle.Ended{Task: lease.Task{Kind: "k"}, Outcome: lifecycle.OutcomeSucceeded})
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	for buf.lines() < 1 {
		time.Sleep(time.Millisecond) // the loop's flush after the tick
	}
	e.Ended(lifecycle.Ended{Task: lease.Task{Kind: "k"}, Outcome: lifecycle.OutcomeFailed})
	cancel()
	wg.Wait()
	if got := buf.lines(); got != 2 {
		t.Fatalf("want 2 documents (the tick's, the stop's), got %d", got)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) lines() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Count(s.b.String(), "\n")
}

// Kinds with no handler all count in one series, whatever kinds a sender
// makes up, and the document lists a bounded few of them; past MaxKinds
// kinds, the rest share OtherKind.
func TestKindsAreBounded(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	e := metrics.NewEMF(&buf, clockwork.NewFakeClock())
	for i := range 1000 {
		e.Ended(lifecycle.Ended{Task: lease.Task{Kind: "made-up-" + strconv.Itoa(i)}, Outcome: lifecycle.OutcomeUnknownKind})
		e.Ended(lifecycle.Ended{Task: lease.Task{Kind: "k" + strconv.Itoa(i)}, Outcome: lifecycle.OutcomeFailed})
	}
	e.Flush()
	lines := parseLines(t, buf.String())
	byKind := map[string]emfLine{}
	for _, l := range lines {
		byKind[l.raw["Kind"].(string)] = l
	}
	if len(lines) != metrics.MaxKinds+2 || len(byKind) != metrics.MaxKinds+2 {
		t.Fatalf("%d documents, %d Kind values; want %d", len(lines), len(byKind), metrics.MaxKinds+2)
	}
	unknown, other := byKind[metrics.UnknownKind], byKind[metrics.OtherKind]
	if unknown.raw["TasksUnknownKind"] != 1000.0 || other.raw["TasksFailed"] != float64(1000-metrics.MaxKinds) {
		t.Errorf("shared series: %v; %v", unknown.raw, other.raw)
	}
	if names, _ := unknown.raw["kinds"].([]any); len(names) == 0 || len(names) > 10 || names[0] != "made-up-0" {
		t.Errorf("the unknown kinds listed: %v", unknown.raw["kinds"])
	}
}

// Kinds are written as encoding/json writes them, whatever they hold.
func TestDocumentStringsAreJSON(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"plain", `q"uote\back`, "ctl\x00\x1f\n\t", "é€😀", "bad\xffutf8\xc3", "\u2028"} {
		var buf bytes.Buffer
		e := metrics.NewEMF(&buf, nil)
		e.Ended(lifecycle.Ended{Task: lease.Task{ID: "t", Kind: kind}, Outcome: lifecycle.OutcomeFailed})
		e.Flush()
		l := parseLines(t, buf.String())
		if len(l) != 1 || l[0].raw["Kind"] != strings.ToValidUTF8(kind, "\ufffd") {
			t.Errorf("%q: got %s", kind, buf.String())
		}
	}
}

// Attempts that end at once from many goroutines are all counted, and a
// flush racing them writes whole documents.
func TestConcurrentAttempts(t *testing.T) {
	t.Parallel()
	buf := &syncBuffer{}
	e := metrics.NewEMF(buf, nil)
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			e.Ended(lifecycle.Ended{Task: lease.Task{Kind: "k"}, Outcome: lifecycle.OutcomeSucceeded, HandlerTime: time.Duration(i) * time.Millisecond})
			if i%10 == 0 {
				e.Flush()
			}
		})
	}
	wg.Wait()
	e.Flush()
	total := 0.0
	for _, l := range parseLines(t, buf.b.String()) {
		total += l.raw["TasksSucceeded"].(float64)
	}
	if total != 50 {
		t.Fatalf("counted %v attempts, want 50", total)
	}
}

// A steady stream of batches allocates nothing per attempt once its kinds
// have been seen: the figures live in place and the document's buffer is
// reused.
func TestBatchAllocations(t *testing.T) {
	e := metrics.NewEMF(io.Discard, clockwork.NewFakeClock())
	rng := rand.New(rand.NewPCG(3, 4))
	batch := make([]lifecycle.Ended, 10)
	for i := range batch {
		batch[i] = inlineAttempt(rng, i, "echo")
	}
	run := func() {
		for _, a := range batch {
			e.Ended(a)
		}
		e.Flush()
	}
	run()
	if n := testing.AllocsPerRun(100, run); n > 0 {
		t.Errorf("%v allocations per batch of ten, want none", n)
	}
}
