package durable

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold/internal/claimcheck"
	"github.com/leasehold/leasehold/internal/lease"
)

// ErrStepTwice: a handler called one step name twice in one run. Step
// names must be unique within a task; the second call fails the task.
var ErrStepTwice = errors.New("step name used twice in one run (step names must be unique within a task)")

// SnoozeError asks for the task to run again after Delay without counting
// this attempt.
type SnoozeError struct{ Delay time.Duration }

func (e *SnoozeError) Error() string { return fmt.Sprintf("snoozed for %s", e.Delay) }

// PermanentError fails the task now, without further attempts.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string {
	if e.Err == nil {
		return "permanent failure"
	}
	return e.Err.Error()
}

func (e *PermanentError) Unwrap() error { return e.Err }

// CancelError ends the task as CANCELLED.
type CancelError struct{ Err error }

func (e *CancelError) Error() string {
	if e.Err == nil {
		return "cancelled by handler"
	}
	return e.Err.Error()
}

func (e *CancelError) Unwrap() error { return e.Err }

// EndRunSpan ends the span of a handler's run, step or await (when not
// nil): a suspension (the handler must return the error to wait) is marked
// and is no failure; any other error sets an error status.
func EndRunSpan(span trace.Span, err error) {
	if span == nil {
		return
	}
	if Suspends(err) {
		span.SetAttributes(attribute.Bool("leasehold.suspended", true))
		err = nil
	}
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// Suspends reports whether err, a handler's, hands the attempt back to wait
// (for children, a callback, or a snooze: a sleep or a condition) or ends
// its run (a continue-as-new) rather than failing it.
func Suspends(err error) bool {
	if err == nil {
		return false
	}
	var (
		children *AwaitChildrenError
		callback *AwaitCallbackError
		snooze   *SnoozeError
	)
	var cont *ContinueError
	return errors.As(err, &children) || errors.As(err, &callback) || errors.As(err, &snooze) || errors.As(err, &cont)
}

// ContinueError ends the run of a workflow and starts its next run with
// Payload as its input (ContinueAsNewOf): the executor archives the ending
// run's history as a task of its own and clears the task's.
type ContinueError struct{ Payload []byte }

func (e *ContinueError) Error() string { return "continued as new" }

// ContinueAsNewOf returns the error that, returned by the handler, ends
// this run of its workflow and starts the next with payload (JSON, within
// the payload limit) as its input, under the same task id, with an empty
// history: for a workflow that loops for ever (a subscription, a poller),
// whose history would otherwise grow without end. A payload over the
// inline limit (lease.MaxPayloadBytes) is the executor's to stow in the
// payload bucket, or to refuse without one; over the bucket's limit it is
// refused here.
func ContinueAsNewOf(ctx context.Context, payload []byte) error {
	w, ok := ctx.Value(workflowKey{}).(*Workflow)
	if !ok {
		return ErrNoWorkflow
	}
	switch {
	case len(payload) > claimcheck.MaxValueBytes:
		return &PermanentError{Err: fmt.Errorf("continue as new: %w", &lease.TooLargeError{What: "payload", Size: len(payload), Limit: claimcheck.MaxValueBytes})}
	case claimcheck.IsRef(payload):
		return &PermanentError{Err: fmt.Errorf("continue as new: %w", claimcheck.ErrReserved)}
	case lease.JSONProblem(payload) != "":
		return &PermanentError{Err: fmt.Errorf("continue as new: %w: payload %s", lease.ErrInvalid, lease.JSONProblem(payload))}
	}
	return w.wait(ctx, &ContinueError{Payload: payload}, "workflow.ContinueAsNew")
}
