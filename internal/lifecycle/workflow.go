package lifecycle

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/token"
)

// OutcomeSuspended: the attempt parked the task WAITING for its children or
// a callback.
const OutcomeSuspended Outcome = "suspended"

// Child is a task a handler spawns (AwaitChildrenError).
type Child struct {
	Kind        string
	Payload     []byte // JSON; nil for none
	MaxAttempts int    // 0: the worker's default
	// Queue names the child's queue; "" is the parent's queue.
	Queue string
}

// AwaitChildrenError asks the worker to spawn Children and suspend the task
// until every one has ended; the handler then runs again with their results
// (WaitResultsOf). Child i gets the id ChildID(parent, i), so a retried
// spawn makes no new children.
type AwaitChildrenError struct{ Children []Child }

func (e *AwaitChildrenError) Error() string {
	return fmt.Sprintf("awaiting %d children", len(e.Children))
}

// AwaitCallbackError asks the worker to suspend the task until an outside
// system completes or fails it with the callback token (CallbackTokenOf),
// or until Timeout passes, which fails the attempt (retried as any failure).
type AwaitCallbackError struct{ Timeout time.Duration }

func (e *AwaitCallbackError) Error() string {
	return fmt.Sprintf("awaiting a callback for up to %s", e.Timeout)
}

// ChildID is the id of the i-th child (from 0) a task spawns.
func ChildID(parent string, i int) string { return parent + "/" + strconv.Itoa(i) }

// MissingDependencyGrace is how long after its message was sent a task
// with a dependency that does not exist keeps waiting for it to appear;
// after that it is cancelled with the reason.
const MissingDependencyGrace = 5 * time.Minute

// MaxCallbackTimeout bounds AwaitCallbackError.Timeout.
const MaxCallbackTimeout = 365 * 24 * time.Hour

// WaitResults is what a resumed handler sees of the tasks it waited for.
type WaitResults struct {
	Mode  lease.WaitMode // children, after or after_any
	Tasks []lease.Task   // in WaitFor order; a task gone (expired) has only its ID
}

// workflowCtx is the handler context's view of its execution's workflow
// state.
type workflowCtx struct {
	task    lease.Task
	results *WaitResults

	mu    sync.Mutex
	nonce string
}

type workflowKey struct{}

// WaitResultsOf returns the results of the tasks a resumed handler waited
// for, and false when the task has not waited.
func WaitResultsOf(ctx context.Context) (WaitResults, bool) {
	w, ok := ctx.Value(workflowKey{}).(*workflowCtx)
	if !ok || w.results == nil {
		return WaitResults{}, false
	}
	return *w.results, true
}

// ErrNoWorkflow: a workflow call outside a handler run by a worker.
var ErrNoWorkflow = errors.New("not called from a handler run by a leasehold worker")

// CallbackTokenOf returns the callback token of this attempt: bound to the
// task's fence and a secret drawn once per attempt. Hand it to the outside
// system, then return AwaitCallbackError.
func CallbackTokenOf(ctx context.Context) (string, error) {
	w, ok := ctx.Value(workflowKey{}).(*workflowCtx)
	if !ok {
		return "", ErrNoWorkflow
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.nonce == "" {
		w.nonce = rand.Text()
	}
	return token.Callback{ID: w.task.ID, Fence: w.task.Fence, Attempt: w.task.Attempt, Nonce: w.nonce}.String(), nil
}

func (w *workflowCtx) callbackNonce() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.nonce
}

// loadWaitResults reads the tasks a claimed task waited for, for its
// handler.
func (x *execution) loadWaitResults() (*WaitResults, error) {
	t := x.task
	if len(t.WaitFor) == 0 || (t.Wait != lease.WaitChildren && t.Wait != lease.WaitAfter && t.Wait != lease.WaitAfterAny) {
		return nil, nil
	}
	r := &WaitResults{Mode: t.Wait, Tasks: make([]lease.Task, len(t.WaitFor))}
	for i, id := range t.WaitFor {
		cctx, cancel := x.call()
		got, err := x.cfg.Store.Get(cctx, id)
		cancel()
		switch {
		case errors.Is(err, lease.ErrNotFound):
			got = lease.Task{ID: id}
		case err != nil:
			return nil, fmt.Errorf("read %s, which %s waited for: %w", id, t.ID, err)
		}
		r.Tasks[i] = got
	}
	return r, nil
}

// spawn sends the children's tokens, then suspends the task until they end.
func (x *execution) spawn(ctx context.Context, ac *AwaitChildrenError) State {
	switch {
	case len(ac.Children) == 0 || len(ac.Children) > lease.MaxChildren:
		return x.failClaimed(ctx, fmt.Sprintf("await children: %d children, want 1..%d", len(ac.Children), lease.MaxChildren))
	case x.task.Wait == lease.WaitChildren && len(x.task.WaitFor) > 0:
		return x.failClaimed(ctx, "await children: this task has awaited its children already; a task awaits children once")
	}
	ids := make([]string, len(ac.Children))
	bodies := make([]string, len(ac.Children))
	for i, c := range ac.Children {
		ids[i] = ChildID(x.task.ID, i)
		if err := lease.CheckID(ids[i]); err != nil {
			return x.failClaimed(ctx, fmt.Sprintf("await children: child id: %v", err))
		}
		maxAttempts := c.MaxAttempts
		if maxAttempts == 0 {
			maxAttempts = x.cfg.DefaultMaxAttempts
		}
		body, err := token.Token{ID: ids[i], Kind: c.Kind, Payload: c.Payload, MaxAttempts: maxAttempts, Queue: c.Queue, Parent: x.task.ID}.Encode()
		if err != nil {
			return x.failClaimed(ctx, fmt.Sprintf("await children: child %d: %v", i, err))
		}
		bodies[i] = body
	}
	// The children's tokens go first: once the parent waits, nothing but
	// their ends wakes it. A crash between the sends and the suspension
	// leaves the parent RUNNING, taken over when its lease expires; its
	// handler then spawns the same children again, which exist already.
	for i, body := range bodies {
		queue := ac.Children[i].Queue
		if queue == "" {
			queue = x.task.Queue
		}
		if err := x.sendTo(ctx, queue, body, 0); err != nil {
			return x.retryOrFail(ctx, fmt.Sprintf("await children: could not send child %d: %v", i, err), x.cfg.Backoff(x.task.Attempt), OutcomeRetried)
		}
	}
	return x.suspend(ctx, lease.Wait{Mode: lease.WaitChildren, For: ids})
}

// awaitCallback arms the timeout, then suspends the task for the callback.
func (x *execution) awaitCallback(ctx context.Context, ac *AwaitCallbackError) State {
	nonce := x.wf.callbackNonce()
	switch {
	case nonce == "":
		return x.failClaimed(ctx, "await callback: the handler never took its callback token (CallbackToken), so nothing could complete the task")
	case ac.Timeout <= 0 || ac.Timeout > MaxCallbackTimeout:
		return x.failClaimed(ctx, fmt.Sprintf("await callback: timeout %s is outside (0, %s]", ac.Timeout, MaxCallbackTimeout))
	}
	until := x.cfg.Clock.Now().Add(ac.Timeout)
	// The timeout's token goes first, so a crash after the suspension
	// cannot leave the wait without an end.
	if err := x.send(ctx, token.Ref(x.task.ID), min(ac.Timeout, MaxSQSDelay)); err != nil {
		return x.retryOrFail(ctx, fmt.Sprintf("await callback: could not arm the timeout: %v", err), x.cfg.Backoff(x.task.Attempt), OutcomeRetried)
	}
	return x.suspend(ctx, lease.Wait{Mode: lease.WaitCallback, Until: until, Nonce: nonce})
}

// suspend parks the held task WAITING for w.
func (x *execution) suspend(ctx context.Context, w lease.Wait) State {
	cctx, cancel := x.call()
	l := x.task.LeaseOf()
	task, err := x.cfg.Store.Suspend(cctx, l, w)
	cancel()
	if obs, ok := ownWriteLanded(err, l, lease.StatusWaiting); ok {
		task, err = obs, nil
	}
	switch {
	case err == nil:
	case errors.Is(err, lease.ErrLeaseLost), errors.Is(err, lease.ErrNotFound):
		x.log.warn("could not suspend: lease already lost", "error", err)
		return x.lost(ctx, err)
	default:
		x.log.error("could not suspend the task", "error", err)
		return x.keep(ctx, 0, err.Error())
	}
	x.task = task
	x.result.Outcome = OutcomeSuspended
	x.observe(OutcomeSuspended, x.handlerTime)
	x.log.info("task suspended", "wait", string(w.Mode), "children", len(w.For))
	if lease.Complete(task) {
		// Every child ended before the suspension landed.
		if err := x.wake(ctx, task); err != nil {
			return x.exit(false, err.Error())
		}
	}
	return x.exit(true, "")
}

// wake sends a token for waiter t, whose wait is over, then makes it
// PENDING. The token goes first: a crash in between leaves a token whose
// worker resumes the task itself (waitingClaimed).
func (x *execution) wake(ctx context.Context, t lease.Task) error {
	if err := x.sendTo(ctx, t.Queue, token.Ref(t.ID), 0); err != nil {
		return fmt.Errorf("wake %s: %w", t.ID, err)
	}
	cctx, cancel := x.call()
	defer cancel()
	_, err := x.cfg.Store.Resume(cctx, t.ID, t.Fence, "")
	switch {
	case err == nil, errors.Is(err, lease.ErrNotWaiting), errors.Is(err, lease.ErrFinished), errors.Is(err, lease.ErrNotFound):
		// Resumed by someone else, or ended: the token sent is a harmless
		// duplicate.
		return nil
	case errors.Is(err, lease.ErrAttemptsExhausted):
		return nil
	}
	// The token sent resumes it.
	x.log.warn("could not resume a task whose wait is over; its token will", "waiter", t.ID, "error", err)
	return nil
}

// maxCascade bounds how far one execution follows cancellations down a
// chain of dependents; a redelivery of its message goes on from there.
const maxCascade = 32

// notifyWaiters tells every waiter of t, which has ended, and wakes those
// whose wait is over. An error leaves the message to come back, and its
// next delivery (a finished task's token) notifies again: every step is
// idempotent.
func (x *execution) notifyWaiters(ctx context.Context, t lease.Task) error {
	return x.notifyDepth(ctx, t, 0)
}

func (x *execution) notifyDepth(ctx context.Context, t lease.Task, depth int) error {
	if depth > maxCascade {
		return fmt.Errorf("notify: dependents more than %d deep", maxCascade)
	}
	for _, w := range t.Waiters {
		if err := x.notifyOne(ctx, w, t, depth); err != nil {
			return err
		}
	}
	return nil
}

// notifyOne tells waiter w that ended has ended.
func (x *execution) notifyOne(ctx context.Context, w lease.Waiter, ended lease.Task, depth int) error {
	cctx, cancel := x.call()
	got, err := x.cfg.Store.Notify(cctx, w, ended)
	cancel()
	var fin *lease.FinishedError
	switch {
	case err == nil, errors.Is(err, lease.ErrNotified):
		// (A repeated notification: got is the waiter as seen.)
	case errors.As(err, &fin):
		got = fin.Task
		if got.Status != lease.StatusCancelled {
			return nil
		}
		// Cancelled, perhaps by this very notification on an earlier
		// delivery: tell its own waiters, idempotently.
	case errors.Is(err, lease.ErrNotFound), errors.Is(err, lease.ErrNotWaiting):
		return nil
	default:
		return fmt.Errorf("notify %s: %w", w.ID, err)
	}
	switch {
	case got.Status == lease.StatusCancelled:
		if err == nil {
			x.log.info("dependent cancelled", "dependent", got.ID, "reason", got.Error)
		}
		return x.notifyDepth(ctx, got, depth+1)
	case lease.Complete(got):
		return x.wake(ctx, got)
	}
	return nil
}

// afterEnd notifies the waiters of x.task, which has just ended, before the
// message is acknowledged.
func (x *execution) afterEnd(ctx context.Context, st State) State {
	if len(x.task.Waiters) == 0 || !x.task.Status.Terminal() {
		return st
	}
	if err := x.notifyWaiters(ctx, x.task); err != nil {
		x.log.warn("could not notify the tasks waiting for this one; the message comes back to retry", "error", err)
		x.result.Ack = false
		x.result.Reason = err.Error()
	}
	return st
}

// waitingClaimed answers a token whose task is WAITING.
func (x *execution) waitingClaimed(ctx context.Context, t lease.Task) State {
	x.task = t
	x.log.kind = t.Kind
	now := x.cfg.Clock.Now()
	switch {
	case t.Wait == lease.WaitCallback && !now.Before(t.WaitUntil):
		return x.callbackTimedOut(ctx, t)
	case t.Wait == lease.WaitCallback:
		// The timeout's token came early (a wait beyond SQS's delay cap):
		// pass it on.
		if err := x.send(ctx, token.Ref(t.ID), min(t.WaitUntil.Sub(now), MaxSQSDelay)); err != nil {
			return x.exit(false, err.Error())
		}
		return x.exit(true, "")
	case lease.Complete(t):
		// Woken by a token whose sender had not resumed it yet (or died
		// before): resume and claim in one write.
		cctx, cancel := x.call()
		task, err := x.cfg.Store.Resume(cctx, t.ID, t.Fence, x.owner())
		cancel()
		switch {
		case err == nil:
			x.task = task
			return StateClaimed
		case errors.Is(err, lease.ErrNotWaiting):
			// Resumed by the waker, whose token runs it (or ran it).
			return x.claim(ctx, t.ID)
		case errors.Is(err, lease.ErrFinished), errors.Is(err, lease.ErrAttemptsExhausted):
			return x.exit(true, "")
		}
		return x.keep(ctx, 0, err.Error())
	}
	// Still waiting: its children's or dependencies' ends wake it. This
	// token is a duplicate.
	x.log.info("token for a waiting task acknowledged; the end of what it waits for wakes it", "wait", string(t.Wait))
	return x.exit(true, "")
}

// callbackTimedOut fails the waiting attempt of t, whose callback did not
// come in time: retried after backoff, or failed for good on the last
// attempt.
func (x *execution) callbackTimedOut(ctx context.Context, t lease.Task) State {
	reason := fmt.Sprintf("callback not received by %s", t.WaitUntil.UTC().Format(time.RFC3339))
	e := lease.WaitEnd{ID: t.ID, Fence: t.Fence, Attempt: t.Attempt, Nonce: t.CallbackNonce, Error: reason, Status: lease.StatusFailed}
	delay := x.cfg.Backoff(t.Attempt)
	if t.Attempt < t.MaxAttempts {
		e.Status, e.RunAt = lease.StatusPending, x.cfg.Clock.Now().Add(delay)
	}
	cctx, cancel := x.call()
	task, err := x.cfg.Store.EndWait(cctx, e)
	cancel()
	switch {
	case err == nil:
	case errors.Is(err, lease.ErrNotWaiting), errors.Is(err, lease.ErrFinished), errors.Is(err, lease.ErrBadCallback):
		return x.exit(true, "") // the callback came after all
	default:
		return x.keep(ctx, 0, err.Error())
	}
	x.task = task
	outcome := OutcomeRetried
	if task.Status == lease.StatusFailed {
		outcome = OutcomeFailed
	}
	x.result.Outcome = outcome
	x.observe(outcome, 0)
	x.log.info("callback timed out", "status", string(task.Status))
	if task.Status == lease.StatusPending && delay <= MaxSQSDelay {
		if err := x.send(ctx, token.Ref(t.ID), delay); err != nil {
			return x.exit(false, err.Error()) // the sweep entry is the safety net
		}
	}
	return x.afterEnd(ctx, x.exit(true, ""))
}

// createWaiting creates a task with dependencies (WAITING) from its token,
// registers it on each dependency, and tells it of those that ended
// already. Every step is idempotent, so a redelivery redoes them.
func (x *execution) createWaiting(ctx context.Context, nt lease.NewTask) State {
	cctx, cancel := x.call()
	task, err := x.cfg.Store.Create(cctx, nt)
	cancel()
	switch {
	case err == nil:
	case errors.Is(err, lease.ErrAlreadyExists):
		if task.Status != lease.StatusWaiting {
			if task.Status.Terminal() {
				x.task = task
				return x.afterEnd(ctx, x.exit(true, ""))
			}
			return x.exit(true, "") // resumed already: its own token runs it
		}
	case errors.Is(err, lease.ErrConflict):
		return x.reject(ctx, err.Error())
	default:
		x.log.warn("could not create task", "error", err)
		return x.keep(ctx, 0, err.Error())
	}
	x.task = task
	// The grace for a missing dependency counts from the first sight of
	// the dependent: a replaced message (keep) is sent anew, but the task
	// was created when the first one was taken.
	since := x.msg.SentAt
	if !task.CreatedAt.IsZero() && task.CreatedAt.Before(since) {
		since = task.CreatedAt
	}
	w := lease.Waiter{ID: nt.ID, Mode: nt.WaitModeOf()}
	for _, dep := range nt.After {
		cctx, cancel := x.call()
		_, err := x.cfg.Store.Watch(cctx, dep, w)
		cancel()
		var fin *lease.FinishedError
		var ended lease.Task
		switch {
		case err == nil:
			continue
		case errors.As(err, &fin):
			ended = fin.Task
		case errors.Is(err, lease.ErrNotFound) && x.cfg.Clock.Since(since) < MissingDependencyGrace:
			// Its token may not have been taken yet (both sent together):
			// look again shortly.
			return x.keep(ctx, x.cfg.VisibilityMargin, fmt.Sprintf("dependency %s not found yet", dep))
		case errors.Is(err, lease.ErrNotFound):
			ended = lease.Task{ID: dep} // no status: "does not exist"
		case errors.Is(err, lease.ErrInvalid):
			ended = lease.Task{ID: dep, Status: lease.StatusFailed, Error: err.Error()}
		default:
			return x.keep(ctx, 0, err.Error())
		}
		if err := x.notifyOne(ctx, w, ended, 0); err != nil {
			return x.keep(ctx, 0, err.Error())
		}
	}
	return x.exit(true, "")
}

// callback applies a callback message: it ends the waiting attempt its
// token names, exactly once.
func (x *execution) callback(ctx context.Context) State {
	cb, err := token.ParseCallback(x.tok.Callback)
	if err != nil {
		return x.reject(ctx, err.Error())
	}
	x.log.taskID = cb.ID
	e := lease.WaitEnd{ID: cb.ID, Fence: cb.Fence, Attempt: cb.Attempt, Nonce: cb.Nonce, Status: lease.StatusSucceeded, Result: x.tok.Result}
	if x.tok.HasError {
		e.Status, e.Result, e.Error = lease.StatusFailed, nil, x.tok.Error
	}
	if e.Status == lease.StatusSucceeded {
		if err := checkResult(e.Result); err != nil {
			return x.reject(ctx, "callback: "+err.Error())
		}
	}
	task, err := EndWait(x.detached, x.cfg.Store, e, x.cfg.CallTimeout)
	var we *lease.WaitError
	switch {
	case err == nil:
		x.task = task
		x.log.info("callback accepted", "status", string(task.Status))
		return x.afterEnd(ctx, x.exit(true, ""))
	case errors.As(err, &we) && errors.Is(err, lease.ErrNotWaiting) && we.Task.Status == lease.StatusRunning && we.Task.Fence == cb.Fence:
		// The callback beat the suspension of the attempt that handed out
		// the token: try again shortly.
		return x.keep(ctx, x.cfg.VisibilityMargin, "callback arrived before its task suspended")
	case errors.Is(err, lease.ErrBackend):
		return x.keep(ctx, 0, err.Error())
	}
	return x.reject(ctx, "callback rejected: "+err.Error())
}

// EndWait applies a callback through store within callTimeout.
func EndWait(ctx context.Context, store lease.Store, e lease.WaitEnd, callTimeout time.Duration) (lease.Task, error) {
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	return store.EndWait(cctx, e)
}
