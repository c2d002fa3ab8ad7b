package workflow

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/durable"
)

// encoded wraps fn as the durable calls run it: its value as JSON.
func encoded[T any](what string, fn func(context.Context) (T, error)) func(context.Context) ([]byte, error) {
	return func(ctx context.Context) ([]byte, error) {
		v, err := fn(ctx)
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, leasehold.Fail(fmt.Errorf("%s: result does not encode as JSON: %w", what, err))
		}
		return b, nil
	}
}

// decoded decodes raw, a recorded value, into a T; what names it in the
// error of a value that does not decode, which fails the task.
func decoded[T any](raw []byte, what string) (T, error) {
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		var zero T
		return zero, leasehold.Fail(fmt.Errorf("%s does not decode into %T: %w", what, v, err))
	}
	return v, nil
}

// Go starts fn as the branch called name: in a goroutine of its own, with
// an operation space of its own (its steps, sleeps and callbacks are
// recorded as "@NAME/STEP", and replayed per branch), so branches that run
// at the same time never collide in the task's history. It returns the
// branch as a future; wait for it with Get or a combinator. The branch's
// outcome is recorded as its last operation ("@NAME/result"): a later run
// settles the future from it without running fn again. A branch that
// fails for good (leasehold.Fail) records its failure; any other error of
// fn (a step's failure) is recorded nowhere and returned by the Get or
// combinator that waits for the branch, so the attempt retries. A branch
// that must wait (a sleep, a callback) ends its goroutine there; the task
// waits only when the combinator waiting for it finds that no branch can
// go on, and then on what they wait for (see docs/workflows.md for the
// mixes it can wait on). Branches are joined before the handler's run
// ends. Inside a branch, All, Map and Receive are not supported yet.
func Go[T any](ctx context.Context, name string, fn func(context.Context) (T, error)) Future[T] {
	return Future[T]{durable.BranchFuture(ctx, name, encoded("branch "+name, fn))}
}

// Parallel runs branches, named by their keys, each as a branch of its
// own (as Go does, in the spaces "@NAME/@BRANCH/"), at most
// opts.MaxConcurrency at once (0: all at once), and waits for them under
// the completion policy of a Map: decided once opts.MinSuccessful have
// succeeded (0: once every branch has settled), or once more than
// opts.ToleratedFailures have failed for good (ToleratedFailurePercentage
// is not used); failed when more than opts.ToleratedFailures failed, or
// fewer than opts.MinSuccessful succeeded. The
// outcome, which branches settled in which order, is recorded as the
// step "parallel:"+name. It returns every branch's future, by name (read
// the values with Get; a branch that had not settled when the outcome
// was decided has not settled), and, when the policy is not met, an error
// that fails the task (as leasehold.Fail's) naming the failed branches.
func Parallel[T any](ctx context.Context, name string, opts MapOptions, branches map[string]func(context.Context) (T, error)) (map[string]Future[T], error) {
	names := make([]string, 0, len(branches))
	for n := range branches {
		names = append(names, n)
	}
	slices.Sort(names)
	fns := make([]func(context.Context) ([]byte, error), len(names))
	for i, n := range names {
		fns[i] = encoded("branch "+n, branches[n])
	}
	fs, _, err := durable.ParallelOf(ctx, name, names, fns, opts.MaxConcurrency, opts.MinSuccessful, opts.ToleratedFailures)
	out := make(map[string]Future[T], len(fs))
	for i, f := range fs {
		out[names[i]] = Future[T]{f}
	}
	return out, err
}

// RunInChildContext runs fn as the child context called name: a sub-flow
// whose durable calls are recorded in an operation space of their own
// ("@NAME/..."), checkpointed as one unit: once fn has returned, its
// result is recorded as the step "context:"+name, and every later run
// returns that result without calling fn, so without replaying the
// operations inside. Until then (fn waits, or the attempt fails) each run
// calls fn again, which replays what it recorded. An error of fn is
// returned as it is and records nothing. Inside a child context, All and
// Map are not supported yet.
func RunInChildContext[T any](ctx context.Context, name string, fn func(context.Context) (T, error)) (T, error) {
	var zero T
	raw, err := durable.ChildContextOf(ctx, name, encoded("child context "+name, fn))
	if err != nil || len(raw) == 0 {
		return zero, err
	}
	return decoded[T](raw, fmt.Sprintf("child context %q: its recorded result", name))
}
