package lifecycle

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/limiter"
)

// A kind's concurrency limit (Config.KindConcurrency): a slot of the
// kind's slot set is taken after the claim, before the handler starts
// (holdForSlot, in StateClaimed), and given back when the execution ends
// (releaseSlot, after the loop of run).

// maxSlotHold bounds the wait of a task held back by its kind's
// concurrency limit; noDeadlineSlot is how long an attempt without an
// invocation deadline holds its slot (Lambda's longest invocation).
const (
	maxSlotHold    = 5 * time.Minute
	noDeadlineSlot = 15 * time.Minute
	// maxSlotChecks bounds the holders of a full slot set whose tasks a
	// held attempt reads (limiter.SlotLimiter.FreeLostSlots): the oldest,
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
// (limiter.SlotLimiter.FreeLostSlots): then it takes a slot again.
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
	holder := limiter.SlotHolder(x.task.ID, x.task.Fence)
	slots := x.cfg.caps.slots
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
		x.claimed.slotHolder = holder
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
	if x.claimed.slotHolder == "" {
		return
	}
	cctx, cancel := x.call()
	defer cancel()
	if err := x.cfg.caps.slots.ReleaseSlot(cctx, x.task.Kind, x.claimed.slotHolder); err != nil {
		x.log.warn("could not give back a concurrency slot; it frees itself at its time", "error", err)
	}
	x.claimed.slotHolder = ""
}
