package workflow

import (
	"time"

	"github.com/leasehold/leasehold/internal/durable"
)

// StepPolicy is how Step tries a step's function when it is given one:
// up to MaxAttempts tries, a delay between them that grows from Initial by
// Multiplier up to Max, a Timeout for each try, a Retry predicate, and at
// most once or at least once per try.
//
//	receipt, err := workflow.Step(ctx, "charge", charge, workflow.StepPolicy{
//		MaxAttempts: 5, Initial: time.Second, Max: time.Hour, Timeout: 10 * time.Second,
//		Retry:      func(err error) bool { return !errors.Is(err, payments.ErrDeclined) },
//		AtMostOnce: true,
//	})
//	if err != nil {
//		return nil, err // a snooze until the next try, or the step's failure
//	}
//
// A delay of up to 5 seconds is waited out in the handler's process,
// holding the lease: the next try runs in the same attempt, and the steps
// before it do not run again. A longer delay records the next try's time
// (one write) and snoozes the task, PENDING and holding no lease, as Sleep
// does: Step returns an error the handler must return, and the run that
// resumes the task goes on at the next try. When the tries run out, or
// Retry refuses an error, Step returns an error that fails the task
// (leasehold.Fail), naming the step and wrapping the last try's error.
// docs/workflows.md#step-policies has the whole picture and the cost.
type StepPolicy struct {
	// MaxAttempts bounds the tries, 1 to 100 (0: 3).
	MaxAttempts int
	// Initial is the delay after the first failed try (0: 1s); each later
	// delay is Multiplier (0: 2; at least 1) times the one before, at most
	// Max (0: 1 minute).
	Initial, Max time.Duration
	Multiplier   float64
	// Jitter draws each delay at random between half and all of it.
	Jitter bool
	// Timeout ends each try's context after this long (0: none), with a
	// cause (context.Cause) naming the step and the try that matches
	// context.DeadlineExceeded; the try then fails, and may be retried.
	// It is wall-clock time, even under leaseholdtest's fake clock.
	Timeout time.Duration
	// Retry decides whether a failed try's error is tried again (nil:
	// every error). An error made with leasehold.Fail is never retried.
	Retry func(error) bool
	// AtMostOnce records each try's start (one write) before it runs, so
	// that a try cut off by a crash or a lost lease is not run again: it
	// counts as a failed try with ErrStepInterrupted. The default, at
	// least once, runs a cut-off try again.
	AtMostOnce bool
}

// ErrStepInterrupted is the error of an at-most-once try (StepPolicy's
// AtMostOnce) that started in an earlier run and never finished: the try
// is not run again and counts as failed, so a Retry predicate can refuse
// it (errors.Is) to keep the step's effect to at most one try in all.
var ErrStepInterrupted = durable.ErrStepInterrupted
