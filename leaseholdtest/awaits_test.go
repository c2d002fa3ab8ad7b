package leaseholdtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/workflow"
)

type approval struct {
	By string `json:"by"`
}

// orderFlow is the handler docs/workflows.md shows: a step, a fan-out of
// n children, a step, an approval by callback, a sleep of three days, a
// second fan-out, a step. Every await suspends the task; every run after
// one replays what came before it.
func orderFlow(c *counter, handed chan<- string) func(context.Context, *leasehold.Task[int]) (string, error) {
	step := func(ctx context.Context, name string, v int) (int, error) {
		return workflow.Step(ctx, name, func(context.Context) (int, error) {
			c.add("step " + name)
			return v, nil
		})
	}
	return func(ctx context.Context, task *leasehold.Task[int]) (string, error) {
		c.add("handler")
		n, err := step(ctx, "plan", task.Payload)
		if err != nil {
			return "", err
		}
		kids := make([]workflow.Child, n)
		for i := range kids {
			kids[i] = workflow.Child{Kind: "pack", Payload: i}
		}
		packed, err := workflow.All(ctx, "pack", kids...)
		if err != nil {
			return "", err
		}
		sum := 0
		for _, o := range packed {
			var v int
			if o.Status != leasehold.StatusSucceeded || json.Unmarshal(o.Result, &v) != nil {
				return "", leasehold.Fail(fmt.Errorf("child %s ended %s: %s", o.ID, o.Status, o.Error))
			}
			sum += v
		}
		total, err := step(ctx, "total", sum)
		if err != nil {
			return "", err
		}
		ok, err := workflow.WaitForCallback[approval](ctx, "approval", 72*time.Hour, func(ctx context.Context, token string) error {
			c.add("submit")
			handed <- token
			return nil
		})
		var refused *workflow.CallbackFailedError
		if errors.As(err, &refused) {
			return "refused: " + refused.Reason, nil
		}
		if err != nil {
			return "", err
		}
		if err := workflow.Sleep(ctx, 72*time.Hour); err != nil {
			return "", err
		}
		audits, err := workflow.All(ctx, "audit", workflow.Child{Kind: "pack", Payload: 100}, workflow.Child{Kind: "pack", Payload: 200})
		if err != nil {
			return "", err
		}
		if _, err := step(ctx, "ship", len(audits)); err != nil {
			return "", err
		}
		return fmt.Sprintf("total %d approved by %s, %d audits", total, ok.By, len(audits)), nil
	}
}

func orderHandlers(c *counter, handed chan<- string) *leasehold.Handlers {
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "order", orderFlow(c, handed))
	leasehold.Handle(hs, "pack", func(ctx context.Context, task *leasehold.Task[int]) (int, error) {
		c.add("pack")
		return task.Payload, nil
	})
	return hs
}

// Any number of awaits in one handler, mixed with steps: 50 children, a
// callback, three days of sleep, 2 more children. The task ends in one
// attempt, every step and child runs once, submit is called once, and the
// fake clock skips the sleep.
func TestEnvManyAwaitsInOneHandler(t *testing.T) {
	t.Parallel()
	var c counter
	handed := make(chan string, 4)
	env := leaseholdtest.New(t, orderHandlers(&c, handed))
	env.SetMaxDeliveries(1000)
	begin := env.Clock().Now()
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "order", Payload: 50, ID: "order-1"})
	mustRun(t, env)

	waiting := mustTask(t, env, id)
	if waiting.Status != leasehold.StatusWaiting || waiting.Wait != "callback" {
		t.Fatalf("after the fan-out: %s waiting for %q (error %q), want WAITING for the approval", waiting.Status, waiting.Wait, waiting.Error)
	}
	if names := waiting.StepNames(); !slices.Equal(names, []string{"plan", "children:pack", "total"}) {
		t.Fatalf("steps while waiting for the approval: %v", names)
	}
	tok := <-handed
	if got, err := env.CallbackToken(id); err != nil || got != tok {
		t.Fatalf("CallbackToken = %q, %v; want the token submit got", got, err)
	}
	if err := env.CompleteCallback(tok, approval{By: "ops"}); err != nil {
		t.Fatal(err)
	}
	mustRun(t, env)

	got := mustTask(t, env, id)
	if want := `"total 1225 approved by ops, 2 audits"`; got.Status != leasehold.StatusSucceeded || string(got.Result) != want {
		t.Fatalf("order: %s %s (error %q), want SUCCEEDED %s", got.Status, got.Result, got.Error, want)
	}
	if got.Attempt != 1 {
		t.Errorf("attempt %d, want 1: waits hand their attempt back", got.Attempt)
	}
	wantSteps := []string{"plan", "children:pack", "total", "callback:approval", "sleep#1", "children:audit", "ship"}
	if names := got.StepNames(); !slices.Equal(names, wantSteps) {
		t.Errorf("steps %v, want %v", names, wantSteps)
	}
	for _, name := range []string{"step plan", "step total", "step ship", "submit"} {
		if n := c.get(name); n != 1 {
			t.Errorf("%s ran %d times, want once", name, n)
		}
	}
	if n := c.get("pack"); n != 52 {
		t.Errorf("children ran %d times, want 52 (50 + 2), each once", n)
	}
	// Runs: the fan-out, its end, the answer, the wake-up, the audits' end.
	if n := c.get("handler"); n != 5 {
		t.Errorf("handler ran %d times, want 5 (one per await's end, and the first)", n)
	}
	for i := range 50 {
		kid := mustTask(t, env, workflow.ChildIDIn(id, "pack", i))
		if kid.Status != leasehold.StatusSucceeded || kid.Parent != id {
			t.Fatalf("child %d: %s, parent %q", i, kid.Status, kid.Parent)
		}
	}
	if audit := mustTask(t, env, workflow.ChildIDIn(id, "audit", 1)); string(audit.Result) != "200" {
		t.Errorf("second audit child: %s %s", audit.Status, audit.Result)
	}
	if d := env.Clock().Since(begin); d < 72*time.Hour {
		t.Errorf("the fake clock advanced %s, want at least the 72h sleep", d)
	}
	if err := env.CompleteCallback(tok, approval{By: "again"}); !errors.Is(err, leasehold.ErrBadCallback) {
		t.Errorf("a second answer: %v, want ErrBadCallback", err)
	}
}

// A failed callback is the handler's to read: WaitForCallback returns a
// *CallbackFailedError, and this handler ends with a result that says so.
func TestEnvRefusedCallbackReachesTheHandler(t *testing.T) {
	t.Parallel()
	var c counter
	handed := make(chan string, 4)
	env := leaseholdtest.New(t, orderHandlers(&c, handed))
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "order", Payload: 2})
	mustRun(t, env)
	if err := env.FailCallback(<-handed, "over budget"); err != nil {
		t.Fatal(err)
	}
	mustRun(t, env)
	got := mustTask(t, env, id)
	if got.Status != leasehold.StatusSucceeded || string(got.Result) != `"refused: over budget"` {
		t.Fatalf("order: %s %s (error %q), want the refusal as its result", got.Status, got.Result, got.Error)
	}
	if n := c.get("step total"); n != 1 {
		t.Errorf("step total ran %d times, want once", n)
	}
}

// A callback that does not come in time fails the attempt; the retry
// replays the steps and the fan-out (no child runs again) and submits a
// new token; the old one is refused.
func TestEnvResumableCallbackTimesOut(t *testing.T) {
	t.Parallel()
	var c counter
	handed := make(chan string, 4)
	env := leaseholdtest.New(t, orderHandlers(&c, handed))
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "order", Payload: 3, MaxAttempts: 3})
	mustRun(t, env)
	first := <-handed
	env.Clock().Advance(73 * time.Hour)
	mustRun(t, env)
	got := mustTask(t, env, id)
	if got.Status != leasehold.StatusWaiting || got.Attempt != 2 {
		t.Fatalf("after the timeout: %s attempt %d, want WAITING again in attempt 2", got.Status, got.Attempt)
	}
	second := <-handed
	if second == first {
		t.Fatal("the retry submitted the old token")
	}
	if err := env.CompleteCallback(first, approval{By: "late"}); !errors.Is(err, leasehold.ErrBadCallback) {
		t.Errorf("the timed-out token: %v, want ErrBadCallback", err)
	}
	if err := env.CompleteCallback(second, approval{By: "ops"}); err != nil {
		t.Fatal(err)
	}
	mustRun(t, env)
	if got := mustTask(t, env, id); got.Status != leasehold.StatusSucceeded {
		t.Fatalf("order: %s (error %q)", got.Status, got.Error)
	}
	if n := c.get("pack"); n != 5 {
		t.Errorf("children ran %d times, want 5 (3 + 2): the retry replays the fan-out", n)
	}
	if n := c.get("submit"); n != 2 {
		t.Errorf("submit ran %d times, want 2 (once per attempt)", n)
	}
}

// Names are checked before anything runs.
func TestEnvAwaitNames(t *testing.T) {
	t.Parallel()
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "bad", func(ctx context.Context, task *leasehold.Task[string]) (string, error) {
		_, err := workflow.All(ctx, task.Payload, workflow.Child{Kind: "bad", Payload: "x"})
		return "", err
	})
	env := leaseholdtest.New(t, hs)
	for _, name := range []string{"", "9lives", "a/b", "x y", "abcdefghijklmnopqrstuvwxyz0123456"} {
		id := mustEnqueue(t, env, leasehold.Submission{Kind: "bad", Payload: name})
		mustRun(t, env)
		if got := mustTask(t, env, id); got.Status != leasehold.StatusFailed || got.Attempt != 1 {
			t.Errorf("await name %q: %s in attempt %d (%q), want FAILED at once", name, got.Status, got.Attempt, got.Error)
		}
	}
}
