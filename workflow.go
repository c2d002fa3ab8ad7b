package leasehold

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lifecycle"
	"github.com/leasehold/leasehold/internal/token"
)

// Child is a task a handler spawns with AwaitChildren.
type Child struct {
	Kind string
	// Payload is encoded as JSON (a json.RawMessage passes through).
	Payload any
	// MaxAttempts: 0 takes the worker's default.
	MaxAttempts int
	// Queue names the child's queue; "" is the parent's.
	Queue string
}

// AwaitChildren returns an error that spawns children and suspends the task
// until every one of them has ended, holding no lease. The handler then
// runs again, as the same attempt, and reads the children's outcomes with
// Children. Child i gets the id ChildID(parent, i), so a retried handler
// spawns no new children. A task awaits children once.
func AwaitChildren(children ...Child) error {
	out := make([]lifecycle.Child, len(children))
	for i, c := range children {
		p, err := encodePayload(c.Payload)
		if err != nil {
			return Fail(fmt.Errorf("child %d: %w", i, err))
		}
		out[i] = lifecycle.Child{Kind: c.Kind, Payload: p, MaxAttempts: c.MaxAttempts, Queue: c.Queue}
	}
	return &lifecycle.AwaitChildrenError{Children: out}
}

// AwaitChildrenWithin is AwaitChildren with a deadline for the wait: if
// the children have not all ended within timeout (at most 365 days), the
// task ends FAILED with the reason. AwaitChildren waits for the worker's
// WithWaitTimeout (default 7 days).
func AwaitChildrenWithin(timeout time.Duration, children ...Child) error {
	err := AwaitChildren(children...)
	if ac, ok := err.(*lifecycle.AwaitChildrenError); ok {
		ac.Timeout = timeout
	}
	return err
}

// ChildID is the id of the i-th child (from 0) the task parent spawns.
func ChildID(parent string, i int) string { return lifecycle.ChildID(parent, i) }

// Outcome is how a child or a dependency ended, as its waiter sees it.
type Outcome struct {
	ID     string          `json:"id"`
	Status Status          `json:"status"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// Children returns the outcomes of the children a resumed handler awaited,
// in spawn order, and false when the task has not awaited children.
func Children(ctx context.Context) ([]Outcome, bool) {
	return outcomes(ctx, lease.WaitChildren)
}

// Dependencies returns the outcomes of the task's dependencies (After,
// AfterAny), in the order given, and false when it has none.
func Dependencies(ctx context.Context) ([]Outcome, bool) {
	if o, ok := outcomes(ctx, lease.WaitAfter); ok {
		return o, true
	}
	return outcomes(ctx, lease.WaitAfterAny)
}

func outcomes(ctx context.Context, mode lease.WaitMode) ([]Outcome, bool) {
	r, ok := lifecycle.WaitResultsOf(ctx)
	if !ok || r.Mode != mode {
		return nil, false
	}
	out := make([]Outcome, len(r.Tasks))
	for i, t := range r.Tasks {
		out[i] = Outcome{ID: t.ID, Status: Status(t.Status), Result: rawJSON(t.Result), Error: t.Error}
	}
	return out, true
}

// CallbackToken returns this attempt's callback token: hand it to the
// outside system that will complete the task, then return AwaitCallback.
// The token names the task and this attempt's fence and carries a secret
// drawn for the attempt; it is accepted once, and only while the attempt
// waits. Treat it as a secret.
func CallbackToken(ctx context.Context) (string, error) { return lifecycle.CallbackTokenOf(ctx) }

// AwaitCallback returns an error that suspends the task, holding no lease,
// until an outside system completes or fails it with its callback token
// (Client.CompleteCallback, Client.FailCallback, `leasehold complete`, or a
// callback message on the work queue). If no callback comes within
// timeout, the attempt fails and is retried like any failure.
func AwaitCallback(timeout time.Duration) error {
	return &lifecycle.AwaitCallbackError{Timeout: timeout}
}

// ErrBadCallback: a callback token that does not match a waiting attempt:
// forged, stale (the attempt timed out or was retried), or used already.
var ErrBadCallback = errors.New("callback token rejected")

// CompleteCallback ends the waiting attempt the callback token names: the
// task SUCCEEDS with result (encoded as JSON). A token is accepted once;
// any other use gives an error matching ErrBadCallback with the reason.
func (c *Client) CompleteCallback(ctx context.Context, callbackToken string, result any) (TaskInfo, error) {
	r, err := encodePayload(result)
	if err != nil {
		return TaskInfo{}, err
	}
	return c.endWait(ctx, callbackToken, lease.StatusSucceeded, r, "")
}

// FailCallback ends the waiting attempt the callback token names: the task
// FAILS for good with reason.
func (c *Client) FailCallback(ctx context.Context, callbackToken, reason string) (TaskInfo, error) {
	if reason == "" {
		return TaskInfo{}, fmt.Errorf("%w: a failed callback needs a reason", ErrInvalid)
	}
	return c.endWait(ctx, callbackToken, lease.StatusFailed, nil, reason)
}

// callbackRaceWait bounds how long a callback waits for the suspension of
// the attempt that handed out its token, which it may overtake.
const callbackRaceWait = 10 * time.Second

func (c *Client) endWait(ctx context.Context, callbackToken string, status lease.Status, result []byte, reason string) (TaskInfo, error) {
	cb, err := token.ParseCallback(callbackToken)
	if err != nil {
		return TaskInfo{}, fmt.Errorf("%w: %w", ErrBadCallback, err)
	}
	e := lease.WaitEnd{ID: cb.ID, Fence: cb.Fence, Attempt: cb.Attempt, Nonce: cb.Nonce, Status: status, Result: result, Error: reason}
	if lease.IsCallbackHash(cb.Nonce) { // an operator's token (CallbackTokenOf)
		e.Nonce, e.Hash = "", cb.Nonce
	}
	deadline := c.opts.clock.Now().Add(callbackRaceWait)
	pause := 50 * time.Millisecond
	for {
		cctx, cancel := context.WithTimeout(ctx, c.opts.callTimeout)
		t, err := c.store.EndWait(cctx, e)
		cancel()
		var we *lease.WaitError
		switch {
		case err == nil:
			c.wakeWaiters(ctx, t)
			return infoOf(t), nil
		case errors.As(err, &we) && we.Task.Status == lease.StatusRunning && we.Task.Fence == cb.Fence && c.opts.clock.Now().Before(deadline):
			// The callback overtook the suspension: try again shortly.
			select {
			case <-ctx.Done():
				return TaskInfo{}, ctx.Err()
			case <-c.opts.clock.After(pause):
			}
			pause = min(2*pause, time.Second)
			continue
		case errors.Is(err, lease.ErrFinished), errors.Is(err, lease.ErrNotWaiting), errors.Is(err, lease.ErrBadCallback):
			return TaskInfo{}, fmt.Errorf("%w: %w", ErrBadCallback, err)
		case errors.Is(err, lease.ErrNotFound):
			return TaskInfo{}, fmt.Errorf("%w: task %s: %w", ErrBadCallback, lease.DisplayID(cb.ID), ErrNotFound)
		}
		return TaskInfo{}, c.translate(ctx, err)
	}
}

// wakeWaiters hands the telling of t's waiters to a worker: a reference
// token for t, which a worker finds finished and so notifies its waiters
// (idempotently). Should the send fail, the callback's timeout token, still
// on the queue, does the same when it comes.
func (c *Client) wakeWaiters(ctx context.Context, t lease.Task) {
	if len(t.Waiters) == 0 {
		return
	}
	if url, err := c.queueOf(ctx, t.Queue); err == nil {
		_ = c.sendRef(ctx, url, t.ID) // see above: a failed send has a fallback
	}
}

// Children lists the children of parent, in spawn order: the tasks it
// awaited (or awaits), read one by one. A parent that has not awaited
// children yet has none listed.
func (c *Client) Children(ctx context.Context, parent string) ([]TaskInfo, error) {
	p, err := c.Get(ctx, parent)
	if err != nil {
		return nil, err
	}
	if p.Wait != string(lease.WaitChildren) {
		return []TaskInfo{}, nil
	}
	out := make([]TaskInfo, 0, len(p.WaitFor))
	for _, id := range p.WaitFor {
		t, err := c.Get(ctx, id)
		if errors.Is(err, ErrNotFound) {
			t = TaskInfo{ID: id, Status: "EXPIRED"}
		} else if err != nil {
			return nil, err
		}
		t.Payload, t.Result, t.History = nil, nil, nil // as List
		out = append(out, t)
	}
	return out, nil
}

// CallbackTokenOf returns an operator's callback token for task id while
// it waits for a callback: for operators (`leasehold callback-token`) who
// answer a wait by hand. The table keeps only a hash of the handler's
// token's secret, so this token carries that hash instead: CompleteCallback
// and FailCallback accept it, as they write to the table themselves (only
// a principal who may update the table can use it), but a worker rejects
// it from a queue, so reading the table and sending to the work queue is
// not enough to answer a wait.
func (c *Client) CallbackTokenOf(ctx context.Context, id string) (string, error) {
	if err := lease.CheckID(id); err != nil {
		return "", err
	}
	t, err := c.store.Get(ctx, id)
	if err != nil {
		return "", c.translate(ctx, err)
	}
	if t.Status != lease.StatusWaiting || t.Wait != lease.WaitCallback {
		return "", fmt.Errorf("%w: task %s is %s, not waiting for a callback", ErrNotWaiting, lease.DisplayID(id), t.Status)
	}
	return token.Callback{ID: t.ID, Fence: t.Fence, Attempt: t.Attempt, Nonce: t.CallbackHash}.String(), nil
}

// ErrNotWaiting: the task does not wait for a callback.
var ErrNotWaiting = errors.New("task is not waiting")

// Step runs fn as the step called name of the handler's task, once per task:
// the attempt that finishes it records its result (one write under the
// lease), and the call of that step in every later run (a retry, or a
// resume after a wait) returns the recorded result without running fn. A handler written as
// steps therefore resumes after a failure or a lost lease where it left
// off, as a durable function does. An error of fn records nothing and is
// returned as it is.
//
// Step names must be unique within a task and stable across attempts. A
// name is checked before fn runs: an invalid name, or one this run already
// called (and whose call did not fail), fails the task without running fn.
// Results are JSON, at most 64 KiB in all (see docs/limits.md), and stay in
// the task's item: every later write of the item is priced by its size, so
// keep them small (store big ones elsewhere and record their keys).
func Step[T any](ctx context.Context, name string, fn func(context.Context) (T, error)) (T, error) {
	var zero T
	raw, err := lifecycle.StepOf(ctx, name, func(ctx context.Context) ([]byte, error) {
		v, err := fn(ctx)
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, Fail(fmt.Errorf("step %q: result does not encode as JSON: %w", name, err))
		}
		return b, nil
	})
	if err != nil {
		return zero, err
	}
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		return zero, Fail(fmt.Errorf("step %q: recorded result does not decode into %T: %w", name, v, err))
	}
	return v, nil
}
