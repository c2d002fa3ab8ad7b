package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
)

// TokenReader reads a task with the create token it was stored under; both
// lease stores have it (GetWithToken). Enqueue needs it for CreateWait.
type TokenReader interface {
	GetWithToken(ctx context.Context, id string) (lease.Task, string, error)
}

// The reads of a task whose create Enqueue leaves to the worker (see
// Config.CreateWait): the first after firstRead, each later one after twice
// the pause before it, at most maxReadPause.
// A worker that polls takes the token within a receive and creates the
// task in one write, tens of milliseconds; each read is half a read unit,
// so the pauses start near that and grow fast.
const (
	firstRead    = 25 * time.Millisecond
	maxReadPause = 250 * time.Millisecond
)

// createFirst reports whether Enqueue leaves n's create to the worker that
// receives its token: with a CreateWait, for a task due now with no
// dependencies (the worker registers a dependent on its dependencies in
// other writes, and a delayed token arrives after any wait).
func (d *Dispatcher) createFirst(n lease.NewTask, r ref) bool {
	return d.cfg.CreateWait > 0 && d.reader != nil && r.delay == 0 && len(n.After) == 0
}

// stored reads the tasks of tasks whose indexes pending lists, concurrently,
// and answers each one found: stored[i] is the task, found[i] whether it
// exists, tokens[i] the create token it was stored under. A task that could
// not be read counts as not found.
func (d *Dispatcher) stored(ctx context.Context, tasks []lease.NewTask, pending []int) (stored []lease.Task, tokens []string, found []bool) {
	stored, tokens, found = make([]lease.Task, len(pending)), make([]string, len(pending)), make([]bool, len(pending))
	each(ctx, len(pending), d.cfg.Concurrency, func(j int) {
		t, tok, err := d.reader.GetWithToken(ctx, tasks[pending[j]].ID)
		if err == nil {
			stored[j], tokens[j], found[j] = t, tok, true
		}
	})
	return stored, tokens, found
}

// answer is the result of n, whose id is taken by old, stored under another
// create than n's: a conflict (another kind or payload), or a duplicate.
func answer(old lease.Task, n lease.NewTask, sent bool) EnqueueResult {
	err := lease.CheckDuplicate(old, n)
	if errors.Is(err, lease.ErrAlreadyExists) {
		return EnqueueResult{Task: old, Duplicate: true, Sent: sent}
	}
	return EnqueueResult{Task: old, Err: err, Sent: sent}
}

// awaitCreates waits, at most CreateWait, for the workers that receive the
// tokens of tasks[i] for i in waiting (sent with a create-first token,
// createTokens[i]) to store them, reading them with a growing pause, and
// fills in results[i] for each one stored meanwhile: by its token's worker
// (created), or by another call (a duplicate or a conflict). It returns
// the indexes of those still not stored, which Enqueue then stores itself
// under the same create token: whichever create lands first, the other
// finds it as its own.
func (d *Dispatcher) awaitCreates(ctx context.Context, tasks []lease.NewTask, createTokens []string, waiting []int, results []EnqueueResult) []int {
	deadline := d.cfg.Clock.Now().Add(d.cfg.CreateWait)
	pause := firstRead
	for len(waiting) > 0 {
		wait := min(pause, deadline.Sub(d.cfg.Clock.Now()))
		if wait <= 0 {
			break
		}
		select {
		case <-ctx.Done():
			for _, i := range waiting {
				// The token is out: its worker may still store and run
				// the task (enqueue it again with the same id to know).
				results[i] = EnqueueResult{Sent: true, Err: fmt.Errorf("enqueue %s: its token was sent, its create not seen: %w", tasks[i].ID, context.Cause(ctx))}
			}
			return nil
		case <-d.cfg.Clock.After(wait):
		}
		pause = min(2*pause, maxReadPause)
		stored, tokens, found := d.stored(ctx, tasks, waiting)
		left := waiting[:0:0]
		for j, i := range waiting {
			switch {
			case !found[j]:
				left = append(left, i)
			case tokens[j] == createTokens[i]:
				results[i] = EnqueueResult{Task: stored[j], Sent: true}
			default:
				results[i] = answer(stored[j], tasks[i], true)
			}
		}
		waiting = left
	}
	return waiting
}
