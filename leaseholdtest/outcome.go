package leaseholdtest

import (
	"time"

	"github.com/leasehold/leasehold/internal/lifecycle"
)

// Outcome is what the worker does with a task after an attempt.
type Outcome string

const (
	// Succeeded: the handler returned a result; the task ends SUCCEEDED.
	Succeeded Outcome = "succeeded"
	// Retried: any other error (a panic too); the task runs again after a
	// backoff, or ends FAILED on its last attempt.
	Retried Outcome = "retried"
	// Snoozed: leasehold.Snooze; the task runs again later, the attempt
	// not counted.
	Snoozed Outcome = "snoozed"
	// Cancelled: leasehold.Cancel; the task ends CANCELLED.
	Cancelled Outcome = "cancelled"
	// Failed: leasehold.Fail, or a payload that does not decode or a result
	// that does not encode; the task ends FAILED now.
	Failed Outcome = "failed"
)

// OutcomeOf says what the worker does after an attempt whose handler
// returned err, as Run and RunKind return it, and for Snoozed after how
// long (at least a second). It reads err the way the worker does, so a
// wrapped leasehold.Fail(err) is Failed too.
func OutcomeOf(err error) (Outcome, time.Duration) {
	if err == nil {
		return Succeeded, 0
	}
	switch steer, delay := lifecycle.SteerOf(err); steer {
	case lifecycle.SteerSnooze:
		return Snoozed, delay
	case lifecycle.SteerCancel:
		return Cancelled, 0
	case lifecycle.SteerFail:
		return Failed, 0
	}
	return Retried, 0
}
