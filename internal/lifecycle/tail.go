package lifecycle

import (
	"context"

	"github.com/leasehold/leasehold/internal/durable"
	"github.com/leasehold/leasehold/internal/lease"
)

// A history's spilled tail (docs/workflows.md, "History beyond the item"):
// the executor reads it whole before the handler runs, and the durable
// calls record past the frozen head through Spill and PutStep.

// startWorkflow sets the run's workflow state: the task's inline steps,
// and for a task whose history has spilled its whole tail after them, read
// in pages of lease.MaxStepsPage.
func (x *execution) startWorkflow(ctx context.Context, results *durable.WaitResults) error {
	if !x.task.Spilled {
		x.flow.ctx.Start(x, x.task.LeaseOf(), x.task.Steps, x.task.WaitNote, results)
		return nil
	}
	steps, err := lease.ReadHistory(ctx, x.cfg.Store, x.task, x.cfg.CallTimeout)
	if err != nil {
		return err
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
// StateStepping.
func (x *execution) PutStep(ctx context.Context, id string, pos int, st lease.Step) (lease.Step, error) {
	stepping(true)
	defer stepping(false)
	cctx, cancel := context.WithTimeout(ctx, x.cfg.CallTimeout)
	defer cancel()
	return x.cfg.Store.PutStep(cctx, id, pos, st)
}
