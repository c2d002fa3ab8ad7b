package leasehold_test

import (
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/internal/token"
)

// newCreateWaitClient is a client of e's table and queue that leaves the
// create of a task due now to the worker, for at most wait.
func newCreateWaitClient(t *testing.T, e *clientEnv, wait time.Duration) *leasehold.Client {
	t.Helper()
	c, err := leasehold.NewClient(leasehold.ClientConfig{AWS: e.cfg, Table: e.table, QueueURL: e.queues.Work, CreateWait: wait})
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	return c
}

// With a CreateWait and a worker polling, the worker stores the task
// (created and claimed in one write, under the client's create-first
// token) and Enqueue returns it stored: Get and List show it at once. The
// id keeps its contract afterwards: the same task again is a duplicate,
// another payload a conflict, also once the task has finished.
func TestClientCreateWaitWorkerStoresTheTask(t *testing.T) {
	t.Parallel()
	e := newClientEnv(t)
	e.startWorker(t, leasehold.WorkerConfig{})
	c := newCreateWaitClient(t, e, awstest.Scale(30*time.Second))
	ctx := testCtx(t, 2*time.Minute)
	id := "cw-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	sub := leasehold.Submission{Kind: "greet", Payload: map[string]any{"name": "ada"}, ID: id}
	info, err := c.Enqueue(ctx, sub)
	if err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	if info.Status == leasehold.StatusPending || info.Attempt != 1 {
		t.Fatalf("Enqueue returned %s on attempt %d; want the worker's create, claimed (RUNNING or ended) on attempt 1", info.Status, info.Attempt)
	}
	if got, err := c.Get(ctx, id); err != nil || got.ID != id {
		t.Fatalf("Get right after Enqueue: %+v, %v", got, err)
	}
	page, err := c.List(ctx, leasehold.ListOptions{Limit: 1000})
	if err != nil || !slices.ContainsFunc(page.Tasks, func(ti leasehold.TaskInfo) bool { return ti.ID == id }) {
		t.Fatalf("List right after Enqueue does not show %s (%v)", id, err)
	}
	_, stored, err := e.store.GetWithToken(ctx, id)
	if err != nil || !token.CreateFirst(stored) {
		t.Fatalf("stored under create token %q (%v); want the client's create-first token", stored, err)
	}
	if done, err := c.Wait(ctx, id); err != nil || done.Status != leasehold.StatusSucceeded {
		t.Fatalf("Wait: %+v, %v", done, err)
	}
	if _, err := c.Enqueue(ctx, sub); !errors.Is(err, leasehold.ErrAlreadyExists) {
		t.Fatalf("the same task again, finished: %v, want ErrAlreadyExists", err)
	}
	other := sub
	other.Payload = map[string]any{"name": "bob"}
	var ce *leasehold.ConflictError
	if _, err := c.Enqueue(ctx, other); !errors.As(err, &ce) || ce.Status != leasehold.StatusSucceeded {
		t.Fatalf("another payload, finished: %v, want a conflict with the SUCCEEDED task", err)
	}
}

// No worker polls within the wait: the client stores the task itself,
// PENDING, under the create token its token carries, and the worker that
// starts later claims it (its create first finds the client's) and runs it
// once.
func TestClientCreateWaitStoresTheTaskWhenNoWorkerCame(t *testing.T) {
	t.Parallel()
	e := newClientEnv(t)
	const wait = 300 * time.Millisecond
	c := newCreateWaitClient(t, e, wait)
	ctx := testCtx(t, 2*time.Minute)
	id := "cw-none-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	start := time.Now()
	info, err := c.Enqueue(ctx, leasehold.Submission{Kind: "greet", Payload: map[string]any{"name": "ada"}, ID: id})
	if err != nil || info.Status != leasehold.StatusPending {
		t.Fatalf("Enqueue: %+v, %v; want the client's PENDING create", info, err)
	}
	if waited := time.Since(start); waited < wait {
		t.Errorf("Enqueue returned after %s, before the wait of %s", waited, wait)
	}
	e.startWorker(t, leasehold.WorkerConfig{})
	done, err := c.Wait(ctx, id)
	if err != nil || done.Status != leasehold.StatusSucceeded || done.Attempt != 1 {
		t.Fatalf("Wait: %+v, %v; want SUCCEEDED on attempt 1", done, err)
	}
}
