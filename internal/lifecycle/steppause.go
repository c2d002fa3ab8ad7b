package lifecycle

import (
	"context"
	"time"

	"github.com/leasehold/leasehold/internal/durable"
)

// Pause waits d between two tries of a step with a policy, in the
// handler's process (durable.Pauser), while the renewer keeps the lease:
// with Config.Pause when set, otherwise on the worker's clock. It does not
// wait (false) when the wait and as long again would run past the
// handler's deadline: the step snoozes durably instead of losing the
// attempt to the deadline. It returns the handler context's cause if that
// ends first.
func (x *execution) Pause(ctx context.Context, d time.Duration) (bool, error) {
	if ms := x.running.deadlineMS; ms > 0 {
		dl := x.running.startedAt.Add(time.Duration(ms) * time.Millisecond)
		if x.cfg.Clock.Now().Add(2 * d).After(dl) {
			return false, nil
		}
	}
	if x.cfg.Pause != nil {
		return true, x.cfg.Pause(ctx, d)
	}
	t := x.cfg.Clock.NewTimer(d)
	defer stopTimer(t)
	select {
	case <-t.Chan():
		return true, nil
	case <-ctx.Done():
		return true, context.Cause(ctx)
	}
}

var _ durable.Pauser = (*execution)(nil)
