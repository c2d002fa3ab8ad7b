package durable

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"

	"github.com/leasehold/leasehold/internal/claimcheck"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/tracing"
)

// StepOf runs fn as the step named name of the handler's task, once per
// task: the first attempt to finish it records its result under the
// attempt's lease (one write), and the call of that step in every later
// run (a retry, or a resume after a wait) returns the recorded result
// without running fn.
// An error of fn is returned as it is, and nothing is recorded; the step
// may then be called again in the same run.
//
// A name is checked before fn runs: an invalid name, an operation beyond
// lease.MaxOperations, or a name this run has already called (and whose call
// did not fail) fails the task (PermanentError) without running fn. A
// repeated name would otherwise return the first step's result for a
// different step.
func StepOf(ctx context.Context, name string, fn func(context.Context) ([]byte, error)) ([]byte, error) {
	return stepOf(ctx, name, OpStep, fn, false)
}

// StepAs is StepOf for the operation op: the identity a replay compares
// with the step recorded at the same position (workflow.Step passes
// "step" and its result's type, so a changed type is a divergence, not a
// result that fails to decode).
func StepAs(ctx context.Context, name, op string, fn func(context.Context) ([]byte, error)) ([]byte, error) {
	return stepOf(ctx, name, op, fn, false)
}

// The operations a step records (lease.Step.Op), beside the typed steps
// of workflow.Step ("step T") and the shaped ones of AllOf ("all N") and
// MapOf ("map N/C").
const (
	OpStep           = "step"
	OpSleep          = "sleep"
	OpCondition      = "condition"
	OpConditionStart = "condition start"
	OpVersion        = "version"
)

// stepOf is StepOf; a derived step's result is read from what the task
// waited for, which every later run reads again while the wait stands, so
// it is kept unrecorded (in w.steps, counted by w.unrecorded) until a
// later call or the run's end needs it written (Flush).
func stepOf(ctx context.Context, name, op string, fn func(context.Context) ([]byte, error), derived bool) ([]byte, error) {
	w, ok := ctx.Value(workflowKey{}).(*Workflow)
	if !ok {
		return nil, ErrNoWorkflow
	}
	if spaced(name) {
		return nil, &PermanentError{Err: fmt.Errorf("step %q: a name that starts with '@' and holds a '/' is a branch's or child context's (workflow.Go, RunInChildContext): rename the step", name)}
	}
	sp := spaceOf(ctx)
	name = sp.qualify(name)
	if w.att.Tracer() != nil {
		ctx, span := w.startSpan(ctx, "leasehold.step", attribute.String(tracing.AttrStep, name))
		out, err := w.step(ctx, sp, name, op, fn, derived)
		EndRunSpan(span, err)
		return out, err
	}
	return w.step(ctx, sp, name, op, fn, derived)
}

// step is stepOf's work, for the operation name (qualified) of the space
// sp (nil: the root).
func (w *Workflow) step(ctx context.Context, sp *space, name, op string, fn func(context.Context) ([]byte, error), derived bool) ([]byte, error) {
	w.mu.Lock()
	if w.called[name] {
		w.mu.Unlock()
		return nil, &PermanentError{Err: fmt.Errorf("step %q: %w", name, ErrStepTwice)}
	}
	if r, done, err := w.replayIn(sp, name, op); err != nil || done {
		w.mu.Unlock()
		if err == nil && claimcheck.IsRef(r) {
			return w.fetchStep(ctx, name, r)
		}
		return r, err
	}
	if rp, ok := w.att.(Replayer); ok {
		// A replay runs nothing beyond the history.
		at := int(w.pos) + 1
		if sp != nil {
			at = len(w.steps) + 1
		}
		err := rp.Beyond(at, name, op)
		if d := (*DivergedError)(nil); errors.As(err, &d) && w.diverged == nil {
			w.diverged = d
		}
		w.mu.Unlock()
		return nil, err
	}
	if err := lease.CheckOperation(len(w.steps), name, nil); err != nil {
		w.mu.Unlock()
		return nil, &PermanentError{Err: fmt.Errorf("step %q: %w", name, err)}
	}
	if err := w.att.Trusted(ctx); err != nil {
		// Another worker may hold the task and have recorded this step:
		// its function must not start here.
		w.mu.Unlock()
		return nil, fmt.Errorf("step %q not started: %w", name, err)
	}
	// What this run derived is written before anything new runs: the new
	// step's function may end the wait it was derived from.
	if err := w.flush(ctx); err != nil {
		w.mu.Unlock()
		return nil, err
	}
	w.markCalled(name)
	w.mu.Unlock()
	out, err := fn(ctx)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		delete(w.called, name) // a failed step may be tried again
		return nil, err
	}
	rec := out // what the step records: out, or a reference to it
	if err := lease.CheckOperation(len(w.steps), name, out); err != nil {
		if rec, err = w.stowStep(ctx, name, out, err, derived); err != nil {
			return nil, err
		}
	}
	if derived {
		w.steps = append(w.steps[:len(w.steps):len(w.steps)], lease.Step{Name: name, Op: op, Result: out})
		w.unrecorded++
		if sp != nil {
			sp.cursor = len(w.steps)
		} else {
			w.pos = int32(len(w.steps))
		}
		return out, nil
	}
	pos := len(w.steps)
	got, err := w.record(ctx, pos, lease.Step{Name: name, Op: op, Result: rec})
	if err != nil {
		var d *DivergedError
		if errors.As(err, &d) {
			return nil, err
		}
		return nil, fmt.Errorf("step %q: could not record its result: %w", name, err)
	}
	// Appended in place: a slice handed out before (Steps, the
	// executor's task) keeps its length, and the history grows in
	// amortized constant time however long it gets.
	w.steps = append(w.steps, got)
	if sp != nil {
		sp.cursor = len(w.steps)
	} else {
		w.pos = int32(len(w.steps))
	}
	switch {
	case bytes.Equal(got.Result, rec):
		return out, nil
	case claimcheck.IsRef(got.Result):
		// Another writer recorded this position first (a spilled tail's
		// first-writer-wins), its result in the payload bucket.
		return w.fetchStep(ctx, name, got.Result)
	}
	return got.Result, nil
}

// stowStep is the reference a step records in place of out, whose check
// failed with checkErr: out kept in the payload bucket when checkErr is
// only its size (the task's item cannot keep it) and the attempt has a
// bucket (Stower). Otherwise the step fails the task with checkErr, as it
// always did. A failed write to the bucket is an attempt's failure, so the
// step runs again. w.mu is held.
func (w *Workflow) stowStep(ctx context.Context, name string, out []byte, checkErr error, derived bool) ([]byte, error) {
	var tl *lease.TooLargeError
	s, ok := w.att.(Stower)
	if derived || !ok || !errors.As(checkErr, &tl) || !utf8.Valid(out) {
		return nil, &PermanentError{Err: fmt.Errorf("step %q: %w", name, checkErr)}
	}
	ref, enabled, err := s.StowStep(ctx, len(w.steps), out)
	var over *claimcheck.TooLargeError
	switch {
	case !enabled:
		return nil, &PermanentError{Err: fmt.Errorf("step %q: %w", name, checkErr)}
	case errors.As(err, &over):
		return nil, &PermanentError{Err: fmt.Errorf("step %q: %w", name, &lease.TooLargeError{What: "result", Size: over.Size, Limit: claimcheck.MaxValueBytes})}
	case err != nil:
		return nil, fmt.Errorf("step %q: could not store its result in the payload bucket: %w", name, err)
	}
	if err := lease.CheckOperation(len(w.steps), name, ref); err != nil {
		return nil, &PermanentError{Err: fmt.Errorf("step %q: %w", name, err)}
	}
	return ref, nil
}

// fetchStep is the value of the recorded step name whose result is the
// reference ref, read back from the payload bucket.
func (w *Workflow) fetchStep(ctx context.Context, name string, ref []byte) ([]byte, error) {
	v, err := w.fetchOf(ctx, w.held.TaskID, ref)
	if err != nil {
		return nil, fmt.Errorf("step %q: read its result back: %w", name, err)
	}
	return v, nil
}

// fetchOf is the value of task id that ref stands for.
func (w *Workflow) fetchOf(ctx context.Context, id string, ref []byte) ([]byte, error) {
	s, ok := w.att.(Stower)
	if !ok {
		return nil, claimcheck.ErrNoStore
	}
	return s.FetchOf(ctx, id, ref)
}

// blobMark is in the JSON of outcomes whose result is a reference (the
// reference's escaped NUL and tag): outcomes without it are returned with
// no decoding.
var blobMark = []byte(`\u0000leasehold-blob:`)

// resolveOutcomes is out, the JSON of outcomes, with every result kept in
// the payload bucket read back under its task's id: the recorded step
// keeps the references, the handler sees the values.
func (w *Workflow) resolveOutcomes(ctx context.Context, out []byte) ([]byte, error) {
	if !bytes.Contains(out, blobMark) {
		return out, nil
	}
	var outs []outcome
	if err := json.Unmarshal(out, &outs); err != nil {
		return out, nil // not outcomes: as it is
	}
	for i, o := range outs {
		if !claimcheck.IsRef(o.Result) {
			continue
		}
		v, err := w.fetchOf(ctx, o.ID, o.Result)
		if err != nil {
			return nil, fmt.Errorf("result of %s: %w", o.ID, err)
		}
		outs[i].Result = v
	}
	return json.Marshal(outs)
}

// replay matches the durable call of name and op, this run's next, with
// the history: the step recorded at the run's position must be the same
// operation (name, and op when it was recorded with one), and its result
// is returned (done). At the end of the history (not done), the call is
// new, and must be the await the task resumes from, if any. Any other
// call has diverged from the history: the run goes no further (the
// *DivergedError is returned, and kept for the executor). w.mu is held.
func (w *Workflow) replay(name, op string) ([]byte, bool, error) {
	if w.diverged != nil {
		return nil, false, w.diverged
	}
	if int(w.pos) < len(w.steps) {
		rec := w.steps[w.pos]
		if rec.Name != name || rec.Op != "" && rec.Op != op {
			w.diverged = &DivergedError{Position: int(w.pos) + 1, Recorded: DescribeOp(rec.Name, rec.Op), Asked: DescribeOp(name, op)}
			return nil, false, w.diverged
		}
		w.pos++
		w.markCalled(name)
		return rec.Result, true, nil
	}
	if !w.awaited {
		if awaited := w.awaitedName(); awaited != "" {
			if name != "children:"+awaited && name != "map:"+awaited {
				w.diverged = &DivergedError{Position: int(w.pos) + 1, Recorded: fmt.Sprintf("the await %q of children, which the task waited for", awaited), Asked: DescribeOp(name, op)}
				return nil, false, w.diverged
			}
		}
		w.awaited = true
	}
	return nil, false, nil
}

// DescribeOp names a step's operation (lease.Step's Name and Op) as a
// divergence's message does.
func DescribeOp(name, op string) string {
	switch {
	case op == "":
		return fmt.Sprintf("%q", name)
	case strings.HasPrefix(op, OpStep):
		return fmt.Sprintf("%s %q", op, name)
	}
	return fmt.Sprintf("%q (%s)", name, op)
}

// DivergedError: a durable call of a run that does not match the history
// its task recorded (a step renamed, inserted or removed, a result type
// changed, an await's shape changed, in code deployed while the task was
// in flight). The run goes no further: the executor holds the task,
// re-checking it with backoff, until code that matches its history (the
// old code back, or a change guarded with workflow.Version) replays it.
type DivergedError struct {
	Position        int // 1-based, in the task's recorded operations
	Recorded, Asked string
}

func (e *DivergedError) Error() string {
	return fmt.Sprintf("diverged from its history at operation %d: recorded %s, the code asked for %s", e.Position, e.Recorded, e.Asked)
}

// MaxSleep bounds one SleepOf.
const MaxSleep = 366 * 24 * time.Hour

// SleepOf suspends the handler's task for d, durably, holding no lease: it
// returns a *SnoozeError the handler must return until d has passed since
// the first run of the task that reached this call, and nil from then on.
// The wake-up time is the result of a step, the n-th SleepOf call of a run
// being the step "sleep#n"; so a handler sleeps at the same calls, in the
// same order, in every run (as its steps are named the same), and a run
// that resumes after the wake-up replays the steps before the sleep and
// passes it. Until then the task is PENDING with its run time at the
// wake-up: the snooze hands the attempt back, and a wake-up beyond SQS's
// 15 minutes is dispatched by the sweep, with no token in between.
func SleepOf(ctx context.Context, d time.Duration) error {
	w, ok := ctx.Value(workflowKey{}).(*Workflow)
	if !ok {
		return ErrNoWorkflow
	}
	if d < 0 || d > MaxSleep {
		return &PermanentError{Err: fmt.Errorf("sleep of %s: %w: want 0 to %s", d, lease.ErrInvalid, MaxSleep)}
	}
	if w.att.Tracer() != nil {
		ctx, span := w.startSpan(ctx, "leasehold.await", attribute.String(tracing.AttrAwait, "sleep"))
		err := w.sleep(ctx, d)
		EndRunSpan(span, err)
		return err
	}
	return w.sleep(ctx, d)
}

// sleepWhat names the n-th sleep of a run, for UnreturnedWait.
func sleepWhat(name string) string { return fmt.Sprintf("workflow.Sleep (step %q)", name) }

// sleep is SleepOf's work.
func (w *Workflow) sleep(ctx context.Context, d time.Duration) error {
	name := w.nextSleep(ctx)
	clock := w.att.Clock()
	raw, err := stepOf(ctx, name, OpSleep, func(context.Context) ([]byte, error) {
		return strconv.AppendInt(nil, clock.Now().Add(d).UnixMilli(), 10), nil
	}, false)
	if err != nil {
		return err
	}
	ms, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return &PermanentError{Err: fmt.Errorf("step %q: recorded wake-up %q is not a time: %w", name, raw, err)}
	}
	if wake := time.UnixMilli(ms); wake.After(clock.Now()) {
		return w.wait(ctx, &pauseError{msg: name + " until " + wake.UTC().Format(time.RFC3339), snooze: SnoozeError{Delay: wake.Sub(clock.Now())}}, sleepWhat(name))
	}
	return nil
}

// Poll bounds a PollOf: the wait before the next check is the time since
// the first check, at least Min and at most Max (so it roughly doubles),
// and the condition fails the task once Timeout has passed since the
// first check.
type Poll struct{ Min, Max, Timeout time.Duration }

// Poll defaults.
const (
	DefaultPollMin     = time.Second
	DefaultPollMax     = 10 * time.Minute
	DefaultPollTimeout = 7 * 24 * time.Hour
)

// errNotYet is the step error of a check whose condition does not hold:
// it records nothing.
var errNotYet = errors.New("condition not met yet")

// PollOf waits, durably and holding no lease between checks, until check
// reports its condition met, and returns the result check gave then. The
// result is the step called name, and the time of the first check the
// step name+"#start": a run after the condition held replays both without
// checking again. While the condition does not hold, PollOf returns a
// *SnoozeError the handler must return: the task sleeps PENDING until the
// next check, as in SleepOf. An error of check is returned as it is (the
// handler's retry), and a condition not met within p.Timeout fails the
// task.
func PollOf(ctx context.Context, name string, p Poll, check func(context.Context) ([]byte, bool, error)) ([]byte, error) {
	w, ok := ctx.Value(workflowKey{}).(*Workflow)
	if !ok {
		return nil, ErrNoWorkflow
	}
	p.Min, p.Max, p.Timeout = cmp.Or(p.Min, DefaultPollMin), cmp.Or(p.Max, DefaultPollMax), cmp.Or(p.Timeout, DefaultPollTimeout)
	if p.Min < 0 || p.Max < p.Min || p.Timeout < 0 || p.Timeout > MaxSleep {
		return nil, &PermanentError{Err: fmt.Errorf("condition %q: poll %s..%s within %s: %w", name, p.Min, p.Max, p.Timeout, lease.ErrInvalid)}
	}
	if w.att.Tracer() != nil {
		ctx, span := w.startSpan(ctx, "leasehold.await", attribute.String(tracing.AttrAwait, "condition"), attribute.String(tracing.AttrStep, name))
		out, err := w.poll(ctx, name, p, check)
		EndRunSpan(span, err)
		return out, err
	}
	return w.poll(ctx, name, p, check)
}

// poll is PollOf's work, p defaulted and checked.
func (w *Workflow) poll(ctx context.Context, name string, p Poll, check func(context.Context) ([]byte, bool, error)) ([]byte, error) {
	clock := w.att.Clock()
	raw, err := stepOf(ctx, name+"#start", OpConditionStart, func(context.Context) ([]byte, error) {
		return strconv.AppendInt(nil, clock.Now().UnixMilli(), 10), nil
	}, false)
	if err != nil {
		return nil, err
	}
	ms, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return nil, &PermanentError{Err: fmt.Errorf("step %q: recorded start %q is not a time: %w", name+"#start", raw, err)}
	}
	out, err := stepOf(ctx, name, OpCondition, func(ctx context.Context) ([]byte, error) {
		r, met, err := check(ctx)
		switch {
		case err != nil:
			return nil, err
		case !met:
			return nil, errNotYet
		}
		return r, nil
	}, false)
	if !errors.Is(err, errNotYet) {
		return out, err
	}
	waited := clock.Now().Sub(time.UnixMilli(ms))
	if waited >= p.Timeout {
		return nil, &PermanentError{Err: fmt.Errorf("condition %q not met within %s", name, p.Timeout)}
	}
	next := min(max(waited, p.Min), p.Max, p.Timeout-waited)
	return nil, w.wait(ctx, &pauseError{
		msg:    fmt.Sprintf("condition %q not met after %s; next check in %s", name, waited.Round(time.Second), next.Round(time.Second)),
		snooze: SnoozeError{Delay: next},
	}, fmt.Sprintf("workflow.WaitFor %q", name))
}

// pauseError is the snooze of a sleep or a condition's wait, with the
// reason the task's history and status show.
type pauseError struct {
	msg    string
	snooze SnoozeError
}

func (e *pauseError) Error() string { return e.msg }
func (e *pauseError) Unwrap() error { return &e.snooze }

// markCalled records that this run called the step name; w.mu is held.
func (w *Workflow) markCalled(name string) {
	if w.called == nil {
		w.called = map[string]bool{}
	}
	w.called[name] = true
}

// VersionOf is the version of the change called change that this run of
// the workflow takes: 0 where the task's history was recorded by code
// from before the change (its next recorded operation is another, or the
// await it resumes from), and max where the run is new (at the end of its
// history: recorded then, as the step "version:"+change, so every later
// run takes it too). A handler branches on it to change code under
// workflows in flight without diverging from their histories. A second
// call of the same change in a run returns the first's version. Inside a
// branch or child context the history is the space's ("@NAME/version:
// CHANGE"): 0 where the space's next recorded operation is another.
func VersionOf(ctx context.Context, change string, max int) (int, error) {
	w, ok := ctx.Value(workflowKey{}).(*Workflow)
	if !ok {
		return 0, ErrNoWorkflow
	}
	if err := CheckAwaitName(change); err != nil {
		return 0, &PermanentError{Err: fmt.Errorf("version: %w", err)}
	}
	if max < 1 {
		return 0, &PermanentError{Err: fmt.Errorf("version %q: max %d, want 1 or more: %w", change, max, lease.ErrInvalid)}
	}
	name := "version:" + change
	sp := spaceOf(ctx)
	qname := sp.qualify(name)
	w.mu.Lock()
	at := w.next(sp) // the space's next recorded operation, -1 at its end
	if w.diverged != nil {
		defer w.mu.Unlock()
		return 0, w.diverged
	}
	if r, ok := (lease.Task{Steps: w.before(sp)}).StepResult(qname); ok && w.called[qname] {
		w.mu.Unlock()
		return strconv.Atoi(string(r))
	}
	rp, replaying := w.att.(Replayer)
	switch {
	case at >= 0 && w.steps[at].Name != qname,
		at < 0 && sp == nil && !w.awaited && w.awaitedName() != "",
		at < 0 && !w.awaited && replaying && rp.Awaits():
		// The history goes on past this point without the change: the
		// code that recorded it had not made it.
		w.mu.Unlock()
		return 0, nil
	}
	w.mu.Unlock()
	raw, err := stepOf(ctx, name, OpVersion, func(context.Context) ([]byte, error) {
		return strconv.AppendInt(nil, int64(max), 10), nil
	}, false)
	if err != nil {
		return 0, err
	}
	v, err := strconv.Atoi(string(raw))
	if err != nil {
		return 0, &PermanentError{Err: fmt.Errorf("step %q: recorded version %q is not a number: %w", name, raw, err)}
	}
	return v, nil
}
