package lifecycle

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/queues"
)

// maxRateHold bounds how long one hold keeps a token back: a backlog
// behind a low rate comes back at most this far apart.
const maxRateHold = 15 * time.Minute

// holdForRate takes a start from the rate window of the queue this token
// came from, when that queue has a rate limit (Config.RateLimits), before
// the token claims or creates its task. It returns false when the start
// may go ahead. Otherwise the message is held back, with no write to the
// task (so no attempt is used): hidden until a later window, or replaced
// by a fresh token near maxReceiveCount (keep), and it returns the state
// to exit with.
//
// The hold grows with the message's receive count, drawn at random within
// it, so that a backlog larger than one window spreads over later windows
// instead of coming back all at once: from the next window up to 2^count
// windows later, at most maxRateHold. A window's write that fails holds
// the token back too (for one window): the limit errs on the side of
// fewer starts.
func (x *execution) holdForRate() (State, bool) {
	if len(x.cfg.RateLimits) == 0 {
		return 0, false
	}
	queue := queues.NameFromURL(x.msgQueueURL())
	limit, ok := x.cfg.RateLimits[queue]
	if !ok && x.msgQueueURL() == x.cfg.QueueURL {
		limit, ok = x.cfg.RateLimits[""]
	}
	if !ok {
		return 0, false
	}
	now := x.cfg.Clock.Now()
	window := now.Truncate(limit.Per)
	cctx, cancel := x.call()
	allowed, err := x.cfg.Store.(lease.RateLimiter).TakeStart(cctx, queue, window, limit.Per, limit.Starts)
	cancel()
	if err == nil && allowed {
		return 0, false
	}
	hold := window.Add(limit.Per).Sub(now)
	if err == nil {
		spread := min(limit.Per<<min(max(x.msg.ReceiveCount, 1), 10), maxRateHold)
		hold = min(hold+rand.N(spread), maxRateHold)
	}
	hold = max(hold.Round(time.Second), time.Second)
	reason := fmt.Sprintf("held back by the rate limit of queue %s (%s): offered again in %s without using an attempt", queue, limit, hold)
	if err != nil {
		reason = fmt.Sprintf("held back: the rate window of queue %s could not be read (%v); offered again in %s without using an attempt", queue, err, hold)
		x.log.warn("could not take a start from the queue's rate window; the token is held back", "error", err, "queue", queue)
	} else {
		x.log.debug("rate limit reached; the token is held back", "queue", queue, "limit", limit.String(), "hold", hold)
	}
	x.result.Held = true
	return x.keep(x.detached, hold, reason), true
}

// maxSlotHold bounds the wait of a task held back by its kind's
// concurrency limit; noDeadlineSlot is how long an attempt without an
// invocation deadline holds its slot (Lambda's longest invocation).
const (
	maxSlotHold    = 5 * time.Minute
	noDeadlineSlot = 15 * time.Minute
	// maxSlotChecks bounds the holders of a full slot set whose tasks a
	// held attempt reads (lease.SlotLimiter.FreeLostSlots): the oldest,
	// likeliest to be lost.
	maxSlotChecks = 2
)

// holdForSlot takes a slot of the claimed task's kind when the kind has a
// concurrency limit (Config.KindConcurrency), before its handler starts.
// It returns false when the handler may start; the slot is held until the
// invocation's deadline and given back when the execution ends
// (releaseSlot). Otherwise the task is released to PENDING with its
// attempt handed back (counted as a snooze, with the reason in its error
// and history) and offered again after a wait that doubles with its
// snoozes, from 1 s to 5 min, drawn from [w/2, w]; it returns the state to
// go on with. A slot set that cannot be written holds the task back too.
// Before it holds the task back, a full set's oldest holders are checked,
// and the slots of attempts that are over or lost are given back
// (lease.SlotLimiter.FreeLostSlots): then it takes a slot again.
func (x *execution) holdForSlot(ctx context.Context) (State, bool) {
	limit, ok := x.cfg.KindConcurrency[x.task.Kind]
	if !ok {
		return 0, false
	}
	now := x.cfg.Clock.Now()
	until := now.Add(noDeadlineSlot)
	if dl, ok := ctx.Deadline(); ok {
		until = dl
	}
	holder := lease.SlotHolder(x.task.ID, x.task.Fence)
	slots := x.cfg.Store.(lease.SlotLimiter)
	cctx, cancel := x.call()
	got, err := slots.AcquireSlot(cctx, x.task.Kind, holder, limit, until)
	cancel()
	if err == nil && !got {
		// Full: a holder whose worker died keeps its slot until its time
		// (an invocation's deadline, up to 15 minutes) unless its lost
		// attempt is found and its slot given back.
		// Its calls: the set's read, and a read and a write per holder.
		cctx, cancel := context.WithTimeout(x.detached, (1+2*maxSlotChecks)*x.cfg.CallTimeout)
		freed, ferr := slots.FreeLostSlots(cctx, x.task.Kind, maxSlotChecks)
		cancel()
		if ferr != nil {
			x.log.debug("could not check the concurrency slots' holders", "error", ferr)
		}
		if freed > 0 {
			x.log.info("gave back concurrency slots of lost attempts", "freed", freed)
			cctx, cancel := x.call()
			got, err = slots.AcquireSlot(cctx, x.task.Kind, holder, limit, until)
			cancel()
		}
	}
	if err == nil && got {
		x.slotHolder = holder
		return 0, false
	}
	wait := min(time.Second<<min(x.task.Snoozes, 9), maxSlotHold)
	if half := wait / 2; half > 0 {
		wait = half + rand.N(wait-half+1)
	}
	wait = max(wait.Round(time.Second), time.Second)
	reason := fmt.Sprintf("held back: kind %q is at its concurrency limit (%d running); offered again in %s without using an attempt", x.task.Kind, limit, wait)
	if err != nil {
		reason = fmt.Sprintf("held back: the concurrency slots of kind %q could not be read (%v); offered again in %s without using an attempt", x.task.Kind, err, wait)
		x.log.warn("could not take a concurrency slot; the task is held back", "error", err)
	} else {
		x.log.debug("concurrency limit reached; the task is held back", "limit", limit, "retry_in", wait)
	}
	x.result.Held = true
	x.result.Reason = reason
	return x.reschedule(ctx, lease.Release{Status: lease.StatusPending, RunAt: now.Add(wait), Error: reason, RefundAttempt: true}, OutcomeHeld), true
}

// releaseSlot gives back the concurrency slot this execution took, if
// any. A release that fails leaves the slot to expire at its time.
func (x *execution) releaseSlot() {
	if x.slotHolder == "" {
		return
	}
	cctx, cancel := x.call()
	defer cancel()
	if err := x.cfg.Store.(lease.SlotLimiter).ReleaseSlot(cctx, x.task.Kind, x.slotHolder); err != nil {
		x.log.warn("could not give back a concurrency slot; it frees itself at its time", "error", err)
	}
	x.slotHolder = ""
}
