package lifecycle

import (
	"errors"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/internal/durable"
	"github.com/leasehold/leasehold/internal/lease"
)

// Causes a handler's context can be cancelled with; the handler reads them
// with context.Cause.
var (
	// ErrLeaseLost: the lease could not be kept (taken over, released, or
	// not renewed in time). Whatever the handler does next cannot be
	// recorded. It is the store's own lease.ErrLeaseLost: a write that
	// found the lease gone and a renewal that did are one condition.
	ErrLeaseLost = lease.ErrLeaseLost
	// ErrDeadline: the invocation is about to end. The lease is released so
	// the next attempt can start at once.
	ErrDeadline = errors.New("invocation deadline reached")
	// ErrCancelRequested: somebody cancelled the task.
	ErrCancelRequested = errors.New("task cancellation requested")
)

// PanicError is a recovered handler panic.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("handler panicked: %v", e.Value) }

// Steer is what a handler's error asks of its task.
type Steer int

const (
	// SteerRetry: retry with backoff, or fail when no attempts are left
	// (any error but the three below, a panic included).
	SteerRetry Steer = iota
	// SteerSnooze: run again after a delay, the attempt not counted.
	SteerSnooze
	// SteerCancel: end CANCELLED.
	SteerCancel
	// SteerFail: end FAILED now.
	SteerFail
)

// SteerOf returns what a handler's non-nil error asks of its task, and for
// a snooze how long to wait (at least MinSnooze). An error that wraps more
// than one request is read in this order: snooze, cancel, fail.
func SteerOf(err error) (Steer, time.Duration) {
	var (
		snooze    *durable.SnoozeError
		cancelled *durable.CancelError
		permanent *durable.PermanentError
	)
	switch {
	case errors.As(err, &snooze):
		return SteerSnooze, max(snooze.Delay, MinSnooze)
	case errors.As(err, &cancelled):
		return SteerCancel, 0
	case errors.As(err, &permanent):
		return SteerFail, 0
	}
	return SteerRetry, 0
}
