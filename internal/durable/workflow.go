// Package durable is the handler side of leasehold's workflows: steps whose
// results are recorded once per task (StepOf), durable sleeps and polls,
// awaits of children (AllOf, MapOf) and of callbacks (CallbackOf), and the
// errors a handler returns to suspend its task. Package workflow wraps it
// for users.
//
// The executor (package lifecycle) runs the handler: it implements
// Attempt, keeps a Workflow per message, and puts it in the handler's
// context with a Scope. This package never imports the executor; the
// executor reads the errors defined here (AwaitChildrenError,
// AwaitCallbackError, SnoozeError, PermanentError, CancelError) to decide
// what a run's end asks of its task.
package durable

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"

	"github.com/jonboulle/clockwork"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/mapstate"
	"github.com/leasehold/leasehold/internal/token"
)

// Workflow is the handler context's view of its attempt's workflow state:
// what the durable calls of one run read and record. The executor keeps
// one in its per-message record (no allocation per task), sets it with
// Start before the handler runs, and puts it in the handler's context
// with a Scope.
type Workflow struct {
	results *WaitResults
	// note is the task's WaitNote: a map's progress (MapOf).
	note string
	// att and held record steps (Attempt.Checkpoint), and held names the
	// running attempt in its callback token; the handler's goroutine reads
	// through att only what does not change while it runs.
	att  Attempt
	held lease.Lease

	mu    sync.Mutex
	nonce string
	// steps are the history, the inline head then the spilled tail (read
	// by the executor before the run), as the run's last write left
	// them, then the unrecorded ones.
	steps []lease.Step
	// called holds the step names this run has called whose call has not
	// failed: running, recorded or replayed. A second call of one of them
	// is a programming error (ErrStepTwice).
	called map[string]bool
	// unrecorded counts the steps at the end of steps that this run
	// derived but has not written (AllOf's outcomes): Flush writes them.
	// (Beside the other 32-bit fields, so that the struct packs them.)
	unrecorded int32
	// sleeps counts this run's SleepOf calls: the n-th is the step
	// "sleep#n".
	sleeps int32
	// pos is the position in steps of the run's next durable call
	// (replay). awaited says the run's first new call was the await of
	// children the task resumed from (awaitedName), as it must be.
	// diverged is the run's divergence from the history, nil for none.
	// (Sized to keep the executor's record in its size class.)
	// spilled says the inline head is frozen: new operations are step
	// items of their own (record).
	pos      int32
	awaited  bool
	spilled  bool
	diverged *DivergedError
	// extra is what this run made of its branches' goroutines
	// (BranchFuture) and its receives (ReceiveFuture), nil for none: one
	// pointer, so that the struct keeps its size.
	extra *runExtra
	// asked names the first wait this run was asked to make (a durable
	// call returned an error that suspends the task), "" for none: a
	// handler that then returns success has dropped it (UnreturnedWait).
	asked string
}

// Attempt is the executor's side of the running attempt, as the durable
// calls need it. The executor implements it; this package never imports
// the executor.
type Attempt interface {
	// Trusted returns nil while the worker may still trust the attempt's
	// lease by its own clock, and otherwise the cause it cancels the
	// handler with (ctx is the handler's). No step's function starts on a
	// lease that has run out: another worker may hold the task and have
	// recorded the step.
	Trusted(ctx context.Context) error
	// Checkpoint records the step name's result under the lease l, in one
	// write bounded by the call timeout, and returns the task as written.
	Checkpoint(ctx context.Context, l lease.Lease, st lease.Step) (lease.Task, error)
	// Spill freezes the task's inline steps at n under l (lease.Store):
	// the history goes on in step items.
	Spill(ctx context.Context, l lease.Lease, n int) (lease.Task, error)
	// PutStep records st at position pos of the history of task id in an
	// item of its own, the first writer winning, and returns the operation
	// recorded there (lease.Store).
	PutStep(ctx context.Context, id string, pos int, st lease.Step) (lease.Step, error)
	// ReadTasks reads the tasks ids; one that does not exist has only its
	// ID.
	ReadTasks(ctx context.Context, ids []string) ([]lease.Task, error)
	// MapGroups reads a sliding map's groups (package mapstate), one read
	// each; lease.ErrNotFound, with the groups found, when one is missing.
	MapGroups(ctx context.Context, ids []string) ([]mapstate.Group, error)
	// Clock is the worker's clock.
	Clock() clockwork.Clock
	// Tracer is the worker's tracer; nil traces nothing.
	Tracer() trace.Tracer
}

// Stower is an Attempt that keeps values over their inline limits in the
// payload bucket (package claimcheck): a step's result that the task's
// item cannot keep (over lease.MaxStepsBytes with the others) is stored
// there, and the step records a reference in its place, which a replay
// reads back. An Attempt without it, or without a bucket, keeps the
// limits.
type Stower interface {
	// StowStep stores out, the result of the step at 0-based position n,
	// and returns the reference the step records; ok is false when no
	// bucket is configured.
	StowStep(ctx context.Context, n int, out []byte) (ref []byte, ok bool, err error)
	// FetchOf reads back the value that ref, a reference to a value of
	// task id (this task's step or answer, a child's result), stands for.
	FetchOf(ctx context.Context, id string, ref []byte) ([]byte, error)
}

// Replayer is an Attempt that replays a task's history and runs nothing
// beyond it (package replay's): no step's function, no write. Each durable
// call past the recorded operations returns Beyond's error instead of
// running.
type Replayer interface {
	Attempt
	// Beyond is asked for the durable call name (operation op) at the
	// 1-based position, which the history does not record. It returns
	// the error the call returns: a *DivergedError, which becomes the
	// run's divergence (the call is not the operation the task waits in),
	// or one that ends the replay (ErrHistoryEnd).
	Beyond(position int, name, op string) error
	// Awaits reports whether the task waits in an operation that its
	// history does not record yet (a callback's answer, the outcomes of
	// children): a live run records it, or derives it, where the history
	// ends, so VersionOf there takes the version before any change.
	Awaits() bool
}

// ErrHistoryEnd ends a replay (Replayer) where the task's history ends:
// what the code calls from there on would run in a live attempt, and a
// replay runs nothing new.
var ErrHistoryEnd = errors.New("the replay reached the end of the task's history")

// Unreplayed returns a divergence when the run has not called every
// operation its history records (pos short of the steps): a handler that
// returns success there has left out recorded operations, which the code
// that recorded them asked for (a step removed, or an early return added,
// under a task in flight). Nil when the run called them all.
func (w *Workflow) Unreplayed() *DivergedError {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.skipSpaced()
	if int(w.pos) >= len(w.steps) {
		return nil
	}
	rec := w.steps[w.pos]
	return &DivergedError{Position: int(w.pos) + 1, Recorded: DescribeOp(rec.Name, rec.Op), Asked: "none: the handler returned"}
}

// Start sets w for a run of the attempt att, which holds the lease held:
// the task's recorded steps, its wait's note, and the results of what it
// waited for (nil: it did not wait). It forgets the previous run's state.
func (w *Workflow) Start(att Attempt, held lease.Lease, steps []lease.Step, note string, results *WaitResults) {
	*w = Workflow{att: att, held: held, steps: steps, note: note, results: results}
}

// StartSpilled is Start for a task whose history has spilled
// (lease.Task.Spilled): steps are its inline head then its whole tail.
func (w *Workflow) StartSpilled(att Attempt, held lease.Lease, steps []lease.Step, note string, results *WaitResults) {
	w.Start(att, held, steps, note, results)
	w.spilled = true
}

// Spilled reports whether the run's history has spilled past the task's
// item: its next operations are step items of their own.
func (w *Workflow) Spilled() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.spilled
}

// record writes st as the operation at position pos of the history: into
// the inline head while the task has not spilled and st fits there
// (lease.FitsInline), otherwise, after freezing the head once, into a
// step item of its own. It returns the operation recorded at pos, st or
// an earlier writer's (the first writer of a tail position wins: see
// docs/workflows.md), and a *DivergedError when that is another
// operation. w.mu is held.
func (w *Workflow) record(ctx context.Context, pos int, st lease.Step) (lease.Step, error) {
	if !w.spilled {
		if lease.FitsInline(w.steps[:pos], st.Result) {
			if _, err := w.att.Checkpoint(ctx, w.held, st); err != nil {
				return lease.Step{}, err
			}
			return st, nil
		}
		if _, err := w.att.Spill(ctx, w.held, pos); err != nil {
			return lease.Step{}, err
		}
		w.spilled = true
	}
	got, err := w.att.PutStep(ctx, w.held.TaskID, pos, st)
	if err != nil {
		return lease.Step{}, err
	}
	if got.Name != st.Name || got.Op != "" && got.Op != st.Op {
		if w.diverged == nil {
			w.diverged = &DivergedError{Position: pos + 1, Recorded: DescribeOp(got.Name, got.Op), Asked: DescribeOp(st.Name, st.Op)}
		}
		return lease.Step{}, w.diverged
	}
	return got, nil
}

// awaitedName names the await of children the task resumed from (their
// outcomes read, not recorded yet), "" for none. Named awaits (AllOf,
// MapOf) give their children the ids PARENT/NAME/i; the unnamed ids of
// older versions name nothing.
func (w *Workflow) awaitedName() string {
	r := w.results
	if r == nil || r.Mode != lease.WaitChildren || len(r.Tasks) == 0 {
		return ""
	}
	return AwaitNameOf(w.held.TaskID, r.Tasks[0].ID)
}

// diverge keeps e as the run's divergence and returns it.
func (w *Workflow) diverge(e *DivergedError) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.diverged == nil {
		w.diverged = e
	}
	return w.diverged
}

// position is the run's position in its history.
func (w *Workflow) position() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return int(w.pos)
}

// Diverged returns the run's divergence from its task's history, nil for
// none: whatever the handler returned, the executor holds the task.
func (w *Workflow) Diverged() *DivergedError {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.diverged
}

// Steps returns the steps as the last checkpoint left them, and those
// this run derived from what it waited for and has not written.
func (w *Workflow) Steps() []lease.Step {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.steps
}

// Flush writes the steps this run derived from what it waited for and has
// not written yet (see AllOf), one checkpoint each. The executor calls it
// when a run ends in anything but the task's end: a later run must replay
// them, and the wait that could derive them again may be gone by then. A
// run that ends its task writes none of them: no run replays them.
func (w *Workflow) Flush(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.flush(ctx)
}

// flush is Flush's work; w.mu is held.
func (w *Workflow) flush(ctx context.Context) error {
	for w.unrecorded > 0 {
		pos := len(w.steps) - int(w.unrecorded)
		s := w.steps[pos]
		got, err := w.record(ctx, pos, s)
		if err != nil {
			return fmt.Errorf("step %q: could not record its result: %w", s.Name, err)
		}
		w.steps[pos] = got
		w.unrecorded--
	}
	return nil
}

// wait notes that the durable call what returned err: an error that
// suspends the task is a wait the handler must return. A call inside a
// branch or child context notes nothing: what it returns is the branch's,
// and the combinator or Get that waits for the branch notes the wait the
// run then makes (a branch whose wait is not needed, as in a race decided
// otherwise, asks nothing of the handler). It returns err.
func (w *Workflow) wait(ctx context.Context, err error, what string) error {
	if Suspends(err) && spaceOf(ctx) == nil {
		w.mu.Lock()
		if w.asked == "" {
			w.asked = what
		}
		w.mu.Unlock()
	}
	return err
}

// UnreturnedWait names the first wait a durable call of this run asked
// for ("" for none). The executor reads it when the handler returns
// success: a wait the handler did not return was skipped, and its task
// must not be recorded as succeeded past it.
func (w *Workflow) UnreturnedWait() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.asked
}

// Scope is a context carrying a Workflow for the durable calls, as
// context.WithValue would, but a value the executor keeps in its record
// rather than one allocated per task. Set both fields before use.
type Scope struct {
	context.Context
	Workflow *Workflow
}

// Value returns the Workflow for this package's key, and otherwise what
// the parent context holds.
func (c *Scope) Value(key any) any {
	if key == (workflowKey{}) {
		return c.Workflow
	}
	return c.Context.Value(key)
}

// startSpan starts a span named name under ctx's, with attrs; the caller
// checks that there is a Tracer.
func (w *Workflow) startSpan(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return w.att.Tracer().Start(ctx, name, trace.WithAttributes(attrs...))
}

// workflowKey is the context key of the Workflow (Scope).
type workflowKey struct{}

// WaitResultsOf returns the results of the tasks a resumed handler waited
// for, and false when the task has not waited.
func WaitResultsOf(ctx context.Context) (WaitResults, bool) {
	w, ok := ctx.Value(workflowKey{}).(*Workflow)
	if !ok || w.results == nil {
		return WaitResults{}, false
	}
	return *w.results, true
}

// ErrNoWorkflow: a workflow call outside a handler run by a worker.
var ErrNoWorkflow = errors.New("not called from a handler run by a leasehold worker")

// CallbackTokenOf returns the callback token of this attempt: bound to the
// task's fence and a secret drawn once per attempt. Hand it to the outside
// system, then return AwaitCallbackError.
func CallbackTokenOf(ctx context.Context) (string, error) {
	w, ok := ctx.Value(workflowKey{}).(*Workflow)
	if !ok {
		return "", ErrNoWorkflow
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.nonce == "" {
		w.nonce = rand.Text()
	}
	return token.Callback{ID: w.held.TaskID, Fence: w.held.Fence, Attempt: w.held.Attempt, Nonce: w.nonce}.String(), nil
}

// CallbackNonce returns the secret of the callback token this run handed
// out, and "" when it handed out none.
func (w *Workflow) CallbackNonce() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.nonce
}
