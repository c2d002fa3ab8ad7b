package leasehold_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/queues"
)

// servedBy records which worker ran which task, attempt by attempt.
type servedBy struct {
	mu   sync.Mutex
	runs map[string][]string // task id -> worker name per attempt
}

func (s *servedBy) add(id, worker string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runs[id] = append(s.runs[id], worker)
}

func (s *servedBy) of(id string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.runs[id]...)
}

// queueHandlers registers kinds that record the worker that ran them; a
// kind ending in "-flaky" fails its first attempt.
func queueHandlers(seen *servedBy, worker string, kinds ...string) *leasehold.Handlers {
	hs := leasehold.NewHandlers()
	for _, kind := range kinds {
		leasehold.Handle(hs, kind, func(_ context.Context, t *leasehold.Task[map[string]any]) (string, error) {
			seen.add(t.ID, worker)
			if strings.HasSuffix(t.Kind, "-flaky") && t.Attempt == 1 {
				return "", errors.New("first attempt fails on purpose")
			}
			return worker, nil
		})
	}
	return hs
}

// runWorker runs w.Run in a goroutine owned by the test: it is stopped and
// joined when the test ends, and must return nil.
func runWorker(t *testing.T, w *leasehold.Worker) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(awstest.Scale(time.Minute)):
			t.Errorf("Run did not return within a minute of being stopped")
		}
	})
}

// Two fleets with different kinds share one table, each serving its own
// queue. Tasks reach them through the client (per-kind defaults and the
// Queue option) and inline tokens (with and without "queue"); every one
// succeeds on the fleet that knows its kind, and a retried task comes back
// to its own queue.
func TestTwoFleetsOnTwoQueuesShareATable(t *testing.T) {
	t.Parallel()
	e := setupStack(t)
	other := awstest.NewQueues(t, e.cfg) // the second fleet's queue: other.Work
	alphaQueue, betaQueue := queues.NameFromURL(e.queues.Work), queues.NameFromURL(other.Work)
	seen := &servedBy{runs: map[string][]string{}}
	fast := leasehold.WorkerConfig{
		AWS: e.cfg, Table: e.table, QueueURL: e.queues.Work,
		Logger:                testLogger(t),
		Backoff:               func(int) time.Duration { return time.Second },
		UnknownKindBackoffMin: time.Second, UnknownKindBackoffMax: 2 * time.Second,
		LongPoll: time.Second, SweepEvery: time.Second,
	}

	// Fleet A serves the default queue; fleet B serves only the other one.
	ca, cb := fast, fast
	ca.DeadLetterQueueURL, ca.Handlers = e.queues.WorkDLQ, queueHandlers(seen, "A", "alpha", "alpha-flaky")
	cb.QueueURLs, cb.DeadLetterQueueURL, cb.Handlers = []string{other.Work}, other.WorkDLQ, queueHandlers(seen, "B", "beta", "beta-flaky", "beta-explicit")
	wa, err := leasehold.NewWorker(ca)
	if err != nil {
		t.Fatal(err)
	}
	wb, err := leasehold.NewWorker(cb)
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, wa)
	runWorker(t, wb)

	c, err := leasehold.NewClient(leasehold.ClientConfig{
		AWS: e.cfg, Table: e.table, QueueURL: e.queues.Work,
		KindQueues: map[string]string{"beta": betaQueue, "beta-flaky": betaQueue},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	want := map[string]string{} // task id -> the fleet that must run it
	enqueue := func(id, kind, fleet, queue string) {
		t.Helper()
		if _, err := c.Enqueue(ctx, leasehold.Submission{Kind: kind, Payload: map[string]any{"n": 1}, ID: id, Queue: queue}); err != nil {
			t.Fatalf("Enqueue %s: %v", id, err)
		}
		want[id] = fleet
	}
	enqueue("c-alpha", "alpha", "A", "")
	enqueue("c-alpha-flaky", "alpha-flaky", "A", "")
	enqueue("c-beta", "beta", "B", "")             // the kind's default queue
	enqueue("c-beta-flaky", "beta-flaky", "B", "") // retried: must come back to B
	enqueue("c-beta-explicit", "beta-explicit", "B", betaQueue)
	// Inline tokens: one names its queue but arrives on A (A does not know
	// the kind and hands it on to B without using an attempt); one arrives
	// on B without a queue and is recorded there, so its retry stays on B.
	e.send(t, e.queues.Work, fmt.Sprintf(`{"v":1,"kind":"beta","id":"i-beta-named","queue":%q}`, betaQueue))
	want["i-beta-named"] = "B"
	e.send(t, other.Work, `{"v":1,"kind":"beta-flaky","id":"i-beta-arrived"}`)
	want["i-beta-arrived"] = "B"
	e.send(t, e.queues.Work, `{"v":1,"kind":"alpha-flaky","id":"i-alpha"}`)
	want["i-alpha"] = "A"

	// A missing queue is a clear error and stores nothing.
	_, err = c.Enqueue(ctx, leasehold.Submission{
		Kind:  "beta",
		ID:    "c-nowhere",
		Queue: "no-such-queue-" + betaQueue[len(betaQueue)-8:],
	})
	if !errors.Is(err, leasehold.ErrQueueNotFound) {
		t.Fatalf("Enqueue to a missing queue: %v, want ErrQueueNotFound", err)
	}
	if _, err := c.Get(ctx, "c-nowhere"); !errors.Is(err, leasehold.ErrNotFound) {
		t.Fatalf("a task on a missing queue was stored: %v", err)
	}

	waitUntil(t, 2*time.Minute, func() bool {
		for id := range want {
			if s := e.status(t, id); s != lease.StatusSucceeded {
				if s == lease.StatusFailed || s == lease.StatusCancelled {
					t.Fatalf("task %s ended %s: %q", id, s, e.get(t, id).Error)
				}
				return false
			}
		}
		return true
	})
	for id, fleet := range want {
		task := e.get(t, id)
		if string(task.Result) != fmt.Sprintf("%q", fleet) {
			t.Errorf("task %s: result %s, want it run by fleet %s", id, task.Result, fleet)
		}
		for _, w := range seen.of(id) {
			if w != fleet {
				t.Errorf("task %s ran on fleet %s (runs %v), want only %s", id, w, seen.of(id), fleet)
			}
		}
		wantQueue := map[string]string{"A": "", "B": betaQueue}[fleet]
		if id == "i-alpha" {
			wantQueue = alphaQueue // recorded from the queue it arrived on
		}
		if task.Queue != wantQueue {
			t.Errorf("task %s: queue %q, want %q", id, task.Queue, wantQueue)
		}
		if strings.HasSuffix(task.Kind, "-flaky") && (task.Attempt != 2 || len(seen.of(id)) != 2) {
			t.Errorf("task %s: attempt %d, runs %v; want a failed first attempt retried on its own queue", id, task.Attempt, seen.of(id))
		}
	}
	// The inline task that arrived on A named B: A found no handler and
	// released it without using an attempt.
	named := e.get(t, "i-beta-named")
	if named.Attempt != 1 || len(named.History) < 2 || !strings.Contains(named.History[0].Error, "unknown task kind") {
		t.Errorf("i-beta-named: attempt %d, history %+v; want an unknown-kind release on A, then one attempt on B", named.Attempt, named.History)
	}
}

// A task whose kind its queue's worker does not know is neither failed nor
// charged an attempt: it is released again and again with the reason, even
// with a single attempt allowed.
func TestUnknownKindIsNotFailed(t *testing.T) {
	t.Parallel()
	e := setupStack(t)
	seen := &servedBy{runs: map[string][]string{}}
	w, err := leasehold.NewWorker(leasehold.WorkerConfig{
		AWS: e.cfg, Table: e.table, QueueURL: e.queues.Work, DeadLetterQueueURL: e.queues.WorkDLQ,
		Handlers: queueHandlers(seen, "A", "alpha"),
		Logger:   testLogger(t), UnknownKindBackoffMin: time.Second, UnknownKindBackoffMax: 2 * time.Second,
		LongPoll: time.Second, SweepEvery: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	c, err := leasehold.NewClient(leasehold.ClientConfig{AWS: e.cfg, Table: e.table, QueueURL: e.queues.Work})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Enqueue(t.Context(), leasehold.Submission{Kind: "gamma", ID: "unknown", MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, time.Minute, func() bool { return len(e.get(t, "unknown").History) >= 3 })
	task := e.get(t, "unknown")
	if task.Status == lease.StatusFailed || task.Attempt > 1 || task.UnknownKindSince.IsZero() {
		t.Fatalf("task %s attempt %d, unknown since %s; want not failed, no attempt used", task.Status, task.Attempt, task.UnknownKindSince)
	}
	for _, h := range task.History {
		if h.Status != lease.StatusPending || h.Attempt != 1 || !strings.Contains(h.Error, `unknown task kind "gamma"`) {
			t.Fatalf("history %+v, want unknown-kind releases of attempt 1 only", task.History)
		}
	}
	info, err := c.Get(t.Context(), "unknown")
	if err != nil || !strings.Contains(info.Error, "unknown task kind") || info.Status == leasehold.StatusFailed {
		t.Fatalf("Get = %+v, %v; want the reason visible", info, err)
	}
}

func TestClientRejectsBadQueueNames(t *testing.T) {
	t.Parallel()
	_, err := leasehold.NewClient(leasehold.ClientConfig{Table: "t", KindQueues: map[string]string{"k": "jobs.fifo"}})
	if !errors.Is(err, leasehold.ErrConfig) {
		t.Fatalf("NewClient with a FIFO kind queue: %v, want ErrConfig", err)
	}
	c, err := leasehold.NewClient(leasehold.ClientConfig{Table: "t", QueueURL: "http://127.0.0.1:1/000000000000/work"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Enqueue(t.Context(), leasehold.Submission{Kind: "k", Queue: "has space"})
	if !errors.Is(err, leasehold.ErrInvalid) {
		t.Fatalf("Enqueue with a bad queue name: %v, want ErrInvalid", err)
	}
}
