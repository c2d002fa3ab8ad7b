package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/durable"
	"github.com/leasehold/leasehold/internal/lease"
)

// Future is a durable operation started now whose value comes later: a
// step (StepAsync), a timer (SleepAsync), a callback (CallbackAsync), a
// message (ReceiveAsync), a child workflow (InvokeAsync) or a branch (Go).
// Get waits for it alone; Race, Any, AwaitAll and AllSettled wait for
// several, of any mix. A future belongs to the handler's run that made it:
// use it from the handler's goroutine.
type Future[T any] struct{ f *durable.Future }

// Awaitable is any Future, as the combinators take them.
type Awaitable interface{ future() *durable.Future }

func (f Future[T]) future() *durable.Future { return f.f }

// Get waits for f and returns its value, decoded into T. While f has not
// settled, Get returns an error the handler must return (the task sleeps
// until a timer's deadline, or waits for a callback's answer), as Sleep
// and WaitForCallback do; a failed callback gives a *CallbackFailedError,
// as does a callback that lost a race to a timer (its token answers
// nothing any more).
func (f Future[T]) Get(ctx context.Context) (T, error) {
	var zero T
	if f.f == nil {
		return zero, leasehold.Fail(errors.New("workflow: Get of a zero Future"))
	}
	raw, err := f.f.Get(ctx)
	var failed *durable.CallbackFailedError
	if errors.As(err, &failed) {
		return zero, &CallbackFailedError{Name: failed.Name, Reason: failed.Reason}
	}
	var ended *durable.ChildEndedError
	if errors.As(err, &ended) {
		return zero, leasehold.Fail(&ChildFailedError{Name: ended.Name, ID: ended.ID, Status: leasehold.Status(ended.Status), Reason: ended.Reason})
	}
	if err != nil || len(raw) == 0 {
		return zero, err
	}
	return decoded[T](raw, "result")
}

// StepAsync runs fn as the step called name, as Step does, and returns it
// as a future: the step runs now, in the handler's goroutine, and is
// recorded at its position, so the future has settled when StepAsync
// returns. It lets a step take part in a combinator (a lookup raced
// against a timer, say); an error of fn is recorded nowhere, and Get and
// every combinator return it as it is.
func StepAsync[T any](ctx context.Context, name string, fn func(context.Context) (T, error)) Future[T] {
	op := durable.OpStep + " " + reflect.TypeFor[T]().String()
	return Future[T]{durable.StepFuture(ctx, name, op, func(ctx context.Context) ([]byte, error) {
		v, err := fn(ctx)
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, leasehold.Fail(fmt.Errorf("step %q: result does not encode as JSON: %w", name, err))
		}
		return b, nil
	})}
}

// SleepAsync starts a durable timer of d (at most 366 days): its deadline
// is recorded now, as Sleep's is (Sleep is SleepAsync then Get, and they
// share the step names "sleep#n"), and the timer settles once it has
// passed. Race it against a callback for a timeout that is an outcome,
// not a failure.
func SleepAsync(ctx context.Context, d time.Duration) Future[struct{}] {
	return Future[struct{}]{durable.TimerFuture(ctx, d)}
}

// CallbackAsync starts the callback called name, as WaitForCallback does,
// without waiting for it: in a run that reaches it for the first time it
// hands this attempt's callback token to submit at once; a later run (a
// retry) hands out a new token only when it must wait for the answer. The
// answer is recorded where the run waited for it. timeout bounds a wait
// for the callback alone, as WaitForCallback's; raced against a timer
// (Race, Any) the wait ends at the timer's deadline if that comes first,
// and the timer wins. A run waits for one callback at a time.
func CallbackAsync[T any](ctx context.Context, name string, timeout time.Duration, submit func(ctx context.Context, token string) error) Future[T] {
	return Future[T]{durable.CallbackFuture(ctx, name, timeout, submit)}
}

// ReceiveAsync starts the receive of the next message on topic, as
// Receive does, as a future: it settles with the message, decoded into T,
// or fails once timeout has passed with none (its Get's error then
// matches context.DeadlineExceeded; 0 looks once). With a timeout, the
// time of its first look is recorded now; the message it takes is
// recorded where the run settles it (its Get, or the combinator that
// waits for it), so a replay takes the same message at the same point.
// "A message or a 48-hour timeout, whichever comes first":
//
//	msg := workflow.ReceiveAsync[Order](ctx, "orders", 72*time.Hour)
//	first, err := workflow.Race(ctx, "order-or-timeout", msg, workflow.SleepAsync(ctx, 48*time.Hour))
//
// A receive that loses a Race or Any took no message: the next receive on
// the topic gets it. A topic has one receive not settled at a time.
func ReceiveAsync[T any](ctx context.Context, topic string, timeout time.Duration) Future[T] {
	return Future[T]{durable.ReceiveFuture(ctx, topic, timeout)}
}

// InvokeAsync is Invoke as a future: the child called name, spawned when
// the handler first waits for it (its Get, or a combinator that needs it:
// a child that a Race decides without is never started), and cancelled
// with the parent while the parent waits for it. Its Get returns the
// child's result decoded into T, or a *ChildFailedError (as
// leasehold.Fail's); its outcome is recorded as Invoke's, "children:"+name.
// AwaitAll and AllSettled wait for any mix with children (the children
// first, the others after); Race and Any wait for one child, alone or
// against timers: at the earliest timer's deadline the worker cancels the
// child and the timer wins (docs/workflows.md has the mixes not
// supported yet).
func InvokeAsync[T any](ctx context.Context, name string, child Child) Future[T] {
	p, err := lease.EncodeJSON("payload", child.Payload)
	if err != nil {
		return Future[T]{durable.FailedFuture(leasehold.Fail(fmt.Errorf("invoke %q: %w", name, err)))}
	}
	return Future[T]{durable.InvokeFuture(ctx, name, durable.Child{Kind: child.Kind, Payload: p, MaxAttempts: child.MaxAttempts, Queue: child.Queue})}
}

// Race waits, as the operation called name, for the first of fs to
// settle, and returns its index; read its value (or failure) with its Get.
// The outcome is recorded (one step, "race:"+name), so every later run
// sees the same winner, even when the others settle since. "An approval
// or a 48-hour timeout, whichever comes first" is one call:
//
//	approval := workflow.CallbackAsync[Approval](ctx, "approval", 72*time.Hour, ask)
//	timeout := workflow.SleepAsync(ctx, 48*time.Hour)
//	first, err := workflow.Race(ctx, "decision", approval, timeout)
//	if err != nil {
//		return nil, err // the task waits for the approval, until the timer's deadline
//	}
//	if first == 1 {
//		return escalate(ctx) // no answer within 48 hours
//	}
//	a, err := approval.Get(ctx)
//
// While nothing has settled, Race returns an error the handler must
// return. What the task waits for: a timer (a sleep until the earliest),
// a callback, or a callback and timers (a callback wait whose deadline is
// the earliest timer's, when that comes before the callback's own
// timeout: at the deadline the timer wins). Two callbacks not settled are
// a mix the executor cannot wait on yet: the task fails, naming them.
func Race(ctx context.Context, name string, fs ...Awaitable) (int, error) {
	order, err := combine(ctx, durable.CombineRace, name, fs)
	if err != nil {
		return -1, err
	}
	return order[0], nil
}

// Any waits, as Race does, for the first of fs to succeed and returns its
// index; when every one has failed it returns -1 and their errors. Its
// outcome is the step "any:"+name.
func Any(ctx context.Context, name string, fs ...Awaitable) (int, error) {
	order, err := combine(ctx, durable.CombineAny, name, fs)
	if err != nil {
		return -1, err
	}
	var errs []error
	for _, i := range order {
		_, err := fs[i].future().Get(ctx)
		if err == nil {
			return i, nil
		}
		errs = append(errs, err)
	}
	return -1, fmt.Errorf("any %q: every future failed: %w", name, errors.Join(errs...))
}

// AwaitAll waits, as Race does, until every one of fs has succeeded, and
// returns nil; or until one fails, and returns its error. (All is the
// await of child tasks.) Its outcome is the step "all:"+name.
func AwaitAll(ctx context.Context, name string, fs ...Awaitable) error {
	order, err := combine(ctx, durable.CombineAll, name, fs)
	if err != nil {
		return err
	}
	for _, i := range order {
		if _, err := fs[i].future().Get(ctx); err != nil {
			return err
		}
	}
	return nil
}

// AllSettled waits, as Race does, until every one of fs has settled,
// succeeded or failed, and returns their indexes in the order they
// settled; read each with its Get. Its outcome is the step
// "allsettled:"+name.
func AllSettled(ctx context.Context, name string, fs ...Awaitable) ([]int, error) {
	return combine(ctx, durable.CombineAllSettled, name, fs)
}

// combine is the combinators' work.
func combine(ctx context.Context, kind, name string, fs []Awaitable) ([]int, error) {
	ds := make([]*durable.Future, len(fs))
	for i, f := range fs {
		if f != nil {
			ds[i] = f.future()
		}
	}
	return durable.Combine(ctx, kind, name, ds)
}
