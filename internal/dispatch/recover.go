package dispatch

import (
	"context"
	"time"

	"github.com/leasehold/leasehold/internal/defaults"
)

// Recovery bounds. A task whose message was lost is dispatched again by the
// first sweep at or after its sweep-index time:
//
//   - PENDING and due, with no token: run_at + DispatchGrace;
//   - RUNNING under a holder that stopped renewing: lease_until + skew +
//     DispatchGrace (lease_until is at most one lease duration after the
//     holder's last claim or renewal).
//
// With one sweep every period P (SweepLoop waits P after each sweep ends),
// that sweep comes at most P plus one sweep's run time later. With the
// defaults (lease 20s, skew 2s, grace 2m, P 1m) a task whose holder died is
// re-dispatched at most 20s + 2s + 2m + 1m + the sweep's run time after the
// holder's last renewal.
const (
	// DefaultSweepEvery is the period of SweepLoop when none is given: as
	// often as the scheduled dispatch function runs.
	DefaultSweepEvery = defaults.SweepEvery
	// MinSweepEvery is the shortest period SweepLoop accepts.
	MinSweepEvery = 100 * time.Millisecond
	// minSweepBudget is the least time one sweep of SweepLoop is given:
	// Sweep starts no new page within its last 5 seconds.
	minSweepBudget = 15 * time.Second
)

// SweepLoop sweeps at once, then again every period after the previous
// sweep ended, until ctx is done. A sweep is bounded by max(every, 15s) and
// cut short when ctx ends: an entry this sweep marked but had not yet sent a
// token for is due again after the grace, so a later sweep (of this process
// or any other) dispatches it. A sweep that fails is logged; the next one
// retries what it left. Sweeps of many processes on one table are safe: the
// conditional MarkDispatched lets one sweep send the token of an entry, and
// the claim turns any duplicate into a no-op. SweepLoop leaves no goroutine
// running when it returns.
func (d *Dispatcher) SweepLoop(ctx context.Context, every time.Duration) {
	if every <= 0 {
		every = DefaultSweepEvery
	}
	every = max(every, MinSweepEvery)
	log := d.cfg.Logger
	for {
		sctx, cancel := context.WithTimeout(ctx, max(every, minSweepBudget))
		stats, err := d.Sweep(sctx, d.cfg.Clock.Now())
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			log.WarnContext(ctx, "recovery sweep incomplete", "error", err, "dispatched", stats.Dispatched, "failed", stats.Failed)
		case stats.Due > 0:
			log.InfoContext(ctx, "recovery sweep", "due", stats.Due, "dispatched", stats.Dispatched, "raced", stats.Raced)
		}
		timer := d.cfg.Clock.NewTimer(every)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.Chan():
		}
	}
}
