package dispatch

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lifecycle"
	"github.com/leasehold/leasehold/internal/token"
)

// ErrIncomplete: some tasks of an Enqueue were not enqueued, or not
// dispatched; their results say which and why.
var ErrIncomplete = errors.New("enqueue incomplete")

// EnqueueResult is what became of one task of an Enqueue.
type EnqueueResult struct {
	// Task is the stored task: the one created, or the existing one when
	// Duplicate or when Err is a *lease.ConflictError (the id names a task
	// of another kind or payload). Zero when the task could not be stored.
	Task lease.Task
	// Duplicate: a task with this id already existed and was kept as it
	// was.
	Duplicate bool
	// Sent: a dispatch token for the task went to the work queue. A task
	// due more than 15 minutes ahead gets none: the sweep dispatches it.
	Sent bool
	// Err is nil, or why the task was not stored (lease.ErrInvalid,
	// lease.ErrBackend, ...) or not dispatched (ErrSend; the task is stored
	// and the sweep will dispatch it after the grace).
	Err error
}

// window is how many tasks Enqueue stores before it sends their tokens, so
// that the first tasks of a large batch start while the rest are stored.
const window = 200

// Enqueue stores tasks and sends their dispatch tokens with the same rules
// as intake, in batches of MaxBatchEntries, Concurrency calls at once.
// Thousands are fine. A task with MaxAttempts 0 gets DefaultMaxAttempts; a
// task whose RunAt is more than 15 minutes ahead is left to the sweep. The
// results follow the order of tasks; the error wraps ErrIncomplete when any
// result has an error.
func (d *Dispatcher) Enqueue(ctx context.Context, tasks []lease.NewTask) ([]EnqueueResult, error) {
	results := make([]EnqueueResult, len(tasks))
	for lo := 0; lo < len(tasks); lo += window {
		hi := min(lo+window, len(tasks))
		d.enqueueWindow(ctx, tasks[lo:hi], results[lo:hi])
	}
	failed := 0
	for _, r := range results {
		if r.Err != nil {
			failed++
		}
	}
	if failed > 0 {
		return results, fmt.Errorf("%w: %d of %d tasks failed", ErrIncomplete, failed, len(tasks))
	}
	return results, nil
}

func (d *Dispatcher) enqueueWindow(ctx context.Context, tasks []lease.NewTask, results []EnqueueResult) {
	// Send first: each task due within SQS's delay cap gets a token that
	// carries the task itself and a create token, and is stored after it
	// (Carried: no sweep entry). No crash between the send and the create
	// can then leave a stored task without a message: the worker claims the
	// task, or creates it from the token when it is not stored (yet, or
	// ever). A task whose token could not be sent is stored in the sweep
	// index and gets a reference token after the create, as intake does.
	//
	// With a CreateWait, a task due now is stored by the worker instead:
	// read first (an id already taken is answered from the stored task,
	// with no send and no write), then sent with a create-first token, and
	// read again until its worker's create (created and claimed in one
	// write) is seen; only one not seen within the wait is stored here.
	now := d.cfg.Clock.Now()
	prepared := make([]lease.NewTask, len(tasks))
	skip := make([]bool, len(tasks))
	refs := make([]*ref, len(tasks))
	var carriers []ref
	var carried, early []int
	for i, n := range tasks {
		n = d.prepare(n, now)
		prepared[i] = n
		if err := n.Validate(); err != nil {
			results[i] = EnqueueResult{Err: fmt.Errorf("create %s: %w", n.ID, err)}
			skip[i] = true
			continue
		}
		if r, ok := carrierFor(n, now, rand.Text()); ok && d.createFirst(n, r) {
			early = append(early, i)
		}
	}
	firsts := map[int]bool{}
	if len(early) > 0 {
		stored, _, found := d.stored(ctx, prepared, early)
		for j, i := range early {
			if !found[j] {
				firsts[i] = true
				continue
			}
			results[i] = answer(stored[j], prepared[i], false)
			skip[i] = true
			if r, ok := tokenFor(stored[j], now); ok && results[i].Duplicate {
				refs[i] = &r // as persist does for a duplicate: see there
			}
		}
	}
	for i, n := range prepared {
		if skip[i] {
			continue
		}
		createToken := rand.Text()
		if firsts[i] {
			createToken = token.NewCreateFirst()
		}
		if r, ok := carrierFor(n, now, createToken); ok {
			carriers = append(carriers, r)
			carried = append(carried, i)
		}
	}
	sentFirst := make([]bool, len(tasks))
	var waiting []int
	createTokens := make([]string, len(tasks))
	for j, err := range d.sendRefs(ctx, carriers) {
		if err != nil && len(prepared[carried[j]].After) > 0 {
			// Only its token registers a task on its dependencies (the
			// worker does, idempotently): without it, nothing is stored.
			results[carried[j]] = EnqueueResult{Err: err}
			skip[carried[j]] = true
			continue
		}
		if err != nil {
			continue // stored in the sweep index instead, and sent again below
		}
		i := carried[j]
		sentFirst[i] = true
		prepared[i].Carried = true
		prepared[i].CreateToken = carriers[j].createToken
		createTokens[i] = carriers[j].createToken
		if token.CreateFirst(carriers[j].createToken) {
			waiting = append(waiting, i)
			skip[i] = true
		}
	}

	started := each(ctx, len(tasks), d.cfg.Concurrency, func(i int) {
		if skip[i] {
			return
		}
		d.persistInto(ctx, prepared[i], sentFirst[i], &results[i], &refs[i])
	})
	for i := started; i < len(tasks); i++ {
		if !skip[i] {
			results[i].Err = fmt.Errorf("enqueue %s: %w", tasks[i].ID, context.Cause(ctx))
		}
	}
	if left := d.awaitCreates(ctx, prepared, createTokens, waiting, results); len(left) > 0 {
		each(ctx, len(left), d.cfg.Concurrency, func(j int) {
			i := left[j]
			d.persistInto(ctx, prepared[i], true, &results[i], &refs[i])
		})
	}
	var batch []ref
	var owners []int
	for i, r := range refs {
		if r != nil {
			batch = append(batch, *r)
			owners = append(owners, i)
		}
	}
	for j, err := range d.sendRefs(ctx, batch) {
		i := owners[j]
		if err != nil {
			results[i].Err = err
		} else {
			results[i].Sent = true
		}
	}
}

// persistInto creates n (persist) into *result, and leaves in *next the token it
// needs after the create unless one was sent before it (sentFirst).
func (d *Dispatcher) persistInto(ctx context.Context, n lease.NewTask, sentFirst bool, result *EnqueueResult, next **ref) {
	task, dup, r, err := d.persist(ctx, n)
	*result = EnqueueResult{Task: task, Duplicate: dup, Err: err, Sent: sentFirst}
	if !sentFirst {
		*next = r
	}
}

// prepare fills in what the dispatcher decides about n: its max attempts
// and its sweep-index time.
func (d *Dispatcher) prepare(n lease.NewTask, now time.Time) lease.NewTask {
	if n.MaxAttempts == 0 {
		n.MaxAttempts = d.cfg.DefaultMaxAttempts
	}
	runAt := n.RunAt
	if runAt.IsZero() {
		runAt = now
	}
	if n.DispatchAt.IsZero() && len(n.After) == 0 {
		// (A task with dependencies waits in no index: their ends wake it.)
		n.DispatchAt = dispatchAt(runAt, now)
	}
	return n
}

// carrierFor is the token sent before n is stored: an inline token naming
// n's id, with the whole task and createToken, delayed until n is
// due. A task due beyond SQS's delay cap, or with a dispatch time of its
// own, has none.
func carrierFor(n lease.NewTask, now time.Time, createToken string) (ref, bool) {
	if !n.DispatchAt.IsZero() && len(n.After) == 0 {
		return ref{}, false
	}
	wait := time.Duration(0)
	if !n.RunAt.IsZero() {
		wait = max(n.RunAt.Sub(now), 0)
	}
	if wait > lifecycle.MaxSQSDelay {
		return ref{}, false
	}
	var waitTimeout time.Duration
	if !n.WaitUntil.IsZero() {
		waitTimeout = max(n.WaitUntil.Sub(now), time.Second)
	}
	body, err := token.Token{Kind: n.Kind, ID: n.ID, Payload: n.Payload, MaxAttempts: n.MaxAttempts, Queue: n.Queue, CreateToken: createToken,
		After: n.After, AfterAny: n.AfterAny, WaitTimeout: waitTimeout, Then: n.Then, Metadata: n.Metadata}.Encode()
	if err != nil {
		return ref{}, false // not a JSON payload: stored first, as intake does
	}
	return ref{id: n.ID, delay: wait, queue: n.Queue, body: body, createToken: createToken}, true
}

// persist creates the task of n, or finds the one with its id, and returns
// the token it needs now, if any. An id taken by another kind or payload is
// a conflict: the stored task is returned with the error, and no token is
// sent. A duplicate still gets a token when it is
// PENDING and due soon: the first delivery may have stopped between the
// write and the send. The claim keeps a second token from running the task
// twice.
//
// n comes through prepare first.
func (d *Dispatcher) persist(ctx context.Context, n lease.NewTask) (lease.Task, bool, *ref, error) {
	now := d.cfg.Clock.Now()
	task, err := d.creator.Create(ctx, n)
	dup := errors.Is(err, lease.ErrAlreadyExists)
	switch {
	case errors.Is(err, lease.ErrConflict):
		return task, false, nil, err // the stored task, sent nothing
	case err != nil && !dup:
		return lease.Task{}, false, nil, err
	}
	r, ok := tokenFor(task, now)
	if !ok {
		return task, dup, nil, nil
	}
	return task, dup, &r, nil
}

// Enqueue stores tasks and dispatches them with a dispatcher made of store,
// q and workQueueURL; opts adjust the rest of its Config (clock, concurrency,
// default max attempts, ...). See Dispatcher.Enqueue.
func Enqueue(ctx context.Context, store Creator, q SQSClient, workQueueURL string, tasks []lease.NewTask, opts ...func(*Config)) ([]EnqueueResult, error) {
	cfg := Config{SQS: q, WorkQueueURL: workQueueURL}
	for _, o := range opts {
		o(&cfg)
	}
	cfg = cfg.withDefaults()
	if store == nil {
		return nil, fmt.Errorf("%w: a lease store is required", ErrConfig)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	d := &Dispatcher{cfg: cfg, creator: store}
	d.reader, _ = store.(TokenReader)
	if cfg.CreateWait > 0 && d.reader == nil {
		return nil, fmt.Errorf("%w: a create wait needs a store that reads create tokens (%T does not)", ErrConfig, store)
	}
	return d.Enqueue(ctx, tasks)
}
