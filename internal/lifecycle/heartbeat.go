package lifecycle

import (
	"context"
	"errors"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/query"
	"github.com/leasehold/leasehold/internal/token"
)

// Heartbeats of a callback wait (docs/workflows.md, "Heartbeats"). A wait
// with a heartbeat timeout ends at the earlier of its deadline and its
// heartbeat deadline (lease.Task.CallbackDeadline). Each beat is one
// conditional write that moves the heartbeat deadline and nothing else.
// The sweep entry sits at the first heartbeat deadline; the worker that
// takes its token either ends the wait (callbackTimedOut) or, when beats
// came, moves the entry to the deadline as it now stands (heartbeatCheck).
// So the index moves at most once per heartbeat timeout, however often
// the outside system beats.

// MinHeartbeatTimeout bounds a callback wait's heartbeat timeout from
// below: the sweep, not a message, ends such a wait, so a shorter one
// would promise more than the sweep's period keeps.
const MinHeartbeatTimeout = time.Second

// callbackDeadline is when t's callback wait ends unless answered.
func callbackDeadline(t lease.Task) time.Time {
	at, _ := t.CallbackDeadline()
	return at
}

// heartbeatCheck answers a token for t, waiting for a callback with a
// heartbeat timeout whose deadline has not come (a beat moved it): the
// sweep entry moves to the deadline as it now stands, and the token is
// acknowledged. A deadline a moment away keeps this message instead,
// hidden until then. Should the move fail, the entry stays where the
// sweep put it (its grace ahead), and the check comes again.
func (x *execution) heartbeatCheck(ctx context.Context, t lease.Task, now time.Time) State {
	at := callbackDeadline(t)
	if left := at.Sub(now); left <= earlyTimerTolerance {
		return x.keep(ctx, left, "callback wait's heartbeat deadline not reached yet")
	}
	if m := x.cfg.caps.marker; m != nil && !t.DispatchAt.Equal(at) {
		cctx, cancel := x.call()
		_, err := m.MarkDispatched(cctx, t.ID, t.DispatchAt, at)
		cancel()
		if err != nil && !errors.Is(err, query.ErrDispatchRaced) {
			x.log.warn("could not move a callback wait's sweep entry to its heartbeat deadline", "error", err)
		}
	}
	x.log.info("callback wait kept alive by its heartbeats", "deadline", at)
	return x.exit(true, "")
}

// runHeartbeat applies a heartbeat message (token.Token.Heartbeat): it
// moves the heartbeat deadline of the wait its callback token names. A
// beat for a wait that has ended, moved on or has no heartbeat timeout is
// recorded (logged, with the reason as the message's outcome) and
// dropped; a forged token is rejected as a callback's is. Only a beat
// that overtook its wait's suspension, or a store error, keeps the
// message to retry.
func (x *execution) runHeartbeat(ctx context.Context, cb token.Callback) State {
	if x.cfg.caps.beats == nil {
		return x.reject(ctx, "heartbeat: the store records no heartbeats")
	}
	e := lease.WaitEnd{ID: cb.ID, Fence: cb.Fence, Attempt: cb.Attempt, Nonce: cb.Nonce, Status: lease.StatusSucceeded}
	cctx, cancel := x.call()
	task, err := x.cfg.caps.beats.BeatCallback(cctx, e)
	cancel()
	var we *lease.WaitError
	switch {
	case err == nil:
		x.log.info("callback heartbeat recorded", "beat_until", task.BeatUntil)
		return x.exit(true, "")
	case errors.As(err, &we) && errors.Is(err, lease.ErrNotWaiting) && we.Task.Status == lease.StatusRunning && we.Task.Fence == cb.Fence:
		return x.keep(ctx, x.cfg.VisibilityMargin, "heartbeat arrived before its task suspended")
	case errors.Is(err, lease.ErrBackend):
		return x.keep(ctx, 0, err.Error())
	case errors.Is(err, lease.ErrBadCallback):
		return x.reject(ctx, "heartbeat rejected: "+err.Error())
	}
	// Ended, moved on, timing out, gone, or no heartbeat timeout: the
	// beat keeps nothing alive, and trying again would not either.
	reason := "heartbeat dropped: " + err.Error()
	x.log.warn("callback heartbeat dropped", "reason", err.Error())
	return x.exit(true, reason)
}
