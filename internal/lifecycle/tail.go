package lifecycle

import (
	"context"
	"fmt"

	"github.com/leasehold/leasehold/internal/durable"
	"github.com/leasehold/leasehold/internal/lease"
)

// A history's spilled tail (docs/workflows.md, "History beyond the item"):
// the executor reads it whole before the handler runs, and the durable
// calls record past the frozen head through Spill and PutStep.

// startWorkflow sets the run's workflow state: the task's inline steps,
// and for a task whose history has spilled its whole tail after them, read
// in pages of lease.MaxStepsPage (renewing the lease on the way when the
// read is long).
func (x *execution) startWorkflow(ctx context.Context, results *durable.WaitResults) error {
	if !x.task.Spilled {
		x.flow.ctx.Start(x, x.task.LeaseOf(), x.task.Steps, x.task.WaitNote, results)
		return nil
	}
	steps := append([]lease.Step(nil), x.task.Steps...)
	for len(steps) < lease.MaxOperations {
		cctx, cancel := context.WithTimeout(ctx, x.cfg.CallTimeout)
		page, err := x.cfg.Store.ReadSteps(cctx, x.task.TailID(), len(steps), lease.MaxStepsPage)
		cancel()
		if err != nil {
			return fmt.Errorf("could not read the task's history from operation %d: %w", len(steps)+1, err)
		}
		steps = append(steps, page...)
		if len(page) < lease.MaxStepsPage {
			break
		}
		// A long history (25,000 operations, 50 MB) may take longer to
		// read than a lease lasts, and the renewer starts with the
		// handler: renew here once half of it has gone.
		if x.cfg.Clock.Until(x.task.LeaseUntil) < x.cfg.LeaseDuration/2 {
			cctx, cancel := context.WithTimeout(ctx, x.cfg.CallTimeout)
			renewed, err := x.cfg.Store.Renew(cctx, x.task.LeaseOf())
			cancel()
			if err != nil {
				return fmt.Errorf("could not renew the lease while reading the task's history: %w", err)
			}
			x.task = renewed
		}
	}
	x.flow.ctx.StartSpilled(x, x.task.LeaseOf(), steps, x.task.WaitNote, results)
	return nil
}

// Spill freezes the task's inline steps (durable.Attempt), in
// StateStepping.
func (x *execution) Spill(ctx context.Context, l lease.Lease, n int) (lease.Task, error) {
	stepping(true)
	defer stepping(false)
	cctx, cancel := context.WithTimeout(ctx, x.cfg.CallTimeout)
	defer cancel()
	return x.cfg.Store.Spill(cctx, l, n)
}

// PutStep records an operation of the tail (durable.Attempt), in
// StateStepping, under the tail of the task's run (Task.TailID; id is
// the task's).
func (x *execution) PutStep(ctx context.Context, _ string, pos int, st lease.Step) (lease.Step, error) {
	stepping(true)
	defer stepping(false)
	cctx, cancel := context.WithTimeout(ctx, x.cfg.CallTimeout)
	defer cancel()
	return x.cfg.Store.PutStep(cctx, x.task.TailID(), pos, st)
}
