package leasehold

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/internal/durable"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/token"
	"github.com/leasehold/leasehold/internal/tracing"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// ErrBadCallback: a callback token that does not match a waiting attempt:
// forged, stale (the attempt timed out or was retried), or used already.
var ErrBadCallback = lease.ErrBadCallback

// CompleteCallback ends the waiting attempt the callback token names: the
// task SUCCEEDS with result (encoded as JSON); or, for a token handed out
// by workflow.WaitForCallback, the handler runs again and reads result
// there (the task is PENDING then). The token is the one the handler took
// (workflow.WaitForCallback hands it to its submit): it carries a secret
// the table keeps only a hash of, so this is the call to give a system
// outside that answers waits. A token is accepted once; any other use, or
// a token built from what the table holds, gives an error matching
// ErrBadCallback with the reason. An operator who answers a wait by hand
// uses OperatorComplete.
func (c *Client) CompleteCallback(ctx context.Context, callbackToken string, result any) (TaskInfo, error) {
	r, err := lease.EncodeJSON("result", result)
	if err != nil {
		return TaskInfo{}, err
	}
	e, err := c.handlerWaitEnd(callbackToken, lease.StatusSucceeded, r, "")
	if err != nil {
		return TaskInfo{}, err
	}
	return c.endWait(ctx, e)
}

// FailCallback ends the waiting attempt the callback token names: the task
// FAILS for good with reason; or, for a token handed out by
// workflow.WaitForCallback, the handler runs again and WaitForCallback
// returns the reason as a *workflow.CallbackFailedError. It takes only the
// handler's token, as CompleteCallback does.
func (c *Client) FailCallback(ctx context.Context, callbackToken, reason string) (TaskInfo, error) {
	if reason == "" {
		return TaskInfo{}, fmt.Errorf("%w: a failed callback needs a reason", ErrInvalid)
	}
	if durable.Reserved(reason) {
		return TaskInfo{}, fmt.Errorf("%w: a failed callback's reason may not be one leasehold reserves for a raced timer, message or child", ErrInvalid)
	}
	e, err := c.handlerWaitEnd(callbackToken, lease.StatusFailed, nil, reason)
	if err != nil {
		return TaskInfo{}, err
	}
	return c.endWait(ctx, e)
}

// handlerWaitEnd is the end of the wait a handler's callback token names.
// A token that carries the stored hash instead of the secret (what the
// table holds, which any reader of the table, a backup or an export
// knows) is refused: it would make the hash a password.
func (c *Client) handlerWaitEnd(callbackToken string, status lease.Status, result []byte, reason string) (lease.WaitEnd, error) {
	cb, err := token.ParseCallback(callbackToken)
	if err != nil {
		return lease.WaitEnd{}, fmt.Errorf("%w: %w", ErrBadCallback, err)
	}
	if lease.IsCallbackHash(cb.Nonce) {
		return lease.WaitEnd{}, fmt.Errorf("%w: the token carries the stored hash of a callback's secret, not the secret: only the token the handler took answers a wait (an operator answers by task with OperatorComplete or OperatorFail, `leasehold complete --task`)", ErrBadCallback)
	}
	return lease.WaitEnd{ID: cb.ID, Fence: cb.Fence, Attempt: cb.Attempt, Nonce: cb.Nonce, Status: status, Result: result, Error: reason}, nil
}

// OperatorComplete ends the callback wait of waiting, a task as Get read
// it (its ID, Fence and Attempt name the wait), as CompleteCallback ends
// the wait of a handler's token, for an operator who answers by hand (the
// CLI's `leasehold complete --task`, the inspector). It takes no token: it
// reads the task and writes it, so it needs read and write access to the
// table itself, and lands only while the attempt read still waits (any
// other gives an error matching ErrBadCallback and ErrNotWaiting). Never
// expose it to a system outside: give that the handler's token and
// CompleteCallback (docs/workflows.md).
func (c *Client) OperatorComplete(ctx context.Context, waiting TaskInfo, result any) (TaskInfo, error) {
	r, err := lease.EncodeJSON("result", result)
	if err != nil {
		return TaskInfo{}, err
	}
	e, err := c.operatorWaitEnd(ctx, waiting, lease.StatusSucceeded, r, "")
	if err != nil {
		return TaskInfo{}, err
	}
	return c.endWait(ctx, e)
}

// OperatorFail ends the callback wait of waiting as FailCallback ends the
// wait of a handler's token, for an operator (see OperatorComplete).
func (c *Client) OperatorFail(ctx context.Context, waiting TaskInfo, reason string) (TaskInfo, error) {
	if reason == "" {
		return TaskInfo{}, fmt.Errorf("%w: a failed callback needs a reason", ErrInvalid)
	}
	if durable.Reserved(reason) {
		return TaskInfo{}, fmt.Errorf("%w: a failed callback's reason may not be one leasehold reserves for a raced timer, message or child", ErrInvalid)
	}
	e, err := c.operatorWaitEnd(ctx, waiting, lease.StatusFailed, nil, reason)
	if err != nil {
		return TaskInfo{}, err
	}
	return c.endWait(ctx, e)
}

// operatorWaitEnd reads the task w names (its ID, Fence and Attempt) and
// returns the end of its wait, under the stored hash of the wait's secret:
// the write's condition holds it to the attempt w names.
func (c *Client) operatorWaitEnd(ctx context.Context, w TaskInfo, status lease.Status, result []byte, reason string) (lease.WaitEnd, error) {
	t, err := c.get(ctx, w.ID)
	switch {
	case errors.Is(err, ErrNotFound):
		return lease.WaitEnd{}, fmt.Errorf("%w: task %s: %w", ErrBadCallback, lease.DisplayID(w.ID), ErrNotFound)
	case err != nil:
		return lease.WaitEnd{}, err
	case t.Status != lease.StatusWaiting || t.Wait != lease.WaitCallback:
		return lease.WaitEnd{}, fmt.Errorf("%w: %w: task %s is %s, not waiting for a callback", ErrBadCallback, ErrNotWaiting, lease.DisplayID(w.ID), t.Status)
	case t.Fence != w.Fence || t.Attempt != w.Attempt:
		return lease.WaitEnd{}, fmt.Errorf("%w: %w: task %s waits at fence %d, attempt %d, not fence %d, attempt %d as read", ErrBadCallback, ErrNotWaiting,
			lease.DisplayID(w.ID), t.Fence, t.Attempt, w.Fence, w.Attempt)
	}
	return lease.WaitEnd{ID: w.ID, Fence: w.Fence, Attempt: w.Attempt, Hash: lease.OperatorNonce(t), Status: status, Result: result, Error: reason}, nil
}

// callbackRaceWait bounds how long a callback waits for the suspension of
// the attempt that handed out its token, which it may overtake.
const callbackRaceWait = 10 * time.Second

// endWait writes e, the end of a callback wait, and hands the telling of
// the task's waiters to a worker.
func (c *Client) endWait(ctx context.Context, e lease.WaitEnd) (info TaskInfo, err error) {
	if c.opts.tracer != nil {
		var span trace.Span
		ctx, span = c.opts.tracer.Start(ctx, "leasehold.callback", trace.WithSpanKind(trace.SpanKindProducer),
			trace.WithAttributes(attribute.String(tracing.AttrStatus, string(e.Status))))
		defer func() {
			span.SetAttributes(attribute.String(tracing.AttrID, info.ID))
			endClientSpan(span, nil, err)
		}()
	}
	// An answer over its inline limit goes to the payload bucket, the
	// wait's end carrying a reference (no call for one within it).
	if err := c.claims.StowAnswer(ctx, &e); err != nil {
		return TaskInfo{}, err
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
			return c.view(t), nil
		case errors.As(err, &we) && we.Task.Status == lease.StatusRunning && we.Task.Fence == e.Fence && c.opts.clock.Now().Before(deadline):
			// The callback overtook the suspension: try again shortly.
			select {
			case <-ctx.Done():
				return TaskInfo{}, ctx.Err()
			case <-c.opts.clock.After(pause):
			}
			pause = min(2*pause, time.Second)
			continue
		case errors.Is(err, ErrBadCallback):
			return TaskInfo{}, err
		case errors.Is(err, lease.ErrFinished), errors.Is(err, ErrNotWaiting):
			return TaskInfo{}, fmt.Errorf("%w: %w", ErrBadCallback, err)
		case errors.Is(err, lease.ErrNotFound):
			return TaskInfo{}, fmt.Errorf("%w: task %s: %w", ErrBadCallback, lease.DisplayID(e.ID), ErrNotFound)
		}
		return TaskInfo{}, c.translate(ctx, err)
	}
}

// wakeWaiters hands the telling of t's waiters (and the end of its
// chain's later links) to a worker: a reference token for t, which a
// worker finds finished and so notifies its waiters (idempotently). The
// same token runs t again when a resumable wait's answer left it PENDING
// (workflow.WaitForCallback); should that send fail, the sweep does. Should the send fail, the callback's timeout token, still
// on the queue, does the same when it comes.
func (c *Client) wakeWaiters(ctx context.Context, t lease.Task) {
	if len(t.Waiters) == 0 && len(t.Then) == 0 && t.Status != lease.StatusPending {
		return
	}
	if url, err := c.queueOf(ctx, t.Queue); err == nil {
		_ = c.sendRef(ctx, url, t.ID) // see above: a failed send has a fallback
	}
}

// ChildIDs lists the ids of the tasks Children lists, in the same order,
// from one read of parent (and of its history past its item, if it has
// one): a tool that shows a few of a large map's
// children reads only those (Get) instead of all of them.
func (c *Client) ChildIDs(ctx context.Context, parent string) ([]string, error) {
	p, err := c.get(ctx, parent)
	if err != nil {
		return nil, err
	}
	// A history past the parent's item: its awaits there too (a read per
	// 100 operations of the tail).
	if p.Steps, err = lease.ReadHistory(ctx, c.store, p, 0); err != nil {
		return nil, c.translate(ctx, err)
	}
	return durable.StartedIDs(p), nil
}

// Children lists the tasks parent started, in the order it started them,
// read one by one: the children of its finished All and Map awaits and of
// the await it is in (a map's from its first wave), and the later links of
// its chain. These are the tasks listed under parent: a child or a link
// has no entry of its own in List unless it failed or was cancelled. The
// children of an AwaitChildren that is over are not recorded on the
// parent, so not listed here; a parent that has not awaited children has
// none. A map of n children makes n reads.
func (c *Client) Children(ctx context.Context, parent string) ([]TaskInfo, error) {
	ids, err := c.ChildIDs(ctx, parent)
	if err != nil {
		return nil, err
	}
	out := make([]TaskInfo, 0, len(ids))
	for _, id := range ids {
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

// ErrNotWaiting: the task does not wait for a callback.
var ErrNotWaiting = lease.ErrNotWaiting
