package leasehold

import (
	"time"

	"github.com/leasehold/leasehold/internal/awsenv"
	"github.com/leasehold/leasehold/internal/durable"
	"github.com/leasehold/leasehold/internal/lifecycle"
)

// Causes a handler's context is cancelled with. Read them with
// context.Cause(ctx) and errors.Is.
var (
	// ErrLeaseLost: this worker no longer holds the task. Stop: nothing the
	// handler returns from now on will be recorded.
	ErrLeaseLost = lifecycle.ErrLeaseLost
	// ErrDeadline: the Lambda invocation is about to end. The lease is
	// released when the handler returns, and the next attempt starts at once.
	ErrDeadline = lifecycle.ErrDeadline
	// ErrCancelRequested: the task was cancelled (Client.Cancel). It ends
	// CANCELLED when the handler returns.
	ErrCancelRequested = lifecycle.ErrCancelRequested
)

// Snooze returns an error that makes the task run again after d, at least
// one second (a shorter or negative d waits one second, so a task cannot
// snooze in a hot loop). The attempt is not counted against the task's max
// attempts; the task's snoozes counter grows, and its history keeps only the
// newest 50 entries.
func Snooze(d time.Duration) error { return &durable.SnoozeError{Delay: max(d, 0)} }

// Fail returns an error that fails the task now, without further attempts.
func Fail(err error) error { return &durable.PermanentError{Err: err} }

// Cancel returns an error that ends the task as CANCELLED.
func Cancel(err error) error { return &durable.CancelError{Err: err} }

// CredentialsError is the error of a constructor (NewWorkerFromEnv,
// serve.RunFromEnv) whose aws.Config has no usable credentials: one line
// that says what to set, with the credentials provider's error behind
// Unwrap. The constructors return it wrapped with ErrConfig.
type CredentialsError = awsenv.CredentialsError
