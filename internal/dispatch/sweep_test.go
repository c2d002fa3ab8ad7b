package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/dispatch"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/queues"
)

// enqueueLater stores n tasks due after delay, beyond SQS's cap, so that
// only the sweep dispatches them.
func (e *unitEnv) enqueueLater(t *testing.T, n int, delay time.Duration) []string {
	t.Helper()
	tasks := make([]lease.NewTask, n)
	ids := make([]string, n)
	for i := range tasks {
		ids[i] = fmt.Sprintf("task-%04d", i)
		tasks[i] = lease.NewTask{ID: ids[i], Kind: "k", RunAt: e.clock.Now().Add(delay)}
	}
	res, err := e.d.Enqueue(t.Context(), tasks)
	if err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	for _, r := range res {
		if r.Sent {
			t.Fatalf("task %s due in %s got a token at once", r.Task.ID, delay)
		}
	}
	return ids
}

func TestConcurrentSweepsDispatchEachTaskOnce(t *testing.T) {
	t.Parallel()
	e := setupUnit(t, func(c *dispatch.Config) { c.SweepPageSize = 16 })
	ids := e.enqueueLater(t, 200, time.Hour)
	e.clock.Advance(time.Hour)
	const sweepers = 4
	stats := make([]dispatch.SweepStats, sweepers)
	errs := make([]error, sweepers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range sweepers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			stats[i], errs[i] = e.d.Sweep(t.Context(), e.clock.Now())
		}()
	}
	close(start)
	wg.Wait()
	var total dispatch.SweepStats
	for i := range sweepers {
		if errs[i] != nil {
			t.Fatalf("sweep %d: %v", i, errs[i])
		}
		total.Dispatched += stats[i].Dispatched
		total.Raced += stats[i].Raced
	}
	got := tokenIDs(e.sqs.take())
	if total.Dispatched != len(ids) || len(got) != len(ids) {
		t.Fatalf("%d dispatched, %d distinct tokens; want %d", total.Dispatched, len(got), len(ids))
	}
	for id, n := range got {
		if n != 1 {
			t.Fatalf("task %s got %d tokens", id, n)
		}
	}
	t.Logf("%d sweeps: %d dispatched, %d raced", sweepers, total.Dispatched, total.Raced)
}

func TestSweepPagesThroughABacklog(t *testing.T) {
	t.Parallel()
	e := setupUnit(t, func(c *dispatch.Config) { c.SweepPageSize = 3 })
	ids := e.enqueueLater(t, 150, 16*time.Minute)
	e.clock.Advance(16 * time.Minute)
	st := e.sweep(t)
	if st != (dispatch.SweepStats{Due: len(ids), Dispatched: len(ids)}) {
		t.Fatalf("sweep: %+v", st)
	}
	if got := tokenIDs(e.sqs.take()); len(got) != len(ids) {
		t.Fatalf("%d tokens, want %d", len(got), len(ids))
	}
}

func TestSweepFindsExpiredLeases(t *testing.T) {
	t.Parallel()
	e := setupUnit(t)
	ctx := t.Context()
	if _, err := e.store.Create(ctx, lease.NewTask{ID: "held", Kind: "k", MaxAttempts: 2}); err != nil {
		t.Fatal(err)
	}
	held, err := e.store.Claim(ctx, "held", "w1")
	if err != nil {
		t.Fatal(err)
	}
	e.sqs.take()
	due := held.LeaseUntil.Add(lease.DefaultSkew + grace)
	e.clock.Advance(due.Sub(e.clock.Now()) - time.Millisecond)
	// The entry from the create is due, but the claim left it in place:
	// the sweep moves it to the lease's expiry plus skew plus grace.
	if st := e.sweep(t); st.Dispatched != 0 || st.Raced != 1 {
		t.Fatalf("sweep while the lease may still be live: %+v", st)
	}
	if st := e.sweep(t); st.Due != 0 {
		t.Fatalf("sweep after the re-arm: %+v", st)
	}
	e.clock.Advance(time.Millisecond)
	if st := e.sweep(t); st.Dispatched != 1 {
		t.Fatalf("sweep after the lease expired: %+v", st)
	}
	if got := tokenIDs(e.sqs.take()); got["held"] != 1 {
		t.Fatalf("tokens %v", got)
	}
	// The token lets another worker take over.
	again, err := e.store.Claim(ctx, "held", "w2")
	if err != nil || again.Attempt != 2 {
		t.Fatalf("takeover: attempt %d, %v", again.Attempt, err)
	}
}

func TestSweepSendFailureIsRetriedAfterTheGrace(t *testing.T) {
	t.Parallel()
	e := setupUnit(t)
	e.enqueueLater(t, 12, 30*time.Minute)
	e.clock.Advance(30 * time.Minute)
	e.sqs.set(func(f *fakeSQS) { f.failAll = true })
	st, err := e.d.Sweep(t.Context(), e.clock.Now())
	if !errors.Is(err, dispatch.ErrSweep) || st.Failed != 12 || st.Dispatched != 0 {
		t.Fatalf("sweep with the queue down: %+v, %v", st, err)
	}
	e.sqs.set(func(f *fakeSQS) { f.failAll = false })
	if st := e.sweep(t); st.Due != 0 {
		t.Fatalf("sweep within the grace: %+v", st)
	}
	e.clock.Advance(grace)
	if st := e.sweep(t); st.Dispatched != 12 {
		t.Fatalf("sweep after the grace: %+v", st)
	}
}

func TestSweepFinishedTasksLeaveTheIndex(t *testing.T) {
	t.Parallel()
	e := setupUnit(t)
	ctx := t.Context()
	if fails := e.intake(t, event(message{"m1", `{"v":1,"kind":"k"}`})); len(fails) != 0 {
		t.Fatal(fails)
	}
	task, err := e.store.Claim(ctx, "m1", "w1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Finish(ctx, task.LeaseOf(), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(24 * time.Hour)
	if st := e.sweep(t); st.Due != 0 {
		t.Fatalf("sweep found a finished task: %+v", st)
	}
}

// fakeQueues resolves a fixed set of queue names; others do not exist.
type fakeQueues map[string]string

func (f fakeQueues) URL(_ context.Context, name string) (string, error) {
	if name == "" {
		return workQueue, nil
	}
	if u, ok := f[name]; ok {
		return u, nil
	}
	return "", fmt.Errorf("look up queue %s: %w", name, queues.ErrNotFound)
}

func TestSweepSendsToTheTasksQueue(t *testing.T) {
	t.Parallel()
	const imagesURL = "http://sqs.test/000000000000/images"
	e := setupUnit(t, func(c *dispatch.Config) { c.Queues = fakeQueues{"images": imagesURL} })
	later := e.clock.Now().Add(time.Hour)
	tasks := []lease.NewTask{
		{ID: "default", Kind: "k", RunAt: later},
		{ID: "images", Kind: "k", RunAt: later, Queue: "images"},
		{ID: "gone", Kind: "k", RunAt: later, Queue: "deleted"},
	}
	if _, err := e.d.Enqueue(t.Context(), tasks); err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	e.clock.Advance(time.Hour)
	st, err := e.d.Sweep(t.Context(), e.clock.Now())
	if !errors.Is(err, dispatch.ErrSweep) || st.Dispatched != 2 || st.Failed != 1 {
		t.Fatalf("Sweep = %+v, %v; want 2 dispatched, 1 failed (its queue is gone)", st, err)
	}
	got := map[string]string{}
	for _, tok := range e.sqs.take() {
		got[tok.ID] = tok.Queue
	}
	if got["default"] != workQueue || got["images"] != imagesURL || got["gone"] != "" {
		t.Fatalf("tokens went to %v", got)
	}
	// The task whose queue is gone is not lost: it is due again after the
	// grace, for a later sweep.
	task, err := e.store.Get(t.Context(), "gone")
	if err != nil || task.Status != lease.StatusPending || !task.DispatchAt.Equal(e.clock.Now().Add(grace)) {
		t.Fatalf("task of a deleted queue: %+v, %v", task, err)
	}
	if !strings.Contains(e.logs.String(), "could not resolve the tasks' queue") {
		t.Fatalf("no log line for the missing queue:\n%s", e.logs.String())
	}
}
