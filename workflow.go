package leasehold

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lifecycle"
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
// there (the task is PENDING then). A token is accepted once; any other
// use gives an error matching ErrBadCallback with the reason.
func (c *Client) CompleteCallback(ctx context.Context, callbackToken string, result any) (TaskInfo, error) {
	r, err := lease.EncodeJSON("result", result)
	if err != nil {
		return TaskInfo{}, err
	}
	return c.endWait(ctx, callbackToken, lease.StatusSucceeded, r, "")
}

// FailCallback ends the waiting attempt the callback token names: the task
// FAILS for good with reason; or, for a token handed out by
// workflow.WaitForCallback, the handler runs again and WaitForCallback
// returns the reason as a *workflow.CallbackFailedError.
func (c *Client) FailCallback(ctx context.Context, callbackToken, reason string) (TaskInfo, error) {
	if reason == "" {
		return TaskInfo{}, fmt.Errorf("%w: a failed callback needs a reason", ErrInvalid)
	}
	return c.endWait(ctx, callbackToken, lease.StatusFailed, nil, reason)
}

// callbackRaceWait bounds how long a callback waits for the suspension of
// the attempt that handed out its token, which it may overtake.
const callbackRaceWait = 10 * time.Second

func (c *Client) endWait(ctx context.Context, callbackToken string, status lease.Status, result []byte, reason string) (info TaskInfo, err error) {
	if c.opts.tracer != nil {
		var span trace.Span
		ctx, span = c.opts.tracer.Start(ctx, "leasehold.callback", trace.WithSpanKind(trace.SpanKindProducer),
			trace.WithAttributes(attribute.String(tracing.AttrStatus, string(status))))
		defer func() {
			span.SetAttributes(attribute.String(tracing.AttrID, info.ID))
			endClientSpan(span, nil, err)
		}()
	}
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
		case errors.Is(err, ErrBadCallback):
			return TaskInfo{}, err
		case errors.Is(err, lease.ErrFinished), errors.Is(err, ErrNotWaiting):
			return TaskInfo{}, fmt.Errorf("%w: %w", ErrBadCallback, err)
		case errors.Is(err, lease.ErrNotFound):
			return TaskInfo{}, fmt.Errorf("%w: task %s: %w", ErrBadCallback, lease.DisplayID(cb.ID), ErrNotFound)
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
// from one read of parent: a tool that shows a few of a large map's
// children reads only those (Get) instead of all of them.
func (c *Client) ChildIDs(ctx context.Context, parent string) ([]string, error) {
	p, err := c.get(ctx, parent)
	if err != nil {
		return nil, err
	}
	return lifecycle.StartedIDs(p), nil
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

// CallbackTokenOf returns an operator's callback token for task id while
// it waits for a callback: for operators (`leasehold callback-token`) who
// answer a wait by hand. The table keeps only a hash of the handler's
// token's secret, so this token carries that hash instead: CompleteCallback
// and FailCallback accept it, as they write to the table themselves (only
// a principal who may update the table can use it), but a worker rejects
// it from a queue, so reading the table and sending to the work queue is
// not enough to answer a wait.
func (c *Client) CallbackTokenOf(ctx context.Context, id string) (string, error) {
	t, err := c.get(ctx, id)
	if err != nil {
		return "", err
	}
	if t.Status != lease.StatusWaiting || t.Wait != lease.WaitCallback {
		return "", fmt.Errorf("%w: task %s is %s, not waiting for a callback", ErrNotWaiting, lease.DisplayID(id), t.Status)
	}
	return token.Callback{ID: t.ID, Fence: t.Fence, Attempt: t.Attempt, Nonce: lease.OperatorNonce(t)}.String(), nil
}

// ErrNotWaiting: the task does not wait for a callback.
var ErrNotWaiting = lease.ErrNotWaiting
