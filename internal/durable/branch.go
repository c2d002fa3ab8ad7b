package durable

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
)

// OpBranch is the operation of a branch's outcome (BranchFuture).
const OpBranch = "branch"

// runExtra is what a run makes of its branches and receives, at the
// first of them (Workflow.extra).
type runExtra struct {
	// wg counts the goroutines of the run's branches (BranchFuture): the
	// run owns them, and Join waits for them before the run ends.
	wg sync.WaitGroup
	// receives counts the receives of each topic (as a space qualifies
	// it) called so far; pending holds the topics with a receive not
	// settled (ReceiveFuture).
	receives map[string]int
	pending  map[string]bool
}

// extras is w.extra, made if need be; w.mu is held.
func (w *Workflow) extras() *runExtra {
	if w.extra == nil {
		w.extra = &runExtra{}
	}
	return w.extra
}

// branchOutcome is a branch's recorded outcome: its result, or the reason
// of its permanent failure.
type branchOutcome struct {
	Result json.RawMessage `json:"result,omitempty"`
	Error  *string         `json:"error,omitempty"`
}

// BranchFuture starts fn as the branch called name, in a goroutine of its
// own and an operation space of its own ("@NAME/..."), and returns it as
// a future. The branch's outcome is its space's last operation, "result"
// (operation "branch"): a run that finds it recorded settles the future
// from it without running fn, so without replaying the branch's
// operations. A branch that returns success records its result; one that
// fails for good (a PermanentError) records its failure, which a
// combinator counts; any other error (a wait, a step's failure, a
// divergence) is recorded nowhere, and the combinator that waits for the
// branch returns it, or suspends the task on it when no other branch can
// go on. The goroutine is joined before the run ends (Join).
func BranchFuture(ctx context.Context, name string, fn func(context.Context) ([]byte, error)) *Future {
	return branchIn(ctx, spaceOf(ctx).child(name), name, fn, nil)
}

// branchIn starts fn as the branch called name in the space sp, holding a
// slot of sem (when not nil) while fn runs.
func branchIn(ctx context.Context, sp *space, name string, fn func(context.Context) ([]byte, error), sem chan struct{}) *Future {
	f := &Future{kind: futureBranch, name: name, ch: make(chan struct{})}
	sp.branch = true
	w, ok := ctx.Value(workflowKey{}).(*Workflow)
	if !ok {
		f.done, f.err = true, ErrNoWorkflow
		close(f.ch)
		return f
	}
	if err := CheckAwaitName(name); err != nil {
		f.done, f.err = true, &PermanentError{Err: fmt.Errorf("branch: %w", err)}
		close(f.ch)
		return f
	}
	result := sp.qualify("result")
	w.mu.Lock()
	twice := w.called[result]
	bs := w.extras()
	w.mu.Unlock()
	if twice {
		f.done, f.err = true, &PermanentError{Err: fmt.Errorf("branch %q: %w", name, ErrStepTwice)}
		close(f.ch)
		return f
	}
	bctx := context.WithValue(ctx, spaceKey{}, sp)
	bs.wg.Add(1)
	go func() {
		defer bs.wg.Done()
		defer close(f.ch)
		defer func() {
			if v := recover(); v != nil {
				f.err = fmt.Errorf("branch %q panicked: %v", name, v)
			}
		}()
		// Its outcome recorded: settled from it, fn not run, the
		// operations inside not replayed.
		w.mu.Lock()
		at := w.recordedAt(sp, result)
		if at >= 0 {
			sp.cursor = at
		}
		w.mu.Unlock()
		recorded := at >= 0
		if !recorded {
			if sem != nil {
				select {
				case sem <- struct{}{}:
					defer func() { <-sem }()
				case <-ctx.Done():
					f.err = context.Cause(ctx)
					return
				}
			}
		}
		var out []byte
		var err error
		if !recorded {
			out, err = fn(bctx)
		}
		var perm *PermanentError
		if err != nil && !errors.As(err, &perm) {
			f.err = err // a wait, a failed step, a divergence: not the branch's outcome
			return
		}
		raw, rerr := stepOf(bctx, "result", OpBranch, func(context.Context) ([]byte, error) {
			o := branchOutcome{Result: out}
			if err != nil {
				msg := err.Error()
				o.Result, o.Error = nil, &msg
			}
			return json.Marshal(o)
		}, false)
		if rerr != nil {
			f.err = rerr
			return
		}
		var o branchOutcome
		if jerr := json.Unmarshal(raw, &o); jerr != nil {
			f.err = &PermanentError{Err: fmt.Errorf("branch %q: recorded outcome %q is not a branch's: %w", name, raw, jerr)}
			return
		}
		f.done = true
		if o.Error != nil {
			f.err = &PermanentError{Err: fmt.Errorf("branch %q: %s", name, *o.Error)}
			return
		}
		f.out = o.Result
	}()
	return f
}

// recordedAt is the index in w.steps of the operation name of the space
// sp, -1 when it is not recorded; w.mu is held.
func (w *Workflow) recordedAt(sp *space, name string) int {
	for i := sp.cursor; i < len(w.steps); i++ {
		if w.steps[i].Name == name {
			return i
		}
	}
	return -1
}

// Join waits for the run's branches (BranchFuture) to end: the executor
// calls it when the handler returns, so no branch outlives its run.
func (w *Workflow) Join() {
	w.mu.Lock()
	bs := w.extra
	w.mu.Unlock()
	if bs != nil {
		bs.wg.Wait()
	}
}

// ParallelOf starts each of fns as a branch of the parallel called name
// (spaces "@NAME/@BRANCH/..."), at most maxConcurrency running at once
// (0: all), and waits for them under the completion policy of a map:
// decided once minSuccessful have succeeded (0: once all have settled),
// or once more than tolerated have failed for good; it fails when more
// than tolerated failed, or fewer than minSuccessful succeeded. It returns the branches' futures, in
// the order of names, and the indexes of those that settled, in the order
// they settled (recorded as the step "parallel:"+name); the error of a
// policy not met is a *PermanentError naming the failures.
func ParallelOf(ctx context.Context, name string, names []string, fns []func(context.Context) ([]byte, error), maxConcurrency, minSuccessful, tolerated int) ([]*Future, []int, error) {
	if err := CheckAwaitName(name); err != nil {
		return nil, nil, &PermanentError{Err: fmt.Errorf("parallel: %w", err)}
	}
	if len(names) == 0 || len(names) != len(fns) || minSuccessful < 0 || minSuccessful > len(names) || tolerated < 0 || maxConcurrency < 0 {
		return nil, nil, &PermanentError{Err: fmt.Errorf("parallel %q: %d branches, MinSuccessful %d, ToleratedFailures %d, MaxConcurrency %d: invalid", name, len(names), minSuccessful, tolerated, maxConcurrency)}
	}
	var sem chan struct{}
	if maxConcurrency > 0 && maxConcurrency < len(fns) {
		sem = make(chan struct{}, maxConcurrency)
	}
	parent := spaceOf(ctx).child(name)
	fs := make([]*Future, len(fns))
	for i, fn := range fns {
		fs[i] = branchIn(ctx, parent.child(names[i]), names[i], fn, sem)
	}
	order, err := combine(ctx, CombineParallel, name, fs, policy{min: minSuccessful, tolerated: tolerated})
	if err != nil {
		return fs, nil, err
	}
	ok, failed := 0, []string(nil)
	for _, i := range order {
		if fs[i].succeeded() {
			ok++
		} else {
			failed = append(failed, names[i])
		}
	}
	if ok < minSuccessful || len(failed) > tolerated {
		return fs, order, &PermanentError{Err: fmt.Errorf("parallel %q: %d of %d branches succeeded (MinSuccessful %d), %d failed (tolerated %d): %v", name, ok, len(fs), minSuccessful, len(failed), tolerated, failed)}
	}
	return fs, order, nil
}
