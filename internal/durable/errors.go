package durable

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
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
	if suspends(err) {
		span.SetAttributes(attribute.Bool("leasehold.suspended", true))
		err = nil
	}
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// Suspends reports whether err, a handler's, hands the attempt back to
// wait rather than failing it (see suspends).
func Suspends(err error) bool { return suspends(err) }

// suspends reports whether err, a handler's, hands the attempt back to wait
// (for children, a callback, or a snooze: a sleep or a condition) rather
// than failing it.
func suspends(err error) bool {
	if err == nil {
		return false
	}
	var (
		children *AwaitChildrenError
		callback *AwaitCallbackError
		snooze   *SnoozeError
	)
	return errors.As(err, &children) || errors.As(err, &callback) || errors.As(err, &snooze)
}
