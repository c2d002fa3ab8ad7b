package leasehold_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/workflow"
)

// A message raced against a timer, and a child, a message and a timer in
// one AllSettled, on the stack (issue 37, point 1): "sent" gets its
// message while it sleeps in the race, which the send ends, and the
// message wins; "silent" gets none, and its 6-second timer wins; "mix"
// waits for its child, then for its message and timer; "childrace" races
// a child that waits for ever against the timer, which wins: the worker
// cancels the child at the deadline. Each outcome is recorded once, in
// attempt 1.
func TestMessageAndChildFuturesOnTheStack(t *testing.T) {
	t.Parallel()
	e := setupStack(t)
	c := newClientOn(t, e)
	const timer = 6 * time.Second
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "race", func(ctx context.Context, _ *leasehold.Task[string]) (string, error) {
		msg := workflow.ReceiveAsync[int](ctx, "orders", time.Hour)
		first, err := workflow.Race(ctx, "order-or-timeout", msg, workflow.SleepAsync(ctx, timer))
		if err != nil || first == 1 {
			return "timed out", err
		}
		n, err := msg.Get(ctx)
		return fmt.Sprint("order ", n), err
	})
	leasehold.Handle(hs, "mix", func(ctx context.Context, _ *leasehold.Task[string]) (string, error) {
		kid := workflow.InvokeAsync[int](ctx, "kid", workflow.Child{Kind: "double", Payload: 21, MaxAttempts: 1})
		msg := workflow.ReceiveAsync[int](ctx, "orders", time.Hour)
		order, err := workflow.AllSettled(ctx, "mix", kid, msg, workflow.SleepAsync(ctx, 2*time.Second))
		if err != nil {
			return "", err
		}
		k, kerr := kid.Get(ctx)
		m, merr := msg.Get(ctx)
		if kerr != nil || merr != nil {
			return "", fmt.Errorf("child %v, message %v", kerr, merr)
		}
		return fmt.Sprintf("%d %d, %d settled", k, m, len(order)), nil
	})
	leasehold.Handle(hs, "double", func(_ context.Context, task *leasehold.Task[int]) (int, error) { return 2 * task.Payload, nil })
	leasehold.Handle(hs, "childrace", func(ctx context.Context, _ *leasehold.Task[string]) (string, error) {
		kid := workflow.InvokeAsync[int](ctx, "kid", workflow.Child{Kind: "stuck", MaxAttempts: 1})
		first, err := workflow.Race(ctx, "kid-or-timeout", kid, workflow.SleepAsync(ctx, timer))
		if err != nil || first == 1 {
			return "timed out", err
		}
		return "child", nil
	})
	leasehold.Handle(hs, "stuck", func(ctx context.Context, _ *leasehold.Task[int]) (int, error) {
		return workflow.WaitForCallback[int](ctx, "never", time.Hour, func(context.Context, string) error { return nil })
	})
	w := e.worker(t, leasehold.WorkerConfig{Handlers: hs})
	ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(3*time.Minute))
	defer cancel()
	for id, kind := range map[string]string{"sent": "race", "silent": "race", "mix": "mix", "childrace": "childrace"} {
		if _, err := c.Enqueue(ctx, leasehold.Submission{Kind: kind, ID: id, MaxAttempts: 1}); err != nil {
			t.Fatal(err)
		}
	}
	e.pump(t, w, 60*time.Second, func() bool {
		st, err := e.store.GetState(ctx, "sent")
		return err == nil && st.Waiting == "orders" && e.status(t, "sent") == lease.StatusPending
	})
	for _, id := range []string{"sent", "mix"} {
		if _, err := c.Send(ctx, id, "orders", 7); err != nil {
			t.Fatalf("Send to %s: %v", id, err)
		}
	}
	e.pump(t, w, 90*time.Second, func() bool {
		return e.status(t, "sent") == lease.StatusSucceeded && e.status(t, "silent") == lease.StatusSucceeded && e.status(t, "mix") == lease.StatusSucceeded &&
			e.status(t, "childrace") == lease.StatusSucceeded
	})
	for id, want := range map[string]struct{ result, steps string }{
		"sent":   {`"order 7"`, "recv:orders#1#start sleep#1 recv:orders#1 race:order-or-timeout"},
		"silent": {`"timed out"`, "recv:orders#1#start sleep#1 race:order-or-timeout"},
		// The child, waiting for a callback, cancelled at the deadline.
		"childrace": {`"timed out"`, "sleep#1 children:kid race:kid-or-timeout"},
	} {
		got := e.get(t, id)
		if string(got.Result) != want.result || got.Attempt != 1 || stepNames(got) != want.steps {
			t.Errorf("%s: %s in attempt %d (%s), steps %q; want %s in attempt 1, steps %q", id, got.Result, got.Attempt, got.Error, stepNames(got), want.result, want.steps)
		}
	}
	if got := e.get(t, "mix"); string(got.Result) != `"42 7, 3 settled"` || got.Attempt != 1 {
		t.Errorf("mix: %s in attempt %d (%s), steps %q; want 42 7, 3 settled, in attempt 1", got.Result, got.Attempt, got.Error, stepNames(got))
	}
	if kid := e.get(t, workflow.ChildIDIn("childrace", "kid", 0)); kid.Status != lease.StatusCancelled {
		t.Errorf("the child that lost the race: %s (%s), want CANCELLED", kid.Status, kid.Error)
	}
}
