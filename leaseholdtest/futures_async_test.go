package leaseholdtest_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/workflow"
)

// messageRace is "a message or a 48-hour timeout, whichever comes
// first" (issue 37, point 1): ReceiveAsync raced against SleepAsync,
// then a step; when the timer wins, a receive that looks once (the
// message the race did not take goes to it).
func messageRace(c *counter) func(context.Context, *leasehold.Task[int]) (string, error) {
	return func(ctx context.Context, _ *leasehold.Task[int]) (string, error) {
		msg := workflow.ReceiveAsync[note](ctx, "orders", 72*time.Hour)
		timeout := workflow.SleepAsync(ctx, 48*time.Hour)
		first, err := workflow.Race(ctx, "order-or-timeout", msg, timeout)
		if err != nil {
			return "", err
		}
		c.add(fmt.Sprint("decided ", first))
		outcome := "timed out"
		if first == 0 {
			o, err := msg.Get(ctx)
			if err != nil {
				return "", err
			}
			outcome = fmt.Sprint("order ", o.N)
		} else if _, err := msg.Get(ctx); err == nil {
			return "", errors.New("the receive that lost the race has a message")
		}
		if _, err := workflow.Step(ctx, "notify", func(context.Context) (string, error) {
			c.add("notify " + outcome)
			return outcome, nil
		}); err != nil {
			return "", err
		}
		if first == 1 {
			late, ok, err := workflow.Receive[note](ctx, "orders", 0)
			if err != nil {
				return "", err
			}
			outcome += fmt.Sprintf(", then %d (%v)", late.N, ok)
		}
		return outcome, nil
	}
}

// The message comes first: the race records the receive where it took
// the message, then its outcome; the task sleeps until then (a receiving
// task that the send wakes), and a replay of its history after the
// timer's deadline decides the same, running nothing.
func TestRaceMessageAgainstTimerMessageWins(t *testing.T) {
	t.Parallel()
	var c counter
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "order", messageRace(&c))
	env := leaseholdtest.New(t, hs)
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "order", MaxAttempts: 1})
	mustRun(t, env)
	waiting := mustTask(t, env, id)
	if waiting.Status != leasehold.StatusPending || !strings.Contains(waiting.Error, "order-or-timeout") {
		t.Fatalf("after the first run: %s (%s), want PENDING in the race", waiting.Status, waiting.Error)
	}
	env.Clock().Advance(3 * time.Hour)
	if _, err := env.Send(id, "orders", "o1", note{N: 7}); err != nil {
		t.Fatal(err)
	}
	mustRun(t, env)
	got := mustTask(t, env, id)
	if got.Status != leasehold.StatusSucceeded || string(got.Result) != `"order 7"` || got.Attempt != 1 {
		t.Fatalf("task: %s %s attempt %d (%s), want SUCCEEDED order 7 in attempt 1", got.Status, got.Result, got.Attempt, got.Error)
	}
	want := []string{"recv:orders#1#start", "sleep#1", "recv:orders#1", "race:order-or-timeout", "notify"}
	if names := got.StepNames(); !slices.Equal(names, want) {
		t.Errorf("steps %v, want %v", names, want)
	}
	env.Clock().Advance(100 * time.Hour)
	ran := c.get("notify order 7")
	if line, err := hs.Replay(t.Context(), mustHistory(t, env, id)); err != nil || !strings.HasPrefix(line, "ok ") {
		t.Fatalf("replay: %q, %v", line, err)
	}
	if c.get("notify order 7") != ran || c.get("decided 1") != 0 || c.get("decided 0") != 2 {
		t.Errorf("the replay ran notify %d more times, decided for the timer %d times; want the same winner, nothing run", c.get("notify order 7")-ran, c.get("decided 1"))
	}
}

// No message within 48 hours: the timer wins, and the receive that lost
// took nothing: the message sent since goes to the next receive on the
// topic, numbered after it.
func TestRaceMessageAgainstTimerTimerWins(t *testing.T) {
	t.Parallel()
	var c counter
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "order", messageRace(&c))
	env := leaseholdtest.New(t, hs)
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "order", MaxAttempts: 1})
	mustRun(t, env)
	env.Clock().Advance(48 * time.Hour)
	if _, err := env.Send(id, "orders", "o1", note{N: 9}); err != nil {
		t.Fatal(err)
	}
	mustRun(t, env)
	got := mustTask(t, env, id)
	if got.Status != leasehold.StatusSucceeded || string(got.Result) != `"timed out, then 9 (true)"` || got.Attempt != 1 {
		t.Fatalf("task: %s %s attempt %d (%s), want SUCCEEDED timed out, then 9, in attempt 1", got.Status, got.Result, got.Attempt, got.Error)
	}
	want := []string{"recv:orders#1#start", "sleep#1", "race:order-or-timeout", "notify", "recv:orders#2"}
	if names := got.StepNames(); !slices.Equal(names, want) {
		t.Errorf("steps %v, want %v", names, want)
	}
	if line, err := hs.Replay(t.Context(), mustHistory(t, env, id)); err != nil || !strings.HasPrefix(line, "ok ") {
		t.Fatalf("replay: %q, %v", line, err)
	}
	if n := c.get("notify timed out"); n != 1 {
		t.Errorf("notify ran %d times, want once", n)
	}
}

// mixFlow waits, in one AllSettled, for a step, a timer, a child, a
// message and a callback; it returns the settle order and every value.
func mixFlow(c *counter, handed chan<- string) func(context.Context, *leasehold.Task[int]) (string, error) {
	return func(ctx context.Context, _ *leasehold.Task[int]) (string, error) {
		s := workflow.StepAsync(ctx, "lookup", func(context.Context) (int, error) { c.add("lookup"); return 1, nil })
		tick := workflow.SleepAsync(ctx, 30*time.Hour)
		kid := workflow.InvokeAsync[int](ctx, "kid", workflow.Child{Kind: "double", Payload: 21, MaxAttempts: 1})
		msg := workflow.ReceiveAsync[note](ctx, "orders", 24*time.Hour)
		cb := workflow.CallbackAsync[approval](ctx, "approval", 12*time.Hour, func(_ context.Context, tok string) error {
			c.add("submit")
			handed <- tok
			return nil
		})
		order, err := workflow.AllSettled(ctx, "mix", s, tick, kid, msg, cb)
		if err != nil {
			return "", err
		}
		v, _ := s.Get(ctx)
		k, kerr := kid.Get(ctx)
		m, merr := msg.Get(ctx)
		a, aerr := cb.Get(ctx)
		if kerr != nil || merr != nil || aerr != nil {
			return "", fmt.Errorf("child %v, message %v, callback %v", kerr, merr, aerr)
		}
		return fmt.Sprintf("%v: %d %d %d %s", order, v, k, m.N, a.By), nil
	}
}

// AllSettled over a step, a timer, a child, a message and a callback
// waits for each in turn (the callback, then the child, then the timer),
// records each where it settled and the settle order once (those settled
// while it waited first, in the order recorded, then the step and the
// timer, in argument order); a replay of
// the history sees the same outcome and runs nothing.
func TestAllSettledOfEveryKind(t *testing.T) {
	t.Parallel()
	var c counter
	handed := make(chan string, 4)
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "mix", mixFlow(&c, handed))
	leasehold.Handle(hs, "double", func(_ context.Context, task *leasehold.Task[int]) (int, error) {
		c.add("double")
		return task.Payload * 2, nil
	})
	env := leaseholdtest.New(t, hs)
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "mix", MaxAttempts: 1})
	mustRun(t, env)
	if got := mustTask(t, env, id); got.Status != leasehold.StatusWaiting || got.Wait != "callback" {
		t.Fatalf("after the first run: %s waiting for %q (%s), want WAITING for the callback", got.Status, got.Wait, got.Error)
	}
	if _, err := env.Send(id, "orders", "o1", note{N: 5}); err != nil {
		t.Fatal(err)
	}
	if err := env.CompleteCallback(<-handed, approval{By: "ops"}); err != nil {
		t.Fatal(err)
	}
	mustRun(t, env) // the message is taken, the child spawned and run, then the timer
	got := mustTask(t, env, id)
	if want := `"[4 3 2 0 1]: 1 42 5 ops"`; got.Status != leasehold.StatusSucceeded || string(got.Result) != want {
		t.Fatalf("task: %s %s (%s), want SUCCEEDED %s", got.Status, got.Result, got.Error, want)
	}
	want := []string{"lookup", "sleep#1", "recv:orders#1#start", "callback:approval", "recv:orders#1", "children:kid", "allsettled:mix"}
	if names := got.StepNames(); !slices.Equal(names, want) {
		t.Errorf("steps %v, want %v", names, want)
	}
	for _, name := range []string{"lookup", "submit", "double"} {
		if n := c.get(name); n != 1 {
			t.Errorf("%s ran %d times, want once", name, n)
		}
	}
	if line, err := hs.Replay(t.Context(), mustHistory(t, env, id)); err != nil || !strings.HasPrefix(line, "ok ") {
		t.Fatalf("replay: %q, %v", line, err)
	}
	if n := c.get("lookup") + c.get("submit"); n != 2 {
		t.Errorf("the replay ran lookup or submit again (%d in all)", n)
	}
}

// A race that a settled step decides never starts the child it raced; a
// child raced against a callback is a mix the store cannot wait on, and
// the task fails saying why, rather than waiting for the child alone.
func TestRaceWithAChild(t *testing.T) {
	t.Parallel()
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "quick", func(ctx context.Context, _ *leasehold.Task[int]) (string, error) {
		kid := workflow.InvokeAsync[int](ctx, "kid", workflow.Child{Kind: "double", Payload: 1})
		cached := workflow.StepAsync(ctx, "cached", func(context.Context) (int, error) { return 5, nil })
		first, err := workflow.Race(ctx, "fast", kid, cached)
		if err != nil {
			return "", err
		}
		_, kerr := kid.Get(ctx)
		return fmt.Sprintf("winner %d, child: %v", first, kerr != nil), nil
	})
	leasehold.Handle(hs, "timed", func(ctx context.Context, _ *leasehold.Task[int]) (string, error) {
		kid := workflow.InvokeAsync[int](ctx, "kid", workflow.Child{Kind: "double", Payload: 1})
		_, err := workflow.Race(ctx, "slow", kid, workflow.CallbackAsync[int](ctx, "ok", time.Hour, func(context.Context, string) error { return nil }), workflow.SleepAsync(ctx, time.Minute))
		return "", err
	})
	leasehold.Handle(hs, "double", func(_ context.Context, task *leasehold.Task[int]) (int, error) { return task.Payload * 2, nil })
	env := leaseholdtest.New(t, hs)
	quick := mustEnqueue(t, env, leasehold.Submission{Kind: "quick"})
	timed := mustEnqueue(t, env, leasehold.Submission{Kind: "timed"})
	mustRun(t, env)
	if got := mustTask(t, env, quick); got.Status != leasehold.StatusSucceeded || string(got.Result) != `"winner 1, child: true"` {
		t.Errorf("quick: %s %s (%s), want SUCCEEDED winner 1 with the child's Get failing", got.Status, got.Result, got.Error)
	}
	if _, err := env.Task(workflow.ChildIDIn(quick, "kid", 0)); !errors.Is(err, leasehold.ErrNotFound) {
		t.Errorf("the child of the race the step won: %v, want never created", err)
	}
	if got := mustTask(t, env, timed); got.Status != leasehold.StatusFailed || !strings.Contains(got.Error, "races the child \"kid\" against a callback with more beside them") {
		t.Errorf("timed: %s (%s), want FAILED saying a child cannot be raced against a callback and a timer yet", got.Status, got.Error)
	}
}

// The parent's cancel reaches a child it waits for through InvokeAsync,
// as Invoke's; the future's Get returns the child's typed result.
func TestInvokeAsync(t *testing.T) {
	t.Parallel()
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "parent", func(ctx context.Context, task *leasehold.Task[int]) (int, error) {
		kid := workflow.InvokeAsync[int](ctx, "calc", workflow.Child{Kind: task.Kind[len("parent"):] + "child", Payload: task.Payload, MaxAttempts: 1})
		v, err := kid.Get(ctx)
		return v + 1, err
	})
	leasehold.Handle(hs, "parentwait", func(ctx context.Context, task *leasehold.Task[int]) (int, error) {
		kid := workflow.InvokeAsync[int](ctx, "calc", workflow.Child{Kind: "waitchild", Payload: task.Payload, MaxAttempts: 1})
		if err := workflow.AwaitAll(ctx, "all", kid); err != nil {
			return 0, err
		}
		return kid.Get(ctx)
	})
	leasehold.Handle(hs, "child", func(_ context.Context, task *leasehold.Task[int]) (int, error) { return task.Payload * 2, nil })
	leasehold.Handle(hs, "waitchild", func(ctx context.Context, _ *leasehold.Task[int]) (int, error) {
		return workflow.WaitForCallback[int](ctx, "answer", time.Hour, func(context.Context, string) error { return nil })
	})
	env := leaseholdtest.New(t, hs)
	typed := mustEnqueue(t, env, leasehold.Submission{Kind: "parent", Payload: 20})
	cancelled := mustEnqueue(t, env, leasehold.Submission{Kind: "parentwait", Payload: 1})
	mustRun(t, env)
	if got := mustTask(t, env, typed); got.Status != leasehold.StatusSucceeded || string(got.Result) != "41" {
		t.Errorf("parent: %s %s (%s), want SUCCEEDED 41", got.Status, got.Result, got.Error)
	}
	kidID := workflow.ChildIDIn(cancelled, "calc", 0)
	if kid := mustTask(t, env, kidID); kid.Status != leasehold.StatusWaiting {
		t.Fatalf("child: %s, want WAITING for its callback", kid.Status)
	}
	if _, err := env.Client().Cancel(t.Context(), cancelled); err != nil {
		t.Fatal(err)
	}
	mustRun(t, env)
	if p := mustTask(t, env, cancelled); p.Status != leasehold.StatusCancelled {
		t.Errorf("parent: %s, want CANCELLED", p.Status)
	}
	if kid := mustTask(t, env, kidID); kid.Status != leasehold.StatusCancelled {
		t.Errorf("child: %s (%q), want CANCELLED with its parent", kid.Status, kid.Error)
	}
}

// childRace races the child "kid" (of kind kidKind) against a one-hour
// timer, then runs a step and returns who won.
func childRace(c *counter, kidKind string) func(context.Context, *leasehold.Task[int]) (string, error) {
	return func(ctx context.Context, _ *leasehold.Task[int]) (string, error) {
		kid := workflow.InvokeAsync[int](ctx, "kid", workflow.Child{Kind: kidKind, Payload: 4, MaxAttempts: 1})
		first, err := workflow.Race(ctx, "kid-or-timeout", kid, workflow.SleepAsync(ctx, time.Hour))
		if err != nil {
			return "", err
		}
		c.add(fmt.Sprint("decided ", first))
		outcome := "timed out"
		if first == 0 {
			v, err := kid.Get(ctx)
			if err != nil {
				return "", err
			}
			outcome = fmt.Sprint("child ", v)
		} else if _, err := kid.Get(ctx); err == nil {
			return "", errors.New("the child that lost the race has a result")
		}
		return workflow.Step(ctx, "after", func(context.Context) (string, error) { c.add("after " + outcome); return outcome, nil })
	}
}

// A child raced against a timer (issue 37, point 1): the parent waits
// for the child until the timer's deadline. A child that ends first wins;
// one still running at the deadline is cancelled by the worker, which
// then runs the parent again, as the same attempt, and the timer wins (no
// failure). Each outcome is recorded once and replays alike.
func TestRaceOfAChildAndATimer(t *testing.T) {
	t.Parallel()
	var c counter
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "fast", childRace(&c, "double"))
	leasehold.Handle(hs, "slow", childRace(&c, "stuck"))
	leasehold.Handle(hs, "double", func(_ context.Context, task *leasehold.Task[int]) (int, error) { return 2 * task.Payload, nil })
	leasehold.Handle(hs, "stuck", func(ctx context.Context, _ *leasehold.Task[int]) (int, error) {
		return workflow.WaitForCallback[int](ctx, "never", 24*time.Hour, func(context.Context, string) error { return nil })
	})
	env := leaseholdtest.New(t, hs)
	fast := mustEnqueue(t, env, leasehold.Submission{Kind: "fast", MaxAttempts: 1})
	slow := mustEnqueue(t, env, leasehold.Submission{Kind: "slow", MaxAttempts: 1})
	mustRun(t, env)
	waiting := mustTask(t, env, slow)
	if waiting.Status != leasehold.StatusWaiting || waiting.Wait != "children" {
		t.Fatalf("slow after the first run: %s waiting for %q (%s), want WAITING for its child", waiting.Status, waiting.Wait, waiting.Error)
	}
	if until := waiting.WaitUntil.Sub(env.Clock().Now()); until > time.Hour || until < 59*time.Minute {
		t.Errorf("the wait ends in %s, want the timer's hour", until)
	}
	env.Clock().Advance(time.Hour)
	mustRun(t, env)
	for id, want := range map[string]struct{ result, race string }{
		fast: {`"child 8"`, "[0]"},
		slow: {`"timed out"`, "[1,0]"},
	} {
		got := mustTask(t, env, id)
		if got.Status != leasehold.StatusSucceeded || string(got.Result) != want.result || got.Attempt != 1 {
			t.Errorf("%s: %s %s attempt %d (%s), want SUCCEEDED %s in attempt 1", id, got.Status, got.Result, got.Attempt, got.Error, want.result)
		}
		if names := got.StepNames(); !slices.Equal(names, []string{"sleep#1", "children:kid", "race:kid-or-timeout", "after"}) {
			t.Errorf("%s: steps %v, want sleep#1 children:kid race:kid-or-timeout after", id, names)
		} else if race := string(got.Steps[2].Result); race != `{"order":`+want.race+`}` {
			t.Errorf("%s: the race recorded %s, want the order %s", id, race, want.race)
		}
		if line, err := hs.Replay(t.Context(), mustHistory(t, env, id)); err != nil || !strings.HasPrefix(line, "ok ") {
			t.Fatalf("replay of %s: %q, %v", id, line, err)
		}
	}
	if kid := mustTask(t, env, workflow.ChildIDIn(slow, "kid", 0)); kid.Status != leasehold.StatusCancelled {
		t.Errorf("the child that lost: %s (%s), want CANCELLED at the timer's deadline", kid.Status, kid.Error)
	}
	for _, name := range []string{"after child 8", "after timed out"} {
		if n := c.get(name); n != 1 {
			t.Errorf("%s ran %d times, want once", name, n)
		}
	}
}
