package lifecycle

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/queues"
	"github.com/leasehold/leasehold/settings"
)

// maxRateHold bounds how long one hold keeps a token back: a backlog
// behind a low rate comes back at most this far apart.
const maxRateHold = 15 * time.Minute

// A queue's rate limit (Config.RateLimits) counts starts: a task claimed
// (or created and claimed) to run, and nothing else. So the start is taken
// after the claim, once the task is known to be runnable here (its kind
// served, its kind's slot held), by holdForRate; a reference to a missing
// task, a duplicate delivery, a token of a finished or leased task, and a
// resume after a wait spend nothing. A claimed task that finds the window
// full is released with its attempt handed back, as a concurrency hold is.
//
// That costs the hold a claim and a release, so the first hold in a window
// is remembered (fullWindows): until the window ends, a token from that
// queue is held back before its claim, with no write at all (heldByWindow).
// A window once full stays full (its count only grows), so the memory
// never holds back a start the window has room for.

// fullWindows remembers, per limited queue, the end of the last rate window
// an execution of the Executor found full (unix nanoseconds; 0: none).
type fullWindows map[string]*atomic.Int64

func newFullWindows(limits map[string]settings.RateLimit) fullWindows {
	if len(limits) == 0 {
		return nil
	}
	w := make(fullWindows, len(limits))
	for queue := range limits {
		w[queue] = new(atomic.Int64)
	}
	return w
}

// rateLimit returns the rate limit of the queue this message came from,
// its name, and the key of its limit in Config.RateLimits ("" for the
// default work queue limited as such).
func (x *execution) rateLimit() (limit settings.RateLimit, queue, key string, ok bool) {
	if len(x.cfg.RateLimits) == 0 {
		return limit, "", "", false
	}
	queue = queues.NameFromURL(x.msgQueueURL())
	if limit, ok = x.cfg.RateLimits[queue]; ok {
		return limit, queue, queue, true
	}
	if x.msgQueueURL() == x.cfg.QueueURL {
		limit, ok = x.cfg.RateLimits[""]
	}
	return limit, queue, "", ok
}

// rateHold is how long a token held back by a full window of limit waits:
// to the next window, plus a draw that grows with n (the message's receive
// count, or the task's hand-backs), so that a backlog larger than one
// window spreads over later windows instead of coming back all at once:
// up to 2^n windows later, at most maxRateHold. spread false: the next
// window only (a window whose write failed).
func rateHold(limit settings.RateLimit, now time.Time, n int, spread bool) time.Duration {
	window := now.Truncate(limit.Per)
	hold := window.Add(limit.Per).Sub(now)
	if spread {
		s := min(limit.Per<<min(max(n, 1), 10), maxRateHold)
		hold = min(hold+rand.N(s), maxRateHold)
	}
	return max(hold.Round(time.Second), time.Second)
}

// heldByWindow holds this message's token back, before any write, while
// the rate window of its queue is known to be full (fullWindows). It
// returns false when the token may go on to its claim.
func (x *execution) heldByWindow() (State, bool) {
	limit, queue, key, ok := x.rateLimit()
	if !ok {
		return 0, false
	}
	now := x.cfg.Clock.Now()
	if now.UnixNano() >= x.cfg.fullWindows[key].Load() {
		return 0, false
	}
	hold := rateHold(limit, now, x.msg.ReceiveCount, true)
	reason := fmt.Sprintf("held back by the rate limit of queue %s (%s): its window is full; offered again in %s", queue, limit, hold)
	x.log.debug("rate window known full; the token is held back before its claim", "queue", queue, "limit", limit.String(), "hold", hold)
	x.result.Held = true
	return x.keep(x.detached, hold, reason), true
}

// holdForRate takes a start from the rate window of the queue this token
// came from, when that queue has a rate limit, for the claimed task about
// to run. It returns false when the handler may start. Otherwise the task
// is released to PENDING with its attempt handed back (counted as a
// snooze, with the reason in its error and history), offered again in a
// later window by a fresh delayed token, and the window is remembered as
// full; it returns the state to go on with. A resumed task (a wake after
// its wait) is not a start. A window's write that fails holds the task
// back too (for one window): the limit errs on the side of fewer starts.
func (x *execution) holdForRate(ctx context.Context) (State, bool) {
	limit, queue, key, ok := x.rateLimit()
	if !ok || x.claimed.resumed {
		return 0, false
	}
	now := x.cfg.Clock.Now()
	window := now.Truncate(limit.Per)
	cctx, cancel := x.call()
	allowed, err := x.cfg.caps.rates.TakeStart(cctx, queue, window, limit.Per, limit.Starts)
	cancel()
	if err == nil && allowed {
		return 0, false
	}
	hold := rateHold(limit, now, x.task.Snoozes+1, err == nil)
	reason := fmt.Sprintf("held back by the rate limit of queue %s (%s): offered again in %s without using an attempt", queue, limit, hold)
	if err != nil {
		reason = fmt.Sprintf("held back: the rate window of queue %s could not be read (%v); offered again in %s without using an attempt", queue, err, hold)
		x.log.warn("could not take a start from the queue's rate window; the task is held back", "error", err, "queue", queue)
	} else {
		end, full := window.Add(limit.Per).UnixNano(), x.cfg.fullWindows[key]
		for seen := full.Load(); seen < end && !full.CompareAndSwap(seen, end); seen = full.Load() {
		}
		x.log.debug("rate limit reached; the task is held back", "queue", queue, "limit", limit.String(), "hold", hold)
	}
	x.result.Held = true
	x.result.Reason = reason
	return x.reschedule(ctx, lease.Release{Status: lease.StatusPending, RunAt: now.Add(hold), Error: reason, RefundAttempt: true}, OutcomeHeld), true
}
