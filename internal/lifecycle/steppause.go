package lifecycle

import (
	"context"
	"time"

	"github.com/leasehold/leasehold/internal/durable"
)

// Pause waits d between two tries of a step with a policy, in the
// handler's process (durable.Pauser), while the renewer keeps the lease:
// with Config.Pause when set, otherwise on the worker's clock. It returns
// the handler context's cause if that ends first.
func (x *execution) Pause(ctx context.Context, d time.Duration) error {
	if x.cfg.Pause != nil {
		return x.cfg.Pause(ctx, d)
	}
	t := x.cfg.Clock.NewTimer(d)
	defer stopTimer(t)
	select {
	case <-t.Chan():
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

var _ durable.Pauser = (*execution)(nil)
