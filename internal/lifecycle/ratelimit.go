package lifecycle

import (
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
