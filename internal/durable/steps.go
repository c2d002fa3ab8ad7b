package durable

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"

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
// A name is checked before fn runs: an invalid name, a step beyond
// lease.MaxSteps, or a name this run has already called (and whose call
// did not fail) fails the task (PermanentError) without running fn. A
// repeated name would otherwise return the first step's result for a
// different step.
func StepOf(ctx context.Context, name string, fn func(context.Context) ([]byte, error)) ([]byte, error) {
	return stepOf(ctx, name, fn, false)
}

// stepOf is StepOf; a derived step's result is read from what the task
// waited for, which every later run reads again while the wait stands, so
// it is kept unrecorded (in w.steps, counted by w.unrecorded) until a
// later call or the run's end needs it written (Flush).
func stepOf(ctx context.Context, name string, fn func(context.Context) ([]byte, error), derived bool) ([]byte, error) {
	w, ok := ctx.Value(workflowKey{}).(*Workflow)
	if !ok {
		return nil, ErrNoWorkflow
	}
	if w.att.Tracer() != nil {
		ctx, span := w.startSpan(ctx, "leasehold.step", attribute.String(tracing.AttrStep, name))
		out, err := w.step(ctx, name, fn, derived)
		EndRunSpan(span, err)
		return out, err
	}
	return w.step(ctx, name, fn, derived)
}

// step is stepOf's work.
func (w *Workflow) step(ctx context.Context, name string, fn func(context.Context) ([]byte, error), derived bool) ([]byte, error) {
	w.mu.Lock()
	if w.called[name] {
		w.mu.Unlock()
		return nil, &PermanentError{Err: fmt.Errorf("step %q: %w", name, ErrStepTwice)}
	}
	if r, done := (lease.Task{Steps: w.steps}).StepResult(name); done {
		w.markCalled(name)
		w.mu.Unlock()
		return r, nil
	}
	if err := lease.CheckStep(lease.Task{Steps: w.steps}, name, nil); err != nil {
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
	if err := lease.CheckStep(lease.Task{Steps: w.steps}, name, out); err != nil {
		return nil, &PermanentError{Err: fmt.Errorf("step %q: %w", name, err)}
	}
	if derived {
		w.steps = append(w.steps[:len(w.steps):len(w.steps)], lease.Step{Name: name, Result: out})
		w.unrecorded++
		return out, nil
	}
	t, err := w.att.Checkpoint(ctx, w.held, name, out)
	if err != nil {
		return nil, fmt.Errorf("step %q: could not record its result: %w", name, err)
	}
	w.steps = t.Steps
	return out, nil
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
	w.mu.Lock()
	w.sleeps++
	name := "sleep#" + strconv.Itoa(w.sleeps)
	w.mu.Unlock()
	clock := w.att.Clock()
	raw, err := StepOf(ctx, name, func(context.Context) ([]byte, error) {
		return strconv.AppendInt(nil, clock.Now().Add(d).UnixMilli(), 10), nil
	})
	if err != nil {
		return err
	}
	ms, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return &PermanentError{Err: fmt.Errorf("step %q: recorded wake-up %q is not a time: %w", name, raw, err)}
	}
	if wake := time.UnixMilli(ms); wake.After(clock.Now()) {
		return w.wait(&pauseError{msg: name + " until " + wake.UTC().Format(time.RFC3339), snooze: SnoozeError{Delay: wake.Sub(clock.Now())}}, sleepWhat(name))
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
	raw, err := StepOf(ctx, name+"#start", func(context.Context) ([]byte, error) {
		return strconv.AppendInt(nil, clock.Now().UnixMilli(), 10), nil
	})
	if err != nil {
		return nil, err
	}
	ms, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return nil, &PermanentError{Err: fmt.Errorf("step %q: recorded start %q is not a time: %w", name+"#start", raw, err)}
	}
	out, err := StepOf(ctx, name, func(ctx context.Context) ([]byte, error) {
		r, met, err := check(ctx)
		switch {
		case err != nil:
			return nil, err
		case !met:
			return nil, errNotYet
		}
		return r, nil
	})
	if !errors.Is(err, errNotYet) {
		return out, err
	}
	waited := clock.Now().Sub(time.UnixMilli(ms))
	if waited >= p.Timeout {
		return nil, &PermanentError{Err: fmt.Errorf("condition %q not met within %s", name, p.Timeout)}
	}
	next := min(max(waited, p.Min), p.Max, p.Timeout-waited)
	return nil, w.wait(&pauseError{
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
