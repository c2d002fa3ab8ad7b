package lifecycle

import (
	"context"
	"errors"

	"github.com/leasehold/leasehold/internal/durable"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/token"
)

// StateCallback: a callback token ends the wait it names, once.

// runCallback applies a callback message: it ends the waiting attempt its
// token names, exactly once.
func (x *execution) runCallback(ctx context.Context) State {
	cb, err := token.ParseCallback(x.in.tok.Callback)
	if err != nil {
		return x.reject(ctx, err.Error())
	}
	x.log.taskID = cb.ID
	if lease.IsCallbackHash(cb.Nonce) {
		// The stored hash, which any reader of the table knows, in place
		// of the secret: no credential (only an operator's direct write,
		// by task, answers a wait without the secret).
		return x.reject(ctx, "callback token carries the stored hash of the callback's secret, not the secret: it answers nothing (an operator answers by task: leasehold complete --task)")
	}
	if x.in.tok.HasError && durable.Reserved(x.in.tok.Error) {
		return x.reject(ctx, "callback: its failure's reason is one leasehold reserves for a raced timer, message or child")
	}
	if x.in.tok.Heartbeat {
		return x.runHeartbeat(ctx, cb)
	}
	e := lease.WaitEnd{ID: cb.ID, Fence: cb.Fence, Attempt: cb.Attempt, Nonce: cb.Nonce, Status: lease.StatusSucceeded, Result: x.in.tok.Result}
	if x.in.tok.HasError {
		e.Status, e.Result, e.Error = lease.StatusFailed, nil, x.in.tok.Error
	}
	if e.Status == lease.StatusSucceeded {
		if err := checkResult(e.Result, lease.MaxResultBytes); err != nil {
			return x.reject(ctx, "callback: "+err.Error())
		}
	}
	cctx, cancel := x.call()
	task, err := x.cfg.Store.EndWait(cctx, e)
	cancel()
	var we *lease.WaitError
	switch {
	case err == nil:
		x.task = task
		x.log.info("callback accepted", "status", string(task.Status))
		if task.Status == lease.StatusPending {
			// A resumable wait's answer: run the task again now. Should the
			// send fail, its sweep entry dispatches it.
			if err := x.send(ctx, token.RefWith(task.ID, x.carry(nil)), 0); err != nil {
				x.log.warn("could not send the token that resumes the answered task; the sweep dispatches it", "error", err)
			}
		}
		return x.ended(true, "")
	case errors.As(err, &we) && errors.Is(err, lease.ErrNotWaiting) && we.Task.Status == lease.StatusRunning && we.Task.Fence == cb.Fence:
		// The callback beat the suspension of the attempt that handed out
		// the token: try again shortly.
		return x.keep(ctx, x.cfg.VisibilityMargin, "callback arrived before its task suspended")
	case errors.Is(err, lease.ErrBackend):
		return x.keep(ctx, 0, err.Error())
	case errors.Is(err, lease.ErrFinished):
		// Ended already: perhaps by this very answer, whose worker stopped
		// before it told the task's waiters. They are told again before
		// the message goes (rejected, as any answer to an ended task is).
		st := x.reject(ctx, "callback rejected: "+err.Error())
		var fin *lease.FinishedError
		if errors.As(err, &fin) && fin.Task.ID != "" {
			x.task = fin.Task
			return StateNotifying
		}
		return st
	}
	return x.reject(ctx, "callback rejected: "+err.Error())
}
