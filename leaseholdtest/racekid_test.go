package leaseholdtest_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/workflow"
)

// kidOrApproval races a child (which waits for its own callback, so the
// test says when it ends) against an approval by callback, whichever
// comes first (issue 37: a child against a callback).
func kidOrApproval(c *counter, handed chan<- string) func(context.Context, *leasehold.Task[int]) (string, error) {
	return kidOrApprovalBy(c, handed, false)
}

// kidOrApprovalBy is kidOrApproval, with Any for Race when any is set.
func kidOrApprovalBy(c *counter, handed chan<- string, any bool) func(context.Context, *leasehold.Task[int]) (string, error) {
	race := workflow.Race
	if any {
		race = workflow.Any
	}
	return func(ctx context.Context, _ *leasehold.Task[int]) (string, error) {
		kid := workflow.InvokeAsync[int](ctx, "kid", workflow.Child{Kind: "answered", Payload: 1, MaxAttempts: 1})
		ok := workflow.CallbackAsync[int](ctx, "approval", time.Hour, func(_ context.Context, tok string) error {
			c.add("submit")
			handed <- tok
			return nil
		})
		first, err := race(ctx, "kid-or-ok", kid, ok)
		if err != nil {
			return "", err
		}
		c.add(fmt.Sprint("decided ", first))
		v, kerr := kid.Get(ctx)
		a, aerr := ok.Get(ctx)
		return fmt.Sprintf("%d: kid %d (%v), approval %d (%v)", first, v, kerr != nil, a, aerr != nil), nil
	}
}

// kidOrApprovalEnv is an Env with kidOrApproval as the kind "race" and
// its child's kind; kids gets the child's callback token, handed the
// approval's.
func kidOrApprovalEnv(t *testing.T, c *counter) (env *leaseholdtest.Env, hs *leasehold.Handlers, kids chan kidToken, handed chan string) {
	t.Helper()
	kids, handed = make(chan kidToken, 4), make(chan string, 4)
	hs = twoChildrenHandlers(c, kids)
	leasehold.Handle(hs, "kid-or-ok", kidOrApproval(c, handed))
	leasehold.Handle(hs, "kid-or-ok-any", kidOrApprovalBy(c, handed, true))
	return leaseholdtest.New(t, hs), hs, kids, handed
}

// take reads one value handed out, failing the test if none was.
func take[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	default:
		t.Fatalf("no %s handed out", what)
	}
	panic("unreachable")
}

// The child ends first: its end ends the parent's callback wait (the
// wait's note names it), the parent runs again in the same attempt,
// waits for the child as a child, and the race records the child first;
// the approval's late answer is refused; a replay decides the same.
func TestRaceChildAgainstCallbackChildWins(t *testing.T) {
	t.Parallel()
	var c counter
	env, hs, kids, handed := kidOrApprovalEnv(t, &c)
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "kid-or-ok", MaxAttempts: 1})
	mustRun(t, env)
	if got := mustTask(t, env, id); got.Status != leasehold.StatusWaiting || got.Wait != "callback" {
		t.Fatalf("after the first run: %s waiting for %q (%s), want WAITING for the approval", got.Status, got.Wait, got.Error)
	}
	kid, approval := take(t, kids, "child's token"), take(t, handed, "approval token")
	env.Clock().Advance(time.Minute)
	if err := env.CompleteCallback(kid.tok, 10); err != nil {
		t.Fatal(err)
	}
	mustRun(t, env)
	got := mustTask(t, env, id)
	if want := `"0: kid 10 (false), approval 0 (true)"`; got.Status != leasehold.StatusSucceeded || string(got.Result) != want || got.Attempt != 1 {
		t.Fatalf("task: %s %s attempt %d (%s), want SUCCEEDED %s in attempt 1", got.Status, got.Result, got.Attempt, got.Error, want)
	}
	if err := env.CompleteCallback(approval, 3); !errors.Is(err, leasehold.ErrBadCallback) {
		t.Errorf("the approval's late answer: %v, want ErrBadCallback", err)
	}
	if c.get("submit") != 1 {
		t.Errorf("the approval's token was handed out %d times, want 1", c.get("submit"))
	}
	replaySame(t, env, hs, &c, id, "decided 0")
}

// The approval comes first: the parent runs again, the race records the
// callback, and the child that lost is cancelled; its late answer is
// refused; a replay decides the same.
func TestRaceChildAgainstCallbackCallbackWins(t *testing.T) {
	t.Parallel()
	var c counter
	env, hs, kids, handed := kidOrApprovalEnv(t, &c)
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "kid-or-ok", MaxAttempts: 1})
	mustRun(t, env)
	kid, approval := take(t, kids, "child's token"), take(t, handed, "approval token")
	env.Clock().Advance(time.Minute)
	if err := env.CompleteCallback(approval, 7); err != nil {
		t.Fatal(err)
	}
	mustRun(t, env)
	got := mustTask(t, env, id)
	if want := `"1: kid 0 (true), approval 7 (false)"`; got.Status != leasehold.StatusSucceeded || string(got.Result) != want || got.Attempt != 1 {
		t.Fatalf("task: %s %s attempt %d (%s), want SUCCEEDED %s in attempt 1", got.Status, got.Result, got.Attempt, got.Error, want)
	}
	if k := mustTask(t, env, workflow.ChildIDIn(id, "kid", 0)); k.Status != leasehold.StatusCancelled {
		t.Errorf("the child that lost: %s (%s), want CANCELLED", k.Status, k.Error)
	}
	if err := env.CompleteCallback(kid.tok, 10); !errors.Is(err, leasehold.ErrBadCallback) {
		t.Errorf("the losing child's late answer: %v, want ErrBadCallback", err)
	}
	replaySame(t, env, hs, &c, id, "decided 1")
}

// The child ends while the parent is not waiting (an attempt of the
// parent that failed after the race spawned the child, its retry not
// begun): its notification ends nothing then, and the retry's suspension
// finds the child ended and does not sleep: the child wins, in that
// retry's attempt.
func TestRaceChildAgainstCallbackChildEndsBeforeTheSuspension(t *testing.T) {
	t.Parallel()
	var c counter
	kids, handed := make(chan kidToken, 4), make(chan string, 4)
	hs := twoChildrenHandlers(&c, kids)
	var env *leaseholdtest.Env
	var kidTok string // set before the Run whose second call reads it
	inner := kidOrApproval(&c, handed)
	leasehold.Handle(hs, "kid-late", func(ctx context.Context, task *leasehold.Task[int]) (string, error) {
		c.add("call")
		if c.get("call") == 2 {
			// The child is answered now, and ends while this attempt
			// fails and its retry waits.
			if err := env.CompleteCallback(kidTok, 10); err != nil {
				return "", err
			}
			return "", errors.New("an attempt that fails after its child was answered")
		}
		return inner(ctx, task)
	})
	env = leaseholdtest.New(t, hs)
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "kid-late", MaxAttempts: 3})
	mustRun(t, env)
	kidTok = take(t, kids, "child's token").tok
	env.Clock().Advance(time.Hour + time.Second) // the approval times out
	mustRun(t, env)
	if k := mustTask(t, env, workflow.ChildIDIn(id, "kid", 0)); k.Status != leasehold.StatusSucceeded {
		t.Fatalf("the child: %s (%s), want SUCCEEDED", k.Status, k.Error)
	}
	got := mustTask(t, env, id)
	third := slices.ContainsFunc(got.History, func(a leasehold.AttemptInfo) bool { return a.Attempt == 3 && a.Status == leasehold.StatusWaiting })
	if want := `"0: kid 10 (false), approval 0 (true)"`; got.Status != leasehold.StatusSucceeded || string(got.Result) != want || !third {
		t.Fatalf("task: %s %s (%s) %v, want SUCCEEDED %s after attempt 3 suspended", got.Status, got.Result, got.Error, got.History, want)
	}
}

// The child's notification of the parent lands but its answer is lost:
// the child's message comes back, finds itself told (the store says
// so), and still ends the callback wait, which had not ended.
func TestRaceChildAgainstCallbackNotifyRedelivered(t *testing.T) {
	t.Parallel()
	var c counter
	env, hs, kids, _ := kidOrApprovalEnv(t, &c)
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "kid-or-ok", MaxAttempts: 1})
	env.FailNotifies(func(waiter string) bool { return waiter == id })
	mustRun(t, env)
	kid := take(t, kids, "child's token")
	if err := env.CompleteCallback(kid.tok, 10); err != nil {
		t.Fatal(err)
	}
	mustRun(t, env)
	got := mustTask(t, env, id)
	if want := `"0: kid 10 (false), approval 0 (true)"`; got.Status != leasehold.StatusSucceeded || string(got.Result) != want || got.Attempt != 1 {
		t.Fatalf("task: %s %s attempt %d (%s), want SUCCEEDED %s in attempt 1", got.Status, got.Result, got.Attempt, got.Error, want)
	}
	replaySame(t, env, hs, &c, id, "decided 0")
}

// In an Any, a child that fails does not end the callback wait: the
// approval still wins when it comes; and a failed approval does not have
// the child cancelled: the child still wins when it succeeds.
func TestAnyChildAgainstCallbackSkipsAFailure(t *testing.T) {
	t.Parallel()
	t.Run("the child fails", func(t *testing.T) {
		t.Parallel()
		var c counter
		env, hs, kids, handed := kidOrApprovalEnv(t, &c)
		id := mustEnqueue(t, env, leasehold.Submission{Kind: "kid-or-ok-any", MaxAttempts: 1})
		mustRun(t, env)
		kid, approval := take(t, kids, "child's token"), take(t, handed, "approval token")
		if err := env.FailCallback(kid.tok, "refused"); err != nil {
			t.Fatal(err)
		}
		mustRun(t, env)
		if got := mustTask(t, env, id); got.Status != leasehold.StatusWaiting || got.Wait != "callback" {
			t.Fatalf("after the child failed: %s waiting for %q (%s), want still WAITING for the approval", got.Status, got.Wait, got.Error)
		}
		env.Clock().Advance(time.Minute)
		if err := env.CompleteCallback(approval, 7); err != nil {
			t.Fatal(err)
		}
		mustRun(t, env)
		got := mustTask(t, env, id)
		if want := `"1: kid 0 (true), approval 7 (false)"`; got.Status != leasehold.StatusSucceeded || string(got.Result) != want {
			t.Fatalf("task: %s %s (%s), want SUCCEEDED %s", got.Status, got.Result, got.Error, want)
		}
		replaySame(t, env, hs, &c, id, "decided 1")
	})
	t.Run("the approval fails", func(t *testing.T) {
		t.Parallel()
		var c counter
		env, hs, kids, handed := kidOrApprovalEnv(t, &c)
		id := mustEnqueue(t, env, leasehold.Submission{Kind: "kid-or-ok-any", MaxAttempts: 1})
		mustRun(t, env)
		kid, approval := take(t, kids, "child's token"), take(t, handed, "approval token")
		if err := env.FailCallback(approval, "no"); err != nil {
			t.Fatal(err)
		}
		mustRun(t, env)
		if k := mustTask(t, env, workflow.ChildIDIn(id, "kid", 0)); k.Status != leasehold.StatusWaiting {
			t.Fatalf("the child after the approval failed: %s (%s), want still WAITING for its answer", k.Status, k.Error)
		}
		env.Clock().Advance(time.Minute)
		if err := env.CompleteCallback(kid.tok, 10); err != nil {
			t.Fatal(err)
		}
		mustRun(t, env)
		got := mustTask(t, env, id)
		if want := `"0: kid 10 (false), approval 0 (true)"`; got.Status != leasehold.StatusSucceeded || string(got.Result) != want {
			t.Fatalf("task: %s %s (%s), want SUCCEEDED %s", got.Status, got.Result, got.Error, want)
		}
		replaySame(t, env, hs, &c, id, "decided 0")
	})
}

// The parent's cancel reaches the child raced against its callback, as
// it reaches a child it waits for.
func TestRaceChildAgainstCallbackParentCancelled(t *testing.T) {
	t.Parallel()
	var c counter
	env, _, _, _ := kidOrApprovalEnv(t, &c)
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "kid-or-ok", MaxAttempts: 1})
	mustRun(t, env)
	if _, err := env.Client().Cancel(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	mustRun(t, env)
	if got := mustTask(t, env, id); got.Status != leasehold.StatusCancelled {
		t.Fatalf("parent: %s (%s), want CANCELLED", got.Status, got.Error)
	}
	if k := mustTask(t, env, workflow.ChildIDIn(id, "kid", 0)); k.Status != leasehold.StatusCancelled {
		t.Errorf("the child raced against the parent's callback: %s (%s), want CANCELLED with its parent", k.Status, k.Error)
	}
}
