package lifecycle

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
)

// StateAwaitingDependencies: an inline token with dependencies creates its
// task WAITING and registers it on each dependency.

// MissingDependencyGrace is how long after its creation a task with a
// dependency that does not exist keeps waiting for it to appear; after that
// it is cancelled with the reason.
const MissingDependencyGrace = 5 * time.Minute

// runAwaitingDependencies creates the inline token's task, which has
// dependencies, WAITING for them.
func (x *execution) runAwaitingDependencies(ctx context.Context) State {
	return x.createWaiting(ctx, *x.in.dependent)
}

// createWaiting creates a task with dependencies (WAITING) from its token,
// registers it on each dependency, and tells it of those that ended
// already. Every step is idempotent, so a redelivery redoes them.
func (x *execution) createWaiting(ctx context.Context, nt lease.NewTask) State {
	var task lease.Task
	err := lease.ErrNotFound
	if nt.CreateToken != "" {
		// The client stores the task right after sending its token, so it
		// is most likely there: a read costs a fifth of a create whose
		// condition fails.
		cctx, cancel := x.call()
		task, err = x.cfg.Store.Get(cctx, nt.ID)
		cancel()
		if err == nil {
			err = lease.CheckDuplicate(task, nt) // a duplicate or a conflict
		}
	}
	if errors.Is(err, lease.ErrNotFound) {
		nt.WaitUntil = x.cfg.Clock.Now().Add(cmp.Or(x.in.tok.WaitTimeout, x.cfg.WaitTimeout))
		cctx, cancel := x.call()
		task, err = x.cfg.Store.Create(cctx, nt)
		cancel()
	}
	switch {
	case err == nil:
	case errors.Is(err, lease.ErrAlreadyExists):
		if task.Status != lease.StatusWaiting {
			if task.Status.Terminal() {
				x.task = task
				return x.ended(true, "")
			}
			return x.exit(true, "") // resumed already: its own token runs it
		}
	case errors.Is(err, lease.ErrConflict):
		return x.reject(ctx, err.Error())
	default:
		x.log.warn("could not create task", "error", err)
		return x.keep(ctx, 0, err.Error())
	}
	// x.task stays unset while this message must be kept: a token kept
	// past ReplaceAtReceiveCount is replaced by this very body (not a
	// reference), which still carries the dependencies to register.
	if st, done := x.registerOn(ctx, task, nt.After); !done {
		return st
	}
	return x.exit(true, "")
}

// registerOn registers task, which waits for dependencies, as a waiter on
// each of deps, and tells it of those that ended already. Every write is
// idempotent. It reports false with the state to end in when the message
// must be kept, or the wait was abandoned (a cycle, a full waiter set).
func (x *execution) registerOn(ctx context.Context, task lease.Task, deps []string) (State, bool) {
	w := lease.Waiter{ID: task.ID, Mode: task.Wait}
	for _, dep := range deps {
		cctx, cancel := x.call()
		seen, err := x.cfg.Store.Watch(cctx, dep, w)
		cancel()
		var fin *lease.FinishedError
		var ended lease.Task
		switch {
		case err == nil && waitsFor(seen, task.ID):
			return x.abandonWait(ctx, task, lease.StatusCancelled, cycleReason([]string{task.ID, seen.ID})), false
		case err == nil:
			continue
		case errors.Is(err, lease.ErrWaiterLimit):
			return x.abandonWait(ctx, task, lease.StatusCancelled, fmt.Sprintf("dependency %s has %d waiters already, the limit; this task cannot wait for it", dep, lease.MaxWaiters)), false
		case errors.As(err, &fin):
			ended = fin.Task
		case errors.Is(err, lease.ErrNotFound) && x.cfg.Clock.Since(task.CreatedAt) < MissingDependencyGrace:
			// Its token may not have been taken yet (both sent together):
			// look again shortly.
			return x.keep(ctx, x.cfg.VisibilityMargin, fmt.Sprintf("dependency %s not found yet", dep)), false
		case errors.Is(err, lease.ErrNotFound):
			ended = lease.Task{ID: dep} // no status: "does not exist"
		case errors.Is(err, lease.ErrInvalid):
			ended = lease.Task{ID: dep, Status: lease.StatusFailed, Error: err.Error()}
		default:
			return x.keep(ctx, 0, err.Error()), false
		}
		if err := x.notifyOne(ctx, w, ended, 0); err != nil {
			return x.keep(ctx, 0, err.Error()), false
		}
	}
	return StateExited, true // (the state is not used)
}
