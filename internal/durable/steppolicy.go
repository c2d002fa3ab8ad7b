package durable

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
)

// A step with a policy (StepPolicyOf) tries its function up to MaxAttempts
// times. Its history is the plain step's record (the result, under the
// step's own name and operation, as StepOf records it) preceded by the
// records of its tries that a later run must know of:
//
//   - name#tryK (OpStepTry), at most once: try K started. Written before
//     try K runs, so that a run that finds it with neither a later try's
//     record nor the result knows that try K was cut off (the process died,
//     the lease was lost) and does not run it again (ErrStepInterrupted).
//   - name#retryK (OpStepRetry): K tries have failed and the next is due at
//     a time too far off to wait for in the process; the task snoozed until
//     then, and the run that resumes it goes on at try K+1, not at try 1.
//
// A try that fails and is retried in the process after a short delay
// records nothing more: at least once, a run cut off during those tries
// starts again from the last recorded try.

// The operations a step with a policy records beside its result.
const (
	OpStepTry   = "step try"
	OpStepRetry = "step retry"
)

// MaxInProcessDelay is the longest delay before a step's next try that the
// handler waits out in its process, holding the lease (the renewer keeps
// it) and without running its earlier steps again. A longer delay, or one
// that would end past the handler's deadline, snoozes the task durably
// until the next try is due. It is well inside the lease (20 s by
// default, renewed 10 s before it ends) and a Lambda's time.
const MaxInProcessDelay = 5 * time.Second

// MaxStepTries bounds StepPolicy.MaxAttempts; it keeps the try records'
// names short (a step with a policy has a name of at most
// MaxPolicyStepNameBytes).
const MaxStepTries = 100

// MaxPolicyStepNameBytes bounds the name of a step with a policy: its try
// records add "#retry" and the try's number to it.
const MaxPolicyStepNameBytes = lease.MaxStepNameBytes - len("#retry100")

// StepPolicy-defaults: 3 tries, 1 s then doubling to 1 minute.
const (
	DefaultStepTries      = 3
	DefaultStepInitial    = time.Second
	DefaultStepMaxDelay   = time.Minute
	DefaultStepMultiplier = 2.0
)

// ErrStepInterrupted is the error of a try of an at-most-once step that
// started in an earlier run and never finished (its process died, its
// lease was lost): the try is not run again, and counts as failed.
var ErrStepInterrupted = errors.New("the try started and did not finish (at most once: not run again)")

// StepPolicy is how StepPolicyOf tries a step's function.
type StepPolicy struct {
	// MaxAttempts bounds the tries, 1 to MaxStepTries (0: 3).
	MaxAttempts int
	// Initial is the delay after the first failed try (0: 1 s); each
	// later one is Multiplier (0: 2, at least 1) times the one before, at
	// most Max (0: 1 minute).
	Initial, Max time.Duration
	Multiplier   float64
	// Jitter draws each delay at random between half and all of it.
	Jitter bool
	// Timeout ends each try's context after this long (0: none), with a
	// cause that names the step and the try; the try then fails.
	Timeout time.Duration
	// Retry decides whether a failed try's error is tried again (nil:
	// every error). A permanent error is never tried again.
	Retry func(error) bool
	// AtMostOnce records that a try started before it runs, so that a try
	// cut off by a crash is never run again (it fails with
	// ErrStepInterrupted); the default, at least once, runs it again.
	AtMostOnce bool
}

// withDefaults is p with its zero fields at their defaults, or an error
// for fields out of range.
func (p StepPolicy) withDefaults() (StepPolicy, error) {
	switch {
	case p.MaxAttempts < 0 || p.MaxAttempts > MaxStepTries:
		return p, fmt.Errorf("%w: max attempts %d, want 1 to %d (0 for %d)", lease.ErrInvalid, p.MaxAttempts, MaxStepTries, DefaultStepTries)
	case p.Initial < 0 || p.Max < 0 || p.Timeout < 0:
		return p, fmt.Errorf("%w: a negative delay or timeout", lease.ErrInvalid)
	case p.Multiplier != 0 && (p.Multiplier < 1 || math.IsInf(p.Multiplier, 0) || math.IsNaN(p.Multiplier)):
		return p, fmt.Errorf("%w: multiplier %v, want at least 1 (0 for %v)", lease.ErrInvalid, p.Multiplier, DefaultStepMultiplier)
	}
	p.MaxAttempts = cmp.Or(p.MaxAttempts, DefaultStepTries)
	p.Initial = cmp.Or(p.Initial, DefaultStepInitial)
	p.Max = max(cmp.Or(p.Max, DefaultStepMaxDelay), p.Initial)
	p.Multiplier = cmp.Or(p.Multiplier, DefaultStepMultiplier)
	return p, nil
}

// delay is the wait after the failed-th failed try (from 1).
func (p StepPolicy) delay(failed int) time.Duration {
	d := float64(p.Initial) * math.Pow(p.Multiplier, float64(failed-1))
	if d > float64(p.Max) {
		d = float64(p.Max)
	}
	out := time.Duration(d)
	if p.Jitter && out > 1 {
		out = out/2 + rand.N(out/2+1)
	}
	return out
}

// Pauser is an Attempt that waits out a step's short delay between tries
// itself (the executor: on its clock, or not at all for a test's fake
// clock, which nothing moves while a handler runs, and not past its
// handler's deadline). An Attempt without it waits on its Clock, within
// ctx's deadline.
type Pauser interface {
	// Pause returns true after d, or with ctx's cause when ctx ends
	// first; false at once when it will not wait so long (the step then
	// snoozes durably).
	Pause(ctx context.Context, d time.Duration) (bool, error)
}

// tryError marks an error of the step's function (a failed try), as
// opposed to one of the step's own work (recording, a lost lease).
type tryError struct{ err error }

func (e *tryError) Error() string { return e.err.Error() }
func (e *tryError) Unwrap() error { return e.err }

// retryNote is the result of a name#retryK record: when the next try is
// due, and the error of the try that failed (cut to maxNoteError bytes).
type retryNote struct {
	At    int64  `json:"at"`
	Error string `json:"error,omitempty"`
}

const maxNoteError = 512

// triesState is what the history says of a step's tries before this run.
type triesState struct {
	failed int       // tries that failed (or were cut off)
	next   time.Time // when try failed+1 is due; zero for now
	last   string    // the last failed try's error, from a retry record
	// started: the history records that try failed+1 started (at most
	// once), and goes on (its result, say): the run goes on with that try
	// without recording its start again. cut: the history ends with that
	// record, the try cut off; failed counts it.
	started, cut bool
}

// StepPolicyOf is StepAs tried under the policy p: a try that fails (an
// error of fn that p.Retry accepts, or p.Timeout) is tried again after
// p's delay, in this process while the delay is at most
// MaxInProcessDelay (the steps before it are not run again, the task is
// not claimed again), and otherwise after a durable snooze (a
// *SnoozeError the handler must return; the run that resumes the task
// goes on at the next try). When the tries run out, or p.Retry refuses an
// error, the step fails the task (*PermanentError naming the step). An
// error that is not a try's failure (a permanent error of fn, a lost
// lease, the handler's context ending, a wait) is returned as it is.
// The step's result is recorded as StepAs records it.
func StepPolicyOf(ctx context.Context, name, op string, p StepPolicy, fn func(context.Context) ([]byte, error)) ([]byte, error) {
	w, ok := ctx.Value(workflowKey{}).(*Workflow)
	if !ok {
		return nil, ErrNoWorkflow
	}
	p, err := p.withDefaults()
	if err == nil && len(name) > MaxPolicyStepNameBytes {
		err = fmt.Errorf("%w: the name of a step with a policy is at most %d bytes", lease.ErrInvalid, MaxPolicyStepNameBytes)
	}
	if err != nil {
		return nil, &PermanentError{Err: fmt.Errorf("step %q: %w", name, err)}
	}
	sp := spaceOf(ctx)
	w.mu.Lock()
	twice := w.called[sp.qualify(name)]
	w.mu.Unlock()
	if twice {
		return nil, &PermanentError{Err: fmt.Errorf("step %q: %w", name, ErrStepTwice)}
	}
	st, err := w.triesOf(sp, name)
	if err != nil {
		return nil, err
	}
	clock := w.att.Clock()
	if st.cut {
		if err := w.afterFailure(ctx, name, p, st.failed, fmt.Errorf("try %d: %w", st.failed, ErrStepInterrupted)); err != nil {
			return nil, err
		}
	} else if st.next.After(clock.Now()) {
		// Resumed before the try is due (an early delivery): sleep on.
		return nil, w.stepSnooze(ctx, name, st.failed, p, st.next, st.last)
	}
	recorded := st.started // the first try's start is in the history
	for try := st.failed + 1; ; try++ {
		if p.AtMostOnce && !recorded {
			marker := name + "#try" + strconv.Itoa(try)
			if _, err := stepOf(ctx, marker, OpStepTry, func(context.Context) ([]byte, error) {
				return strconv.AppendInt(nil, clock.Now().UnixMilli(), 10), nil
			}, false); err != nil {
				return nil, err
			}
		}
		recorded = false
		out, err := stepOf(ctx, name, op, func(ctx context.Context) ([]byte, error) {
			return runTry(ctx, name, try, p.Timeout, fn)
		}, false)
		var te *tryError
		if err == nil || !errors.As(err, &te) {
			return out, err
		}
		if ctx.Err() != nil {
			// The handler's context ended (a lost lease, a cancel, the
			// deadline): the attempt is over, not the try.
			return nil, te.err
		}
		if err := w.afterFailure(ctx, name, p, try, te.err); err != nil {
			return nil, err
		}
	}
}

// runTry runs fn as try number try of the step name, its context ending
// after timeout (0: none) with a cause naming both.
func runTry(ctx context.Context, name string, try int, timeout time.Duration, fn func(context.Context) ([]byte, error)) ([]byte, error) {
	tctx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		cause := fmt.Errorf("step %q: try %d timed out after %s: %w", name, try, timeout, context.DeadlineExceeded)
		tctx, cancel = context.WithTimeoutCause(ctx, timeout, cause)
		defer cancel()
	}
	out, err := fn(tctx)
	var perm *PermanentError
	switch {
	case err == nil, errors.As(err, &perm), Suspends(err):
		return out, err
	case tctx != ctx && tctx.Err() != nil && ctx.Err() == nil:
		// The try's own timeout: its cause says so.
		if cause := context.Cause(tctx); !errors.Is(err, cause) {
			if errors.Is(err, context.DeadlineExceeded) {
				err = cause
			} else {
				err = fmt.Errorf("%w (the step returned: %w)", cause, err)
			}
		}
	}
	return nil, &tryError{err: err}
}

// afterFailure decides what follows the failed-th failed try of the step
// name, whose error is err, and returns the error that ends the step: the
// one that fails the task when the policy retries no more, or a snooze
// (after recording the next try's time) when the delay is too long to
// wait here; nil, after waiting the delay here, for the next try.
func (w *Workflow) afterFailure(ctx context.Context, name string, p StepPolicy, failed int, err error) error {
	if p.Retry != nil && !p.Retry(err) {
		return &PermanentError{Err: fmt.Errorf("step %q: try %d of %d failed, and its policy does not retry the error: %w", name, failed, p.MaxAttempts, err)}
	}
	if failed >= p.MaxAttempts {
		return &PermanentError{Err: fmt.Errorf("step %q: all %d tries failed, the last: %w", name, p.MaxAttempts, err)}
	}
	d := p.delay(failed)
	if d <= MaxInProcessDelay {
		waited, err := w.pause(ctx, d)
		if err != nil {
			return fmt.Errorf("step %q: waiting for try %d: %w", name, failed+1, err)
		}
		if waited {
			return nil
		}
	}
	clock := w.att.Clock()
	at := clock.Now().Add(d)
	msg := err.Error()
	if len(msg) > maxNoteError {
		msg = strings.ToValidUTF8(msg[:maxNoteError], "")
	}
	rec := name + "#retry" + strconv.Itoa(failed)
	raw, rerr := stepOf(ctx, rec, OpStepRetry, func(context.Context) ([]byte, error) {
		return json.Marshal(retryNote{At: at.UnixMilli(), Error: msg})
	}, false)
	if rerr != nil {
		return rerr
	}
	var note retryNote
	if err := json.Unmarshal(raw, &note); err != nil {
		return &PermanentError{Err: fmt.Errorf("step %q: recorded retry %q does not decode: %w", rec, raw, err)}
	}
	return w.stepSnooze(ctx, name, failed, p, time.UnixMilli(note.At), msg)
}

// stepSnooze is the snooze until the next try of the step name is due.
func (w *Workflow) stepSnooze(ctx context.Context, name string, failed int, p StepPolicy, at time.Time, last string) error {
	d := max(at.Sub(w.att.Clock().Now()), 0)
	return w.wait(ctx, &pauseError{
		msg:    fmt.Sprintf("step %q: try %d of %d failed (%s); try %d at %s", name, failed, p.MaxAttempts, last, failed+1, at.UTC().Format(time.RFC3339)),
		snooze: SnoozeError{Delay: d},
	}, fmt.Sprintf("the retry of step %q", name))
}

// pause waits d between two tries, with the Attempt's Pauser or on its
// clock; false (no wait) when the wait and as long again would run past
// ctx's deadline.
func (w *Workflow) pause(ctx context.Context, d time.Duration) (bool, error) {
	if p, ok := w.att.(Pauser); ok {
		return p.Pause(ctx, d)
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < 2*d {
		return false, nil
	}
	t := w.att.Clock().NewTimer(d)
	defer t.Stop()
	select {
	case <-t.Chan():
		return true, nil
	case <-ctx.Done():
		return true, context.Cause(ctx)
	}
}

// triesOf replays the try records of the step name of the space sp (nil:
// the root) at the space's position (see StepPolicyOf): the records of its earlier runs' tries, in order, a
// try's start numbered one past the last try recorded, a retry's at
// least the last try recorded (tries retried in the process at least once
// record nothing). It stops at the first other operation (the step's
// result, or whatever the replay of the step itself then finds). w.mu is
// taken.
func (w *Workflow) triesOf(sp *space, name string) (triesState, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var st triesState
	last, started := 0, false // the last try recorded; whether as started
	prefix := sp.qualify(name) + "#"
	for w.diverged == nil {
		at := w.next(sp)
		if at < 0 {
			break
		}
		rec := w.steps[at]
		rest, ok := strings.CutPrefix(rec.Name, prefix)
		if !ok || rec.Op != OpStepTry && rec.Op != OpStepRetry {
			break
		}
		var n int
		var err error
		if rec.Op == OpStepTry {
			n, err = numbered(rest, "try", last+1, last+1)
		} else {
			n, err = numbered(rest, "retry", max(last, 1), MaxStepTries)
		}
		if err != nil {
			w.diverged = &DivergedError{Position: at + 1, Recorded: DescribeOp(rec.Name, rec.Op), Asked: fmt.Sprintf("the tries of step %q", name)}
			return st, w.diverged
		}
		w.passed(sp, at)
		w.markCalled(rec.Name)
		last = n
		if rec.Op == OpStepTry {
			started, st.failed, st.next = true, n-1, time.Time{}
			continue
		}
		var note retryNote
		if err := json.Unmarshal(rec.Result, &note); err != nil {
			return st, &PermanentError{Err: fmt.Errorf("step %q: recorded retry %q does not decode: %w", rec.Name, rec.Result, err)}
		}
		started, st.failed, st.next, st.last = false, n, time.UnixMilli(note.At), note.Error
	}
	switch {
	case started && w.next(sp) < 0:
		// Started in an earlier run, with neither a result nor a later
		// try: cut off.
		st.failed++
		st.cut = true
	case started:
		// Started, and its result (or something else) follows: the step's
		// replay reads it.
		st.started = true
	}
	return st, nil
}

// numbered parses s as word followed by a number from least to most.
func numbered(s, word string, least, most int) (int, error) {
	digits, ok := strings.CutPrefix(s, word)
	if !ok {
		return 0, errors.New("not a try record")
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n < least || n > most || strconv.Itoa(n) != digits {
		return 0, errors.New("not a try record")
	}
	return n, nil
}
