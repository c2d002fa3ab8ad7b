package durable

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/leasehold/leasehold/internal/lease"
)

// A space is an operation namespace of a run: a child context
// (ChildContextOf) or a branch (BranchFuture). Its operations are
// recorded with their names prefixed by its path ("@NAME/", nested
// "@outer/@inner/"), and a replay matches them per space: the n-th call of
// a space replays the n-th operation recorded under its path, wherever it
// stands in the task's history, so branches that ran at the same time,
// and so interleaved their writes, never collide and replay alike. The
// handler's own operations (the root, with no space) skip what spaces
// recorded. A history without spaces replays as it always did.
type space struct {
	path string
	// cursor is where the next operation of the space is looked for in
	// w.steps; sleeps counts the space's timers (its "sleep#n"). Both are
	// read and written under w.mu.
	cursor int
	sleeps int32
	// branch says the space runs beside others (a branch, or a child
	// context inside one), not in the handler's goroutine's turn.
	branch bool
}

// spaceKey is the context key of the space of a child context or branch.
type spaceKey struct{}

// spaceOf is the space ctx runs in, nil for the root.
func spaceOf(ctx context.Context) *space {
	sp, _ := ctx.Value(spaceKey{}).(*space)
	return sp
}

// qualify is name as the space sp records it.
func (sp *space) qualify(name string) string {
	if sp == nil {
		return name
	}
	return sp.path + name
}

// child is the space called name inside sp (nil: the root).
func (sp *space) child(name string) *space {
	return &space{path: sp.qualify("@" + name + "/"), branch: sp != nil && sp.branch}
}

// before is w.steps up to the next recorded operation of sp (nil: the
// root), or all of them at the end of its history: what was recorded
// before sp's next call. w.mu is held.
func (w *Workflow) before(sp *space) []lease.Step {
	if at := w.next(sp); at >= 0 {
		return w.steps[:at]
	}
	return w.steps
}

// spacePath is the path of the space that recorded the operation name,
// "" for the root.
func spacePath(name string) string {
	n := 0
	for strings.HasPrefix(name[n:], "@") {
		i := strings.IndexByte(name[n:], '/')
		if i < 0 {
			break
		}
		n += i + 1
	}
	return name[:n]
}

// spaced reports whether the recorded operation name is a space's.
func spaced(name string) bool {
	return strings.HasPrefix(name, "@") && strings.IndexByte(name, '/') > 0
}

// skipSpaced moves the root's position past the operations spaces
// recorded; w.mu is held.
func (w *Workflow) skipSpaced() {
	for int(w.pos) < len(w.steps) && spaced(w.steps[w.pos].Name) {
		w.pos++
	}
}

// next is the index in w.steps of the next recorded operation of sp (the
// root for nil), -1 at the end of its history; w.mu is held.
func (w *Workflow) next(sp *space) int {
	if sp == nil {
		w.skipSpaced()
		if int(w.pos) < len(w.steps) {
			return int(w.pos)
		}
		return -1
	}
	for i := sp.cursor; i < len(w.steps); i++ {
		if spacePath(w.steps[i].Name) == sp.path {
			return i
		}
	}
	return -1
}

// passed moves the position of sp (nil: the root) past the operation at
// index at of w.steps; w.mu is held.
func (w *Workflow) passed(sp *space, at int) {
	if sp == nil {
		w.pos = int32(at + 1)
		return
	}
	sp.cursor = at + 1
}

// replayIn is replay for an operation of sp (qualified name).
func (w *Workflow) replayIn(sp *space, name, op string) ([]byte, bool, error) {
	if sp == nil {
		w.skipSpaced()
		return w.replay(name, op)
	}
	if w.diverged != nil {
		return nil, false, w.diverged
	}
	i := w.next(sp)
	if i < 0 {
		return nil, false, nil
	}
	rec := w.steps[i]
	if rec.Name != name || rec.Op != "" && rec.Op != op {
		w.diverged = &DivergedError{Position: i + 1, Recorded: DescribeOp(rec.Name, rec.Op), Asked: DescribeOp(name, op)}
		return nil, false, w.diverged
	}
	sp.cursor = i + 1
	w.markCalled(name)
	return rec.Result, true, nil
}

// nextSleep names the next timer of ctx's space ("sleep#n").
func (w *Workflow) nextSleep(ctx context.Context) string {
	sp := spaceOf(ctx)
	w.mu.Lock()
	defer w.mu.Unlock()
	if sp != nil {
		sp.sleeps++
		return "sleep#" + strconv.Itoa(int(sp.sleeps))
	}
	w.sleeps++
	return "sleep#" + strconv.Itoa(int(w.sleeps))
}

// errInSpace is the error of a durable call a child context or branch
// cannot make, saying why and what to do instead.
func errInSpace(ctx context.Context, call, why string) error {
	if sp := spaceOf(ctx); sp != nil {
		return &PermanentError{Err: fmt.Errorf("%s inside the child context or branch %q: refused: %s", call, strings.TrimSuffix(sp.path, "/"), why)}
	}
	return nil
}

// errInBranch is the error of a durable call a branch cannot make (one a
// child context can), saying why and what to do instead.
func errInBranch(ctx context.Context, call, why string) error {
	if sp := spaceOf(ctx); sp != nil && sp.branch {
		return &PermanentError{Err: fmt.Errorf("%s inside the branch %q: refused: %s", call, strings.TrimSuffix(sp.path, "/"), why)}
	}
	return nil
}

// OpContext is the operation of a child context's result (ChildContextOf).
const OpContext = "context"

// ChildContextOf runs fn as the child context called name: a sub-flow
// whose operations are recorded in a space of their own ("@NAME/..."),
// checkpointed as one unit: its result is the step "context:"+name, and a
// run that finds it recorded returns it without running fn, so without
// replaying the operations inside. Until then (fn waits, or the attempt
// ends) every run calls fn, which replays the operations it recorded. An
// error of fn is returned as it is and records nothing.
func ChildContextOf(ctx context.Context, name string, fn func(context.Context) ([]byte, error)) ([]byte, error) {
	w, ok := ctx.Value(workflowKey{}).(*Workflow)
	if !ok {
		return nil, ErrNoWorkflow
	}
	if err := CheckAwaitName(name); err != nil {
		return nil, &PermanentError{Err: fmt.Errorf("child context: %w", err)}
	}
	parent := spaceOf(ctx)
	step := "context:" + name
	w.mu.Lock()
	i := w.next(parent)
	twice := w.called[parent.qualify(step)]
	w.mu.Unlock()
	if twice {
		return nil, &PermanentError{Err: fmt.Errorf("child context %q: %w", name, ErrStepTwice)}
	}
	if i >= 0 {
		// Recorded: its result, or another operation (a divergence that
		// stepOf reports), with fn not run.
		return stepOf(ctx, step, OpContext, func(context.Context) ([]byte, error) {
			return nil, errors.New("unreachable: a recorded position runs nothing")
		}, false)
	}
	out, err := fn(context.WithValue(ctx, spaceKey{}, parent.child(name)))
	if err != nil {
		return nil, w.wait(ctx, err, fmt.Sprintf("workflow.RunInChildContext %q", name))
	}
	return stepOf(ctx, step, OpContext, func(context.Context) ([]byte, error) { return out, nil }, false)
}
