package leasehold_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/workflow"
)

// Races of a message against a callback, of a child against a message,
// and of two children, on the stack (issue 37, point 1): "cb" waits for a
// callback raced against a message, and Client.Send ends that wait (the
// message form on the work queue, whose worker ends it); "kid" waits for
// a child raced against a message, which the send has cancelled; "two"
// races a child that waits for ever against one that ends at once, which
// wins, the other cancelled. Each in attempt 1; the callback's late
// answer is refused.
func TestRacesOfMessagesCallbacksAndChildrenOnTheStack(t *testing.T) {
	t.Parallel()
	e := setupStack(t)
	c := newClientOn(t, e)
	tokens := make(chan string, 4)
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "cb", func(ctx context.Context, _ *leasehold.Task[string]) (string, error) {
		ok := workflow.CallbackAsync[string](ctx, "ok", time.Hour, func(_ context.Context, tok string) error {
			tokens <- tok
			return nil
		})
		msg := workflow.ReceiveAsync[int](ctx, "orders", time.Hour)
		first, err := workflow.Race(ctx, "ok-or-order", ok, msg)
		if err != nil || first == 0 {
			return "approved", err
		}
		n, err := msg.Get(ctx)
		return fmt.Sprint("order ", n), err
	})
	leasehold.Handle(hs, "kid", func(ctx context.Context, _ *leasehold.Task[string]) (string, error) {
		kid := workflow.InvokeAsync[int](ctx, "kid", workflow.Child{Kind: "stuck", MaxAttempts: 1})
		msg := workflow.ReceiveAsync[int](ctx, "orders", time.Hour)
		first, err := workflow.Race(ctx, "kid-or-order", kid, msg)
		if err != nil || first == 0 {
			return "child", err
		}
		n, err := msg.Get(ctx)
		return fmt.Sprint("order ", n), err
	})
	leasehold.Handle(hs, "two", func(ctx context.Context, _ *leasehold.Task[string]) (string, error) {
		slow := workflow.InvokeAsync[int](ctx, "slow", workflow.Child{Kind: "stuck", MaxAttempts: 1})
		fast := workflow.InvokeAsync[int](ctx, "fast", workflow.Child{Kind: "double", Payload: 21, MaxAttempts: 1})
		first, err := workflow.Race(ctx, "slow-or-fast", slow, fast)
		if err != nil || first == 0 {
			return "slow", err
		}
		n, err := fast.Get(ctx)
		return fmt.Sprint("fast ", n), err
	})
	leasehold.Handle(hs, "double", func(_ context.Context, task *leasehold.Task[int]) (int, error) { return 2 * task.Payload, nil })
	leasehold.Handle(hs, "stuck", func(ctx context.Context, _ *leasehold.Task[int]) (int, error) {
		return workflow.WaitForCallback[int](ctx, "never", time.Hour, func(context.Context, string) error { return nil })
	})
	w := e.worker(t, leasehold.WorkerConfig{Handlers: hs})
	ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(3*time.Minute))
	defer cancel()
	for id, kind := range map[string]string{"cb": "cb", "kid": "kid", "two": "two"} {
		if _, err := c.Enqueue(ctx, leasehold.Submission{Kind: kind, ID: id, MaxAttempts: 1}); err != nil {
			t.Fatal(err)
		}
	}
	e.pump(t, w, 60*time.Second, func() bool {
		return e.status(t, "cb") == lease.StatusWaiting && e.status(t, "kid") == lease.StatusWaiting
	})
	for _, id := range []string{"cb", "kid"} {
		if _, err := c.Send(ctx, id, "orders", 7); err != nil {
			t.Fatalf("Send to %s: %v", id, err)
		}
	}
	e.pump(t, w, 90*time.Second, func() bool {
		return e.status(t, "cb") == lease.StatusSucceeded && e.status(t, "kid") == lease.StatusSucceeded && e.status(t, "two") == lease.StatusSucceeded
	})
	for id, want := range map[string]struct{ result, steps string }{
		"cb":  {`"order 7"`, "recv:orders#1#start callback:ok recv:orders#1 race:ok-or-order"},
		"kid": {`"order 7"`, "recv:orders#1#start children:kid recv:orders#1 race:kid-or-order"},
		"two": {`"fast 42"`, "children:slow children:fast race:slow-or-fast"},
	} {
		got := e.get(t, id)
		if string(got.Result) != want.result || got.Attempt != 1 || stepNames(got) != want.steps {
			t.Errorf("%s: %s in attempt %d (%s), steps %q; want %s in attempt 1, steps %q", id, got.Result, got.Attempt, got.Error, stepNames(got), want.result, want.steps)
		}
	}
	for _, kid := range []string{workflow.ChildIDIn("kid", "kid", 0), workflow.ChildIDIn("two", "slow", 0)} {
		if got := e.get(t, kid); got.Status != lease.StatusCancelled {
			t.Errorf("the child %s that lost: %s (%s), want CANCELLED", kid, got.Status, got.Error)
		}
	}
	if _, err := c.CompleteCallback(ctx, <-tokens, "late"); !errors.Is(err, leasehold.ErrBadCallback) {
		t.Errorf("the callback's late answer: %v, want ErrBadCallback", err)
	}
}

// A child raced against a callback, on the stack: a child that ends at
// once wins (its end ends the parent's callback wait), and a callback
// answered through the client wins against a child that waits, which is
// then cancelled.
func TestRaceOfAChildAndACallbackOnTheStack(t *testing.T) {
	t.Parallel()
	e := setupStack(t)
	c := newClientOn(t, e)
	tokens := make(chan string, 4)
	hs := leasehold.NewHandlers()
	race := func(kind string) func(context.Context, *leasehold.Task[string]) (string, error) {
		return func(ctx context.Context, _ *leasehold.Task[string]) (string, error) {
			kid := workflow.InvokeAsync[int](ctx, "kid", workflow.Child{Kind: kind, Payload: 21, MaxAttempts: 1})
			ok := workflow.CallbackAsync[string](ctx, "ok", time.Hour, func(_ context.Context, tok string) error {
				if kind == "stuck" {
					tokens <- tok
				}
				return nil
			})
			first, err := workflow.Race(ctx, "kid-or-ok", kid, ok)
			if err != nil {
				return "", err
			}
			if first == 1 {
				return ok.Get(ctx)
			}
			n, err := kid.Get(ctx)
			return fmt.Sprint("child ", n), err
		}
	}
	leasehold.Handle(hs, "kidwins", race("double"))
	leasehold.Handle(hs, "cbwins", race("stuck"))
	leasehold.Handle(hs, "double", func(_ context.Context, task *leasehold.Task[int]) (int, error) { return 2 * task.Payload, nil })
	leasehold.Handle(hs, "stuck", func(ctx context.Context, _ *leasehold.Task[int]) (int, error) {
		return workflow.WaitForCallback[int](ctx, "never", time.Hour, func(context.Context, string) error { return nil })
	})
	w := e.worker(t, leasehold.WorkerConfig{Handlers: hs})
	ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(3*time.Minute))
	defer cancel()
	for _, id := range []string{"kidwins", "cbwins"} {
		if _, err := c.Enqueue(ctx, leasehold.Submission{Kind: id, ID: id, MaxAttempts: 1}); err != nil {
			t.Fatal(err)
		}
	}
	e.pump(t, w, 60*time.Second, func() bool {
		return e.status(t, "cbwins") == lease.StatusWaiting && e.status(t, workflow.ChildIDIn("cbwins", "kid", 0)) == lease.StatusWaiting
	})
	if _, err := c.CompleteCallback(ctx, <-tokens, "approved"); err != nil {
		t.Fatal(err)
	}
	e.pump(t, w, 90*time.Second, func() bool {
		return e.status(t, "kidwins") == lease.StatusSucceeded && e.status(t, "cbwins") == lease.StatusSucceeded &&
			e.status(t, workflow.ChildIDIn("cbwins", "kid", 0)) == lease.StatusCancelled
	})
	for id, want := range map[string]struct{ result, steps string }{
		"kidwins": {`"child 42"`, "callback:ok children:kid race:kid-or-ok"},
		"cbwins":  {`"approved"`, "callback:ok race:kid-or-ok"},
	} {
		got := e.get(t, id)
		if string(got.Result) != want.result || stepNames(got) != want.steps {
			t.Errorf("%s: %s in attempt %d (%s), steps %q; want %s, steps %q", id, got.Result, got.Attempt, got.Error, stepNames(got), want.result, want.steps)
		}
	}
}
