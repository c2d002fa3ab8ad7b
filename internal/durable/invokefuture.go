package durable

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/leasehold/leasehold/internal/lease"
)

// ChildEndedError is the failure of a child future (InvokeFuture) whose
// child did not succeed: it FAILED, was CANCELLED, or its record EXPIRED.
type ChildEndedError struct {
	// Name is the await's name; ID the child's task id.
	Name, ID string
	Status   lease.Status
	Reason   string
}

func (e *ChildEndedError) Error() string {
	return fmt.Sprintf("invoke %q: child %s ended %s: %s", e.Name, e.ID, e.Status, e.Reason)
}

// InvokeFuture returns the child c, called name, as a future: the await
// of one child that AllOf(name, c) is, started when the run first waits
// for it (its Get, or a combinator that needs it), so a child that a
// combinator's outcome does not need is never spawned. While the parent
// waits for it, the parent's cancel reaches it, as AllOf's. Its outcome is
// recorded as AllOf records it (the step "children:"+name, one outcome),
// where the run settles it; it fails with a *ChildEndedError when the
// child did not succeed.
func InvokeFuture(ctx context.Context, name string, c Child) *Future {
	f := &Future{kind: futureChild, name: name, child: &c}
	w, ok := ctx.Value(workflowKey{}).(*Workflow)
	if !ok {
		f.done, f.err = true, ErrNoWorkflow
		return f
	}
	if err := CheckAwaitName(name); err != nil {
		f.done, f.err = true, &PermanentError{Err: err}
		return f
	}
	f.topic = childIDOf(w.held.TaskID, spaceOf(ctx), name)
	return f
}

// childIDOf is the task id of the child called name that the space sp
// (nil: the root) invokes: ChildIDIn's, as AllOf's, for the root; for a
// space, its path with '~' for '/' before the name, a character no await
// or space name holds, so the same name in two spaces names two children
// ("PARENT/@a~@b~NAME/0").
func childIDOf(parent string, sp *space, name string) string {
	if sp == nil {
		return ChildIDIn(parent, name, 0)
	}
	return ChildIDIn(parent, strings.ReplaceAll(sp.path, "/", "~")+name, 0)
}

// FailedFuture is a future that has failed with err already: a call
// whose arguments were refused before it started.
func FailedFuture(err error) *Future { return &Future{kind: futureStep, done: true, err: err} }

// childID is the task id of the child f (childIDOf's, kept in its topic).
func (w *Workflow) childID(f *Future) string { return f.topic }

// getChild is Get of a child future not settled: its outcome, or the wait
// that spawns the child and suspends the task until it ends.
func (w *Workflow) getChild(ctx context.Context, f *Future) ([]byte, error) {
	done, err := w.trySettleChild(ctx, f)
	if err != nil {
		return nil, err
	}
	if !done {
		return nil, w.wait(ctx, childrenWait([]*Future{f}, []string{w.childID(f)}), fmt.Sprintf("workflow.InvokeAsync %q", f.name))
	}
	return f.value()
}

// childrenWait is the wait that spawns the children fs, with the ids ids,
// and suspends the task until every one has ended.
func childrenWait(fs []*Future, ids []string) error {
	kids := make([]Child, len(fs))
	for i, f := range fs {
		kids[i] = *f.child
	}
	return &AwaitChildrenError{Children: kids, IDs: ids}
}

// trySettleChild settles the child future f if it can: its recorded
// outcome replayed, or its outcome read from what the task waited for
// (recorded as AllOf records it, derived: written with the run's next
// write). done is false when the child has not ended, or the task did not
// wait for it.
func (w *Workflow) trySettleChild(ctx context.Context, f *Future) (done bool, err error) {
	id := w.childID(f)
	out, err := stepOf(ctx, "children:"+f.name, "all 1", func(context.Context) ([]byte, error) {
		r := w.results
		if r == nil || r.Mode != lease.WaitChildren {
			return nil, errNotYet
		}
		for _, t := range r.Tasks {
			if t.ID == id {
				return json.Marshal([]outcome{outcomeOf(t)})
			}
		}
		return nil, errNotYet
	}, true)
	if err == errNotYet {
		return false, nil
	}
	if err == nil {
		out, err = w.resolveOutcomes(ctx, out)
	}
	if err != nil {
		return false, err
	}
	var outs []outcome
	if err := json.Unmarshal(out, &outs); err != nil || len(outs) != 1 {
		return false, &PermanentError{Err: fmt.Errorf("invoke %q: recorded outcomes %q are not one child's (%v)", f.name, out, err)}
	}
	o := outs[0]
	f.done, f.recorded = true, true
	if o.Status != lease.StatusSucceeded {
		f.err = &ChildEndedError{Name: f.name, ID: o.ID, Status: o.Status, Reason: o.Error}
		return true, nil
	}
	f.out = o.Result
	return true, nil
}
