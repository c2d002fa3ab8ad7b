package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/leasehold/leasehold/internal/lease"
)

// lostError is the cause the renewer cancels a handler with. It matches
// ErrLeaseLost. definite tells a lease known to be gone (another claim,
// release or finish) from one merely not confirmed in time.
type lostError struct {
	definite bool
	err      error
}

func (e *lostError) Error() string {
	if e.definite {
		return "lease lost: " + e.err.Error()
	}
	return "lease lost: not renewed before it expired: " + e.err.Error()
}

func (e *lostError) Is(target error) bool { return target == ErrLeaseLost }

func (e *lostError) Unwrap() error { return e.err }

// renewer keeps the lease and the message's visibility alive while the
// handler runs. It is owned by its execution, which stops and joins it before
// writing the outcome.
type renewer struct {
	x     *execution
	lease lease.Lease
	// trustUntil is when this worker stops trusting the lease: the moment
	// the last successful renewal was sent plus the lease duration. The
	// store stamped the lease from a clock reading taken after that, and a
	// takeover waits another skew bound on top, so the handler is always
	// stopped before anyone else can hold the task.
	trustUntil time.Time
	// trusted is trustUntil in Unix nanoseconds, for the handler's
	// goroutine (execution.trusted), which reads it while this writes it.
	// Both are set only by trust.
	trusted atomic.Int64
}

// trust sets when this worker stops trusting its lease.
func (r *renewer) trust(until time.Time) {
	r.trustUntil = until
	r.trusted.Store(until.UnixNano())
}

// retryInterval is how soon a failed renewal is tried again.
func (r *renewer) retryInterval() time.Duration {
	return max(r.x.cfg.RenewBefore/4, 100*time.Millisecond)
}

// firstRenewal is when the first renewal is due.
func (r *renewer) firstRenewal() time.Time {
	return r.trustUntil.Add(-r.x.cfg.RenewBefore)
}

// trusted returns nil while this worker may still trust its lease by its
// own clock, and otherwise the cause it cancels the handler with (ctx is
// the handler's context). A process paused after its claim or between two
// renewals (a long stop of the world, SIGSTOP) wakes up with its lease
// possibly taken over; the renewer notices at its next timer, but the
// handler's goroutine may run first. So a handler is not started, and no
// step's function called, on a lease that has run out.
//
// Other ends of the handler's context (the deadline, a cancellation
// request) are the handler's to see, as before.
func (x *execution) trusted(ctx context.Context) error {
	if cause := context.Cause(ctx); errors.Is(cause, ErrLeaseLost) {
		return cause
	}
	if x.cfg.Clock.Now().UnixNano() < x.running.renewer.trusted.Load() {
		return nil
	}
	err := &lostError{err: errPausedPastLease}
	x.running.cancelHandler(err)
	return err
}

var (
	// errPausedPastLease is the trusted lease that ran out before the
	// handler or a step began.
	errPausedPastLease = errors.New("it ran out before the handler or a step could start (was the process paused?)")
	// errNotStarted is the result of a handler that was not started
	// because the lease had run out (runHandler).
	errNotStarted = fmt.Errorf("handler not started: %w", &lostError{err: errPausedPastLease})
)

// run renews from the first renewal on, until ctx is done or the lease is
// lost. runClaimed arms a timer that starts it at firstRenewal: a handler
// that returns before then never has a renewer goroutine.
func (r *renewer) run(ctx context.Context) {
	cfg := r.x.cfg
	for {
		if ctx.Err() != nil {
			return
		}
		now := cfg.Clock.Now()
		if !now.Before(r.trustUntil) {
			r.x.running.cancelHandler(&lostError{err: errors.New("renewals kept failing")})
			r.x.log.warn("lease expired locally before a renewal landed; handler cancelled")
			return
		}
		var next time.Time
		err := r.renew(ctx, now)
		switch {
		case err == nil:
			next = r.trustUntil.Add(-cfg.RenewBefore)
		case errors.Is(err, lease.ErrLeaseLost), errors.Is(err, lease.ErrNotFound):
			r.x.running.cancelHandler(&lostError{definite: true, err: err})
			r.x.log.warn("lease lost; handler cancelled", "error", err)
			return
		case ctx.Err() != nil:
			return
		default:
			r.x.log.warn("lease renewal failed; will retry", "error", err)
			next = now.Add(r.retryInterval())
		}
		wait := min(cfg.Clock.Until(next), cfg.Clock.Until(r.trustUntil))
		t := cfg.Clock.NewTimer(max(wait, 0))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.Chan():
		}
	}
}

// renew extends the lease, then the message's visibility, and passes a
// cancellation request on to the handler.
func (r *renewer) renew(ctx context.Context, sent time.Time) error {
	cfg := r.x.cfg
	// The call may not outlive the lease it is trying to keep.
	budget := min(cfg.CallTimeout, r.trustUntil.Sub(sent))
	cctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	cctx, span := r.x.startSpan(cctx, "leasehold.renew")
	task, err := cfg.Store.Renew(cctx, r.lease)
	endSpan(span, err)
	if err != nil {
		return err
	}
	r.trust(sent.Add(cfg.LeaseDuration))
	r.lease.Until = task.LeaseUntil
	if task.CancelRequested && r.x.running.handlerCtx.Err() == nil { // once: cancelled, it stays so
		r.x.log.info("cancellation requested; handler cancelled")
		r.x.running.cancelHandler(ErrCancelRequested)
	}
	if r.x.fate.replaced {
		return nil // the message is gone; a fresh token stands for the task
	}
	var verr error
	if r.x.running.vis != nil {
		verr = r.x.running.vis.extend(ctx, r.x)
	} else {
		vctx, vcancel := context.WithTimeout(ctx, cfg.CallTimeout)
		_, verr = cfg.SQS.ChangeMessageVisibility(vctx, &sqs.ChangeMessageVisibilityInput{
			QueueUrl:          aws.String(r.x.msgQueueURL()),
			ReceiptHandle:     aws.String(r.x.msg.ReceiptHandle),
			VisibilityTimeout: visibilitySeconds(cfg.LeaseDuration + cfg.VisibilityMargin),
		})
		vcancel()
	}
	if verr != nil && ctx.Err() == nil {
		// The lease, not the message, is what guards the task; a message
		// that reappears early meets a live lease and is hidden again. (A
		// renewer stopped mid-call has nothing to report.)
		r.x.log.warn("could not extend message visibility", "error", verr)
	}
	return nil
}
