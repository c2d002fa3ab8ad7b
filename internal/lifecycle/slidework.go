package lifecycle

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/queues"
)

// A sliding map's parent run does its bookkeeping (pages, groups, the
// starts of idle slots) after its handler returned and before it
// suspends. Until it suspends, a worker that dies with it loses the run
// and uses one of the parent's attempts (a suspension starts the count
// again, lease.Store.Suspend). Under load a first run of a map of
// MaxConcurrency 50 made some 180 calls and took 8 s in the chaos test,
// and four of those runs in a row died with their worker. So a run is
// bounded (slideBudget): past its budget it stops at the next step,
// raises the groups to the pages it wrote, tells its own wake id and
// suspends, and its next run (at once) goes on from the groups; and the
// calls a store error fails are tried again in place (slideTry) before
// they fail the run.

const (
	// slideBudgetMax bounds a parent run's bookkeeping time
	// (slideBudget) whatever the lease.
	slideBudgetMax = 5 * time.Second
	// slideTries is how many times one bookkeeping call is made before
	// its store error fails the run (which then uses an attempt).
	slideTries = 4
	// slideRetryPause is the pause before a call's second try; it doubles
	// for each later try, jittered within [pause/2, pause).
	slideRetryPause = 100 * time.Millisecond
)

// slideBudget is how long one parent run may spend on a sliding map's
// bookkeeping before it stops at the next step and suspends: half the
// lease (a run that outlives a worker's lease is likely to meet a kill
// or a pause), at most slideBudgetMax. A run always does at least one
// step (a page written or a child started), so each run makes progress.
func (x *execution) slideBudget() time.Duration {
	return min(x.cfg.LeaseDuration/2, slideBudgetMax)
}

// slideTry makes call, one of a sliding map's bookkeeping calls, each try
// bounded by the call timeout, and makes it again after a short jittered
// pause while it fails with an error worth trying again (slideRetryable),
// slideTries times in all. Every such call is idempotent: a try whose
// answer was lost is met by the next (a page put again, a group already
// raised or unparked, a token sent twice, which its claim tells apart).
func (x *execution) slideTry(call func(ctx context.Context) error) error {
	pause := slideRetryPause
	for try := 1; ; try++ {
		cctx, cancel := x.call()
		err := call(cctx)
		cancel()
		if err == nil || try == slideTries || !slideRetryable(err) {
			return err
		}
		x.log.info("sliding map: a bookkeeping call failed; trying it again", "try", try, "error", err)
		if perr := x.slidePause(pause/2 + rand.N(pause/2)); perr != nil {
			return errors.Join(err, perr)
		}
		pause *= 2
	}
}

// slideRetryable reports whether err, a bookkeeping call's, is worth
// trying again in place: a store's backend error (network, throttling,
// service) or a send that failed (the SDK gave up its own retries), but
// not a queue that does not exist, nor a context that ended.
func slideRetryable(err error) bool {
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, queues.ErrNotFound):
		return false
	case errors.Is(err, lease.ErrBackend):
		return true
	}
	var send *slideSendError
	return errors.As(err, &send)
}

// slideSendError marks a failed send of a child's token (slideStart), so
// that slideTry tries it again.
type slideSendError struct{ err error }

func (e *slideSendError) Error() string { return e.err.Error() }
func (e *slideSendError) Unwrap() error { return e.err }

// slidePause waits d between two tries of a bookkeeping call, detached
// from shutdown as the calls are (a run that stops half-way costs an
// attempt): with Config.Pause when set (a test's fake clock does not move
// while a run runs), otherwise on the worker's clock.
func (x *execution) slidePause(d time.Duration) error {
	if x.cfg.Pause != nil {
		return x.cfg.Pause(x.detached, d)
	}
	t := x.cfg.Clock.NewTimer(d)
	defer stopTimer(t)
	select {
	case <-t.Chan():
		return nil
	case <-x.detached.Done():
		return context.Cause(x.detached)
	}
}
