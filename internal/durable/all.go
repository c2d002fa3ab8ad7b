package durable

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold/internal/claimcheck"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/token"
)

// outcome is how a child ended, as AllOf records it (the JSON of
// workflow.Outcome).
type outcome struct {
	ID     string          `json:"id"`
	Status lease.Status    `json:"status"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// AllOf spawns children as the await called name and returns, once every
// one of them has ended, their outcomes: a JSON array of {id, status,
// result, error} in spawn order. Until then it returns an
// *AwaitChildrenError the handler must return: the task waits, holding no
// lease, and runs again (as the same attempt) when the last child ends.
// The outcomes are then the step "children:"+name, so a handler may await
// children any number of times, under different names. That step is
// derived, not written at once: while the wait stands, every run reads the
// children again (one BatchGetItem per 100), and the step is written (one
// checkpoint) only when a later durable call of the run, or a run's end
// other than the task's end, may outlive the wait; a handler that returns
// after its last await writes nothing more than its finish. Child i gets
// the id ChildIDIn(parent, name, i); in a child context or branch, name
// is prefixed with the space's path as an invoke's is (childIDOf), so the
// same name in two spaces makes two sets of children.
func AllOf(ctx context.Context, name string, children []Child, timeout time.Duration) ([]byte, error) {
	w, ok := ctx.Value(workflowKey{}).(*Workflow)
	if !ok {
		return nil, ErrNoWorkflow
	}
	if err := CheckAwaitName(name); err != nil {
		return nil, &PermanentError{Err: err}
	}
	idName := name
	if sp := spaceOf(ctx); sp != nil {
		idName = strings.ReplaceAll(sp.path, "/", "~") + name
	}
	ids := make([]string, len(children))
	for i := range children {
		ids[i] = ChildIDIn(w.held.TaskID, idName, i)
	}
	out, err := stepOf(ctx, "children:"+name, "all "+strconv.Itoa(len(children)), func(context.Context) ([]byte, error) {
		r := w.results
		if r != nil && r.Mode == lease.WaitChildren && len(r.Tasks) > 0 && len(r.Tasks) != len(ids) && strings.HasPrefix(r.Tasks[0].ID, childPrefix(w.held.TaskID, idName)) {
			return nil, w.diverge(&DivergedError{Position: w.position() + 1, Recorded: DescribeOp("children:"+name, "all "+strconv.Itoa(len(r.Tasks))) + ", whose children the task waited for", Asked: DescribeOp("children:"+name, "all "+strconv.Itoa(len(ids)))})
		}
		if r == nil || r.Mode != lease.WaitChildren || len(r.Tasks) != len(ids) {
			return nil, &AwaitChildrenError{Children: children, Timeout: timeout, IDs: ids}
		}
		out := make([]outcome, len(ids))
		for i, t := range r.Tasks {
			if t.ID != ids[i] {
				return nil, &AwaitChildrenError{Children: children, Timeout: timeout, IDs: ids}
			}
			out[i] = outcomeOf(t)
		}
		b, err := json.Marshal(out)
		if err != nil {
			return nil, &PermanentError{Err: fmt.Errorf("children %q: outcomes do not encode: %w", name, err)}
		}
		return b, nil
	}, true)
	if err == nil {
		out, err = w.resolveOutcomes(ctx, out)
	}
	return out, w.wait(ctx, err, fmt.Sprintf("workflow.All %q", name))
}

// CallbackFailedError is the answer of a callback that was failed
// (FailCallback) to a resumable wait (CallbackOf).
type CallbackFailedError struct {
	Name, Reason string
}

func (e *CallbackFailedError) Error() string {
	return fmt.Sprintf("callback %q failed: %s", e.Name, e.Reason)
}

// CallbackOf waits for the callback called name, durably: the first run
// that reaches it draws this attempt's callback token, passes it to
// submit (which hands it to the outside system), and returns an
// *AwaitCallbackError the handler must return. The task then waits,
// holding no lease, until the callback's answer, which is recorded as the
// step "callback:"+name; the handler runs again, as the same attempt, and
// CallbackOf returns the answer's result, or a *CallbackFailedError for a
// failed callback. A wait with no answer within timeout fails the attempt,
// which is retried as after any failure (and submits a new token). An
// error of submit is returned as it is.
func CallbackOf(ctx context.Context, name string, timeout time.Duration, submit func(ctx context.Context, token string) error) ([]byte, error) {
	return CallbackBeatingOf(ctx, name, timeout, 0, submit)
}

// CallbackBeatingOf is CallbackOf for a wait with a heartbeat timeout
// (zero: none, as CallbackOf): the wait also ends, its attempt failed,
// when no heartbeat came within heartbeat since the suspension or the
// last beat.
func CallbackBeatingOf(ctx context.Context, name string, timeout, heartbeat time.Duration, submit func(ctx context.Context, token string) error) ([]byte, error) {
	w, ok := ctx.Value(workflowKey{}).(*Workflow)
	if !ok {
		return nil, ErrNoWorkflow
	}
	if err := CheckAwaitName(name); err != nil {
		return nil, &PermanentError{Err: err}
	}
	return w.callback(ctx, name, timeout, heartbeat, submit, false, 0)
}

// callback is CallbackOf's work. submitted says this run handed the
// callback's token to submit already (CallbackFuture, at its creation).
// timer, when not zero, is the deadline of a timer raced against the
// callback (Combine): the wait ends there with the answer TimerFired
// instead of failing the attempt, and its timeout is the time left to it.
// heartbeat is the wait's heartbeat timeout (CallbackBeatingOf), zero for
// none.
func (w *Workflow) callback(ctx context.Context, name string, timeout, heartbeat time.Duration, submit func(ctx context.Context, token string) error, submitted bool, timer time.Duration) ([]byte, error) {
	step := "callback:" + name
	qualified := spaceOf(ctx).qualify(step) // what the wait's answer is recorded as
	raw, err := stepOf(ctx, step, "callback", func(ctx context.Context) ([]byte, error) {
		if !submitted {
			if err := w.submitCallback(ctx, name, submit); err != nil {
				return nil, err
			}
		}
		if timer > 0 {
			return nil, &AwaitCallbackError{Timeout: timer, Step: qualified, Timer: true}
		}
		return nil, &AwaitCallbackError{Timeout: timeout, Heartbeat: heartbeat, Step: qualified}
	}, false)
	if err != nil {
		return nil, w.wait(ctx, err, fmt.Sprintf("workflow.WaitForCallback %q", name))
	}
	var answer struct {
		Result json.RawMessage `json:"result"`
		Error  *string         `json:"error"`
	}
	if err := json.Unmarshal(raw, &answer); err != nil {
		return nil, &PermanentError{Err: fmt.Errorf("step %q: recorded answer %q is not a callback's: %w", step, raw, err)}
	}
	if answer.Error != nil {
		if *answer.Error == TimerFired {
			return nil, &CallbackFailedError{Name: name, Reason: TimerFired}
		}
		return nil, &CallbackFailedError{Name: name, Reason: *answer.Error}
	}
	if claimcheck.IsRef(answer.Result) {
		// An answer over its inline limit, in the payload bucket.
		return w.fetchStep(ctx, step, answer.Result)
	}
	return answer.Result, nil
}

// submitCallback draws this run's callback token for the callback name
// and hands it to submit.
func (w *Workflow) submitCallback(ctx context.Context, name string, submit func(ctx context.Context, token string) error) error {
	w.mu.Lock()
	if w.nonce != "" {
		w.mu.Unlock()
		return &PermanentError{Err: fmt.Errorf("callback %q: this run handed out a callback token already; a run waits for one callback", name)}
	}
	w.nonce = lease.ResumableNonce(rand.Text(), spaceOf(ctx).qualify("callback:"+name))
	tok := token.Callback{ID: w.held.TaskID, Fence: w.held.Fence, Attempt: w.held.Attempt, Nonce: w.nonce}.String()
	w.mu.Unlock()
	return submit(ctx, tok)
}

// outcomeOf is how t ended, as the awaits record it; a task with no
// record (expired) is EXPIRED.
func outcomeOf(t lease.Task) outcome {
	if t.Status == "" {
		return outcome{ID: t.ID, Status: "EXPIRED", Error: "the task's record expired before it was read"}
	}
	return outcome{ID: t.ID, Status: t.Status, Result: t.Result, Error: t.Error}
}
