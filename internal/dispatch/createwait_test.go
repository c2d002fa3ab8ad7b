package dispatch_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/leasehold/leasehold/internal/dispatch"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/token"
)

const createWait = time.Second

// ticking advances clock by small steps whenever something waits on it,
// until the test ends, so that Enqueue's reads with a CreateWait go on.
func ticking(t *testing.T, clock *clockwork.FakeClock) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for clock.BlockUntilContext(ctx, 1) == nil {
			clock.Advance(50 * time.Millisecond)
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// workerCreates makes e's queue act as a worker that receives each
// create-first token at once and creates its task claimed.
func workerCreates(t *testing.T, e *unitEnv) {
	e.sqs.set(func(f *fakeSQS) {
		f.onSend = func(tok token.Token) {
			if !token.CreateFirst(tok.CreateToken) {
				return
			}
			n := lease.NewTask{ID: tok.ID, Kind: tok.Kind, Payload: tok.Payload, MaxAttempts: tok.MaxAttempts, CreateToken: tok.CreateToken}
			if _, err := e.store.CreateClaimed(context.Background(), n, "worker"); err != nil && !errors.Is(err, lease.ErrAlreadyExists) {
				t.Errorf("worker's create of %s: %v", tok.ID, err)
			}
		}
	})
}

// With a CreateWait, the worker that receives a task's token stores it
// (created claimed, one write) and Enqueue only reads it: the client makes
// no write for a task due now. A task due later is stored by the client,
// as without the wait.
func TestCreateWaitLeavesTheCreateToTheWorker(t *testing.T) {
	t.Parallel()
	e := setupUnit(t, func(c *dispatch.Config) { c.CreateWait = createWait })
	ticking(t, e.clock)
	workerCreates(t, e)
	before := e.store.Calls()
	later := e.clock.Now().Add(10 * time.Minute)
	res, err := e.d.Enqueue(t.Context(), []lease.NewTask{
		{ID: "a", Kind: "k", Payload: []byte(`{"n":1}`)},
		{ID: "b", Kind: "k"},
		{ID: "c", Kind: "k", RunAt: later},
	})
	if err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	for i, want := range []lease.Status{lease.StatusRunning, lease.StatusRunning, lease.StatusPending} {
		if r := res[i]; r.Err != nil || r.Duplicate || !r.Sent || r.Task.Status != want {
			t.Errorf("result %d: %+v, want sent, created, %s", i, r, want)
		}
	}
	if w := e.store.Calls().Writes - before.Writes; w != 3 {
		t.Errorf("%d writes, want 3: the worker's two creates and the client's create of c", w)
	}
	for _, tk := range e.sqs.take() {
		if first := token.CreateFirst(tk.CreateToken); first != (tk.ID != "c") {
			t.Errorf("token of %s: create token %q, create-first %v", tk.ID, tk.CreateToken, first)
		}
	}
}

// No worker stored the task within the wait (none polls the queue, or a
// cold start): the client stores it, PENDING, under the create token its
// token carries, so the worker that receives the token later claims it.
func TestCreateWaitStoresWhatNoWorkerCreated(t *testing.T) {
	t.Parallel()
	e := setupUnit(t, func(c *dispatch.Config) { c.CreateWait = createWait })
	ticking(t, e.clock)
	start := e.clock.Now()
	res, err := e.d.Enqueue(t.Context(), []lease.NewTask{{ID: "a", Kind: "k"}})
	if err != nil || res[0].Err != nil || !res[0].Sent || res[0].Task.Status != lease.StatusPending || res[0].Duplicate {
		t.Fatalf("Enqueue: %+v, %v", res, err)
	}
	if waited := e.clock.Since(start); waited < createWait {
		t.Errorf("stored after %s, before the wait of %s was over", waited, createWait)
	}
	sent := e.sqs.take()
	_, stored, err := e.store.GetWithToken(t.Context(), "a")
	if err != nil || len(sent) != 1 || stored != sent[0].CreateToken || !token.CreateFirst(stored) {
		t.Fatalf("stored under %q (%v); tokens %+v: want the sent create-first token", stored, err, sent)
	}
	if !res[0].Task.DispatchAt.IsZero() {
		t.Errorf("sweep entry at %s; want none (its token is on the queue)", res[0].Task.DispatchAt)
	}
}

// An id already taken is answered from the stored task, read before any
// send: the same task is a duplicate, another kind or payload a conflict;
// nothing is written and no task is sent for either (a duplicate still
// PENDING and due gets a reference token, as without the wait).
func TestCreateWaitAnswersATakenIDFromTheStoredTask(t *testing.T) {
	t.Parallel()
	e := setupUnit(t, func(c *dispatch.Config) { c.CreateWait = createWait })
	for _, n := range []lease.NewTask{{ID: "same", Kind: "k", Payload: []byte(`1`), MaxAttempts: 5}, {ID: "other", Kind: "k", Payload: []byte(`1`), MaxAttempts: 5}} {
		if _, err := e.store.Create(t.Context(), n); err != nil {
			t.Fatal(err)
		}
	}
	e.sqs.take()
	before := e.store.Calls()
	res, err := e.d.Enqueue(t.Context(), []lease.NewTask{{ID: "same", Kind: "k", Payload: []byte(` 1 `)}, {ID: "other", Kind: "k", Payload: []byte(`2`)}})
	if !errors.Is(err, dispatch.ErrIncomplete) {
		t.Fatalf("Enqueue error %v, want ErrIncomplete for the conflict", err)
	}
	if r := res[0]; r.Err != nil || !r.Duplicate || r.Task.ID != "same" {
		t.Errorf("same task: %+v, want a duplicate", r)
	}
	if r := res[1]; !errors.Is(r.Err, lease.ErrConflict) || r.Task.ID != "other" || r.Sent {
		t.Errorf("other payload: %+v, want a conflict, nothing sent", r)
	}
	if w := e.store.Calls().Writes - before.Writes; w != 0 {
		t.Errorf("%d writes, want none", w)
	}
	for _, tk := range e.sqs.take() {
		if tk.ID != "same" || tk.CreateToken != "" {
			t.Errorf("sent %+v; want only a reference token for the PENDING duplicate", tk)
		}
	}
}

// Another call took the id between the first read and the worker's create:
// Enqueue tells it from its own create by the create token, and answers a
// duplicate or a conflict.
func TestCreateWaitSeesAnotherCallsCreate(t *testing.T) {
	t.Parallel()
	e := setupUnit(t, func(c *dispatch.Config) { c.CreateWait = createWait })
	ticking(t, e.clock)
	e.sqs.set(func(f *fakeSQS) {
		f.onSend = func(tok token.Token) {
			payload := tok.Payload
			if tok.ID == "conflict" {
				payload = []byte(`"theirs"`)
			}
			n := lease.NewTask{ID: tok.ID, Kind: tok.Kind, Payload: payload, MaxAttempts: tok.MaxAttempts, CreateToken: "another-call"}
			if _, err := e.store.Create(context.Background(), n); err != nil {
				t.Errorf("the other call's create: %v", err)
			}
		}
	})
	res, _ := e.d.Enqueue(t.Context(), []lease.NewTask{{ID: "dup", Kind: "k", Payload: []byte(`"mine"`)}, {ID: "conflict", Kind: "k", Payload: []byte(`"mine"`)}})
	if r := res[0]; r.Err != nil || !r.Duplicate {
		t.Errorf("same task stored by another call: %+v, want a duplicate", r)
	}
	if r := res[1]; !errors.Is(r.Err, lease.ErrConflict) || string(r.Task.Payload) != `"theirs"` {
		t.Errorf("another payload stored by another call: %+v, want a conflict with the stored task", r)
	}
}

func TestCreateWaitNeedsATokenReader(t *testing.T) {
	t.Parallel()
	e := setupUnit(t)
	_, err := dispatch.Enqueue(t.Context(), creatorOnly{e.store}, e.sqs, workQueue, nil, func(c *dispatch.Config) { c.CreateWait = time.Second })
	if !errors.Is(err, dispatch.ErrConfig) {
		t.Fatalf("a create wait on a store without GetWithToken: %v, want ErrConfig", err)
	}
	if _, err := dispatch.Enqueue(t.Context(), e.store, e.sqs, workQueue, nil, func(c *dispatch.Config) { c.CreateWait = -time.Second }); !errors.Is(err, dispatch.ErrConfig) {
		t.Fatalf("a negative create wait: %v, want ErrConfig", err)
	}
}

// creatorOnly hides every store method but Create.
type creatorOnly struct{ s dispatch.Creator }

func (c creatorOnly) Create(ctx context.Context, n lease.NewTask) (lease.Task, error) {
	return c.s.Create(ctx, n)
}
