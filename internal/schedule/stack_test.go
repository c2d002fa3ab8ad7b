package schedule_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/jonboulle/clockwork"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/internal/schedule"
)

// stack is a fresh table and work queue of the local stack with a worker
// that counts the runs of each "tick" task.
type stack struct {
	sqs  *sqs.Client
	work string
	mu   sync.Mutex
	runs map[string]int // task id -> handler runs
}

func (s *stack) count(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runs[id]
}

func (s *stack) snapshot() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.runs)
}

// setup starts the worker; it is stopped and joined when the test ends.
func setup(t *testing.T) *stack {
	t.Helper()
	cfg := awstest.Config(t)
	table := awstest.NewTable(t, cfg)
	qs := awstest.NewQueues(t, cfg)
	st := &stack{sqs: sqs.NewFromConfig(cfg), work: qs.Work, runs: map[string]int{}}
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "tick", func(_ context.Context, task *leasehold.Task[json.RawMessage]) (string, error) {
		st.mu.Lock()
		st.runs[task.ID]++
		st.mu.Unlock()
		return "ticked", nil
	})
	w, err := leasehold.NewWorker(leasehold.WorkerConfig{AWS: cfg, Table: table, QueueURL: qs.Work, DeadLetterQueueURL: qs.WorkDLQ, Handlers: hs,
		Logger: slog.New(slog.DiscardHandler), SweepEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker: %v", err)
		}
	})
	return st
}

// startFirer runs schedule.Run in a goroutine; stop cancels and joins it
// (also at the end of the test).
func startFirer(t *testing.T, cfg schedule.Config) (fired <-chan schedule.Fired, stop func()) {
	t.Helper()
	ch := make(chan schedule.Fired, 1000)
	cfg.OnFire = func(f schedule.Fired) { ch <- f }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- schedule.Run(ctx, cfg) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("schedule.Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return ch, stop
}

func receive(t *testing.T, fired <-chan schedule.Fired, n int, bound time.Duration) []schedule.Fired {
	t.Helper()
	var out []schedule.Fired
	timeout := time.After(awstest.Scale(bound))
	for len(out) < n {
		select {
		case f := <-fired:
			out = append(out, f)
		case <-timeout:
			t.Fatalf("%d of %d slots fired within %s", len(out), n, awstest.Scale(bound))
		}
	}
	return out
}

func drain(fired <-chan schedule.Fired) []schedule.Fired {
	var out []schedule.Fired
	for {
		select {
		case f := <-fired:
			out = append(out, f)
		default:
			return out
		}
	}
}

// waitFor polls cond until it holds, giving up after the scaled bound.
func waitFor(t *testing.T, what string, bound time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(awstest.Scale(bound))
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %s waiting for %s", awstest.Scale(bound), what)
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitDrained waits until the work queue holds no message, visible, in
// flight or delayed: every token sent has been handled and deleted.
func (s *stack) waitDrained(t *testing.T) {
	t.Helper()
	waitFor(t, "the work queue to drain", time.Minute, func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		out, err := s.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(s.work),
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages,
				sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible, sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed}})
		if err != nil {
			t.Logf("queue attributes: %v", err)
			return false
		}
		for _, v := range out.Attributes {
			if n, _ := strconv.Atoi(v); n != 0 {
				return false
			}
		}
		return true
	})
}

// checkOnce fails unless each id ran exactly once.
func (s *stack) checkOnce(t *testing.T, fired []schedule.Fired) {
	t.Helper()
	for _, f := range fired {
		if n := s.count(f.TaskID); n != 1 {
			t.Errorf("task %s ran %d times, want 1", f.TaskID, n)
		}
	}
}

// Two firers of one rate(2 seconds) schedule (two runners, or a runner
// beside EventBridge) send every slot's token twice; each slot's task runs
// once.
func TestScheduleFiresEachSlotOnceOnStack(t *testing.T) {
	t.Parallel()
	st := setup(t)
	e, err := schedule.Parse("rate(2 seconds)", schedule.Local)
	if err != nil {
		t.Fatal(err)
	}
	spec := schedule.Spec{Name: "tick2s", Expr: e, Kind: "tick", Payload: []byte(`{"n":1}`), CatchUp: schedule.CatchUp{Mode: schedule.None}}
	cfg := schedule.Config{SQS: st.sqs, QueueURL: st.work, Specs: []schedule.Spec{spec}}
	a, stopA := startFirer(t, cfg)
	b, stopB := startFirer(t, cfg)

	slots := receive(t, a, 3, 30*time.Second)
	for _, f := range slots {
		id := f.TaskID
		waitFor(t, "task "+id+" to run", 30*time.Second, func() bool { return st.count(id) > 0 })
	}
	stopA()
	stopB()
	all := append(append(slots, drain(a)...), drain(b)...)
	byB := map[string]bool{}
	for _, f := range all[len(slots):] {
		byB[f.TaskID] = true
	}
	sent := map[string]int{}
	for _, f := range all {
		sent[f.TaskID]++
		if f.Slot.UnixMilli()%2000 != 0 {
			t.Errorf("slot %s is not on the 2s grid", f.Slot)
		}
	}
	twice := 0
	for _, n := range sent {
		if n == 2 {
			twice++
		}
	}
	if twice < 2 {
		t.Fatalf("only %d slots were sent by both firers (%v): the test did not deliver duplicates", twice, sent)
	}
	// Once the queue is empty every token, first or duplicate, was handled.
	st.waitDrained(t)
	st.checkOnce(t, all)
	if got := st.snapshot(); len(got) != len(sent) {
		t.Errorf("%d tasks ran for %d slots sent: %v", len(got), len(sent), got)
	}
}

// A runner that starts after missing slots catches up by its policy: all:3
// sends the three latest, latest the latest one, none nothing. A restart
// sends the same slots again and starts no task twice.
func TestScheduleCatchUpOnStack(t *testing.T) {
	t.Parallel()
	st := setup(t)
	e, err := schedule.Parse("rate(2 seconds)", schedule.Local)
	if err != nil {
		t.Fatal(err)
	}
	// 1.5s past a slot with a tolerance of 1s: even the latest slot was
	// missed. The fake clock never moves, so each firer decides once.
	now := time.Now().Truncate(2 * time.Second).Add(1500 * time.Millisecond)
	latestSlot := now.Add(-1500 * time.Millisecond)
	start := func(name string, c schedule.CatchUp) (<-chan schedule.Fired, func(), *clockwork.FakeClock) {
		clock := clockwork.NewFakeClockAt(now)
		fired, stop := startFirer(t, schedule.Config{SQS: st.sqs, QueueURL: st.work, Clock: clock, Tolerance: time.Second,
			Specs: []schedule.Spec{{Name: name, Expr: e, Kind: "tick", CatchUp: c}}})
		return fired, stop, clock
	}
	ids := func(fs []schedule.Fired) []string {
		var out []string
		for _, f := range fs {
			out = append(out, f.TaskID)
		}
		return out
	}
	want := func(name string, n int) []string {
		var out []string
		for i := n - 1; i >= 0; i-- {
			out = append(out, schedule.TaskID(name, latestSlot.Add(-time.Duration(i)*2*time.Second)))
		}
		return out
	}

	allFired, stopAll, _ := start("all3", schedule.CatchUp{Mode: schedule.All, Limit: 3, MaxAge: time.Minute})
	got := receive(t, allFired, 3, 30*time.Second)
	if g, w := ids(got), want("all3", 3); !slices.Equal(g, w) {
		t.Fatalf("all:3 fired %v, want %v", g, w)
	}
	latestFired, stopLatest, _ := start("latest", schedule.CatchUp{Mode: schedule.Latest, MaxAge: time.Minute})
	gotLatest := receive(t, latestFired, 1, 30*time.Second)
	if g, w := ids(gotLatest), want("latest", 1); !slices.Equal(g, w) {
		t.Fatalf("latest fired %v, want %v", g, w)
	}
	noneFired, stopNone, noneClock := start("none", schedule.CatchUp{Mode: schedule.None})
	// Once the firer waits for its next slot, its decision at start is made.
	if err := noneClock.BlockUntilContext(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	stopNone()
	if f := drain(noneFired); len(f) != 0 {
		t.Fatalf("none fired %v, want nothing", ids(f))
	}
	stopAll()
	stopLatest()
	// A restart: the same decision, the same tokens, no second run.
	again, stopAgain, _ := start("all3", schedule.CatchUp{Mode: schedule.All, Limit: 3, MaxAge: time.Minute})
	if g := ids(receive(t, again, 3, 30*time.Second)); !slices.Equal(g, want("all3", 3)) {
		t.Fatalf("restarted all:3 fired %v", g)
	}
	stopAgain()

	st.waitDrained(t)
	st.checkOnce(t, append(got, gotLatest...))
	if runs := st.snapshot(); len(runs) != 4 {
		t.Errorf("tasks run: %v, want the 3 of all:3 and the 1 of latest", runs)
	}
}
