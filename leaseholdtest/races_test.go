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

// messageOrApproval races an approval by callback (72 hours) against an
// order message (48 hours), whichever comes first (issue 37, point 1:
// a message against a callback), then a step; when the approval wins, a
// receive that looks once (the message the race did not take goes to it).
func messageOrApproval(c *counter, handed chan<- string) func(context.Context, *leasehold.Task[int]) (string, error) {
	return func(ctx context.Context, _ *leasehold.Task[int]) (string, error) {
		ok := workflow.CallbackAsync[approval](ctx, "approval", 72*time.Hour, func(_ context.Context, tok string) error {
			c.add("submit")
			handed <- tok
			return nil
		})
		msg := workflow.ReceiveAsync[note](ctx, "orders", 48*time.Hour)
		first, err := workflow.Race(ctx, "first", ok, msg)
		if err != nil {
			return "", err
		}
		c.add(fmt.Sprint("decided ", first))
		var outcome string
		switch o, merr := msg.Get(ctx); {
		case first == 0:
			a, err := ok.Get(ctx)
			if err != nil {
				return "", err
			}
			if merr == nil {
				return "", errors.New("the receive that lost the race has a message")
			}
			outcome = "approved by " + a.By
		case merr == nil:
			outcome = fmt.Sprint("order ", o.N)
		case errors.Is(merr, context.DeadlineExceeded):
			outcome = "no order"
		default:
			return "", merr
		}
		if first == 1 {
			if _, err := ok.Get(ctx); !errors.As(err, new(*workflow.CallbackFailedError)) {
				return "", fmt.Errorf("the callback that lost the race: %v, want a failure", err)
			}
		}
		if _, err := workflow.Step(ctx, "notify", func(context.Context) (string, error) {
			c.add("notify " + outcome)
			return outcome, nil
		}); err != nil {
			return "", err
		}
		if first == 0 {
			late, got, err := workflow.Receive[note](ctx, "orders", 0)
			if err != nil {
				return "", err
			}
			outcome += fmt.Sprintf(", then %d (%v)", late.N, got)
		}
		return outcome, nil
	}
}

// replaySame replays id's history through hs and checks that it decided
// as the run did (decided names the counter of the winner) and ran no
// step or submit again.
func replaySame(t *testing.T, env *leaseholdtest.Env, hs *leasehold.Handlers, c *counter, id, decided string) {
	t.Helper()
	env.Clock().Advance(100 * time.Hour)
	before := c.all()
	if line, err := hs.Replay(t.Context(), mustHistory(t, env, id)); err != nil || !strings.HasPrefix(line, "ok ") {
		t.Fatalf("replay: %q, %v", line, err)
	}
	for name, n := range c.all() {
		want := before[name]
		if name == decided {
			want++
		}
		if n != want {
			t.Errorf("the replay counted %q %d times, want %d (the same winner, nothing run)", name, n-before[name], want-before[name])
		}
	}
}

// The message comes first: it ends the callback wait (the task WAITING
// for the approval, with the receive's topic in its wait note), the task
// runs again in the same attempt and takes it; the approval's token
// answers nothing any more; a replay decides the same.
func TestRaceMessageAgainstCallbackMessageWins(t *testing.T) {
	t.Parallel()
	var c counter
	handed := make(chan string, 4)
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "order", messageOrApproval(&c, handed))
	env := leaseholdtest.New(t, hs)
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "order", MaxAttempts: 1})
	mustRun(t, env)
	waiting := mustTask(t, env, id)
	if waiting.Status != leasehold.StatusWaiting || waiting.Wait != "callback" {
		t.Fatalf("after the first run: %s waiting for %q (%s), want WAITING for the approval", waiting.Status, waiting.Wait, waiting.Error)
	}
	if until := waiting.WaitUntil.Sub(env.Clock().Now()); until > 48*time.Hour || until < 47*time.Hour {
		t.Errorf("the wait ends in %s, want the receive's 48h (not the callback's 72h)", until)
	}
	tok := <-handed
	env.Clock().Advance(3 * time.Hour)
	if _, err := env.Send(id, "orders", "o1", note{N: 7}); err != nil {
		t.Fatal(err)
	}
	mustRun(t, env)
	got := mustTask(t, env, id)
	if got.Status != leasehold.StatusSucceeded || string(got.Result) != `"order 7"` || got.Attempt != 1 {
		t.Fatalf("task: %s %s attempt %d (%s), want SUCCEEDED order 7 in attempt 1", got.Status, got.Result, got.Attempt, got.Error)
	}
	want := []string{"recv:orders#1#start", "callback:approval", "recv:orders#1", "race:first", "notify"}
	if names := got.StepNames(); !slices.Equal(names, want) {
		t.Errorf("steps %v, want %v", names, want)
	}
	if err := env.CompleteCallback(tok, approval{By: "late"}); !errors.Is(err, leasehold.ErrBadCallback) {
		t.Errorf("a late answer: %v, want ErrBadCallback", err)
	}
	if n := c.get("submit"); n != 1 {
		t.Errorf("submit ran %d times, want once", n)
	}
	replaySame(t, env, hs, &c, id, "decided 1")
}

// The approval comes first: it wins; the receive that lost took nothing,
// so the message sent afterwards goes to the next receive on the topic;
// a replay decides the same.
func TestRaceMessageAgainstCallbackCallbackWins(t *testing.T) {
	t.Parallel()
	var c counter
	handed := make(chan string, 4)
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "order", messageOrApproval(&c, handed))
	env := leaseholdtest.New(t, hs)
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "order", MaxAttempts: 1})
	mustRun(t, env)
	env.Clock().Advance(3 * time.Hour)
	if err := env.CompleteCallback(<-handed, approval{By: "ops"}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Send(id, "orders", "o1", note{N: 9}); err != nil {
		t.Fatal(err)
	}
	mustRun(t, env)
	got := mustTask(t, env, id)
	if got.Status != leasehold.StatusSucceeded || string(got.Result) != `"approved by ops, then 9 (true)"` || got.Attempt != 1 {
		t.Fatalf("task: %s %s attempt %d (%s), want SUCCEEDED approved by ops, then 9, in attempt 1", got.Status, got.Result, got.Attempt, got.Error)
	}
	want := []string{"recv:orders#1#start", "callback:approval", "race:first", "notify", "recv:orders#2"}
	if names := got.StepNames(); !slices.Equal(names, want) {
		t.Errorf("steps %v, want %v", names, want)
	}
	replaySame(t, env, hs, &c, id, "decided 0")
}

// Neither within 48 hours: the receive's deadline ends the callback wait
// (as a raced timer's), and the receive, timed out, settles first.
func TestRaceMessageAgainstCallbackReceiveTimesOut(t *testing.T) {
	t.Parallel()
	var c counter
	handed := make(chan string, 4)
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "order", messageOrApproval(&c, handed))
	env := leaseholdtest.New(t, hs)
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "order", MaxAttempts: 1})
	mustRun(t, env)
	tok := <-handed
	env.Clock().Advance(48 * time.Hour)
	mustRun(t, env)
	got := mustTask(t, env, id)
	if got.Status != leasehold.StatusSucceeded || string(got.Result) != `"no order"` || got.Attempt != 1 {
		t.Fatalf("task: %s %s attempt %d (%s), want SUCCEEDED no order in attempt 1", got.Status, got.Result, got.Attempt, got.Error)
	}
	if err := env.CompleteCallback(tok, approval{By: "late"}); !errors.Is(err, leasehold.ErrBadCallback) {
		t.Errorf("a late answer: %v, want ErrBadCallback", err)
	}
	replaySame(t, env, hs, &c, id, "decided 1")
}

// childOrMessage races the child "kid" (of kind kidKind) against an
// order message (48 hours), whichever comes first (issue 37, point 1: a
// child against a message), then a step; when the child wins, a receive
// that looks once (the message the race did not take goes to it).
func childOrMessage(c *counter, kidKind string) func(context.Context, *leasehold.Task[int]) (string, error) {
	return func(ctx context.Context, _ *leasehold.Task[int]) (string, error) {
		kid := workflow.InvokeAsync[int](ctx, "kid", workflow.Child{Kind: kidKind, Payload: 4, MaxAttempts: 1})
		msg := workflow.ReceiveAsync[note](ctx, "orders", 48*time.Hour)
		first, err := workflow.Race(ctx, "kid-or-order", kid, msg)
		if err != nil {
			return "", err
		}
		c.add(fmt.Sprint("decided ", first))
		v, kerr := kid.Get(ctx)
		o, merr := msg.Get(ctx)
		var outcome string
		switch {
		case first == 0 && kerr == nil && merr != nil:
			outcome = fmt.Sprint("child ", v)
		case first == 1 && merr == nil && kerr != nil:
			outcome = fmt.Sprint("order ", o.N)
		case first == 1 && errors.Is(merr, context.DeadlineExceeded) && kerr != nil:
			outcome = "no order"
		default:
			return "", fmt.Errorf("winner %d: child %v, message %v", first, kerr, merr)
		}
		if _, err := workflow.Step(ctx, "after", func(context.Context) (string, error) { c.add("after " + outcome); return outcome, nil }); err != nil {
			return "", err
		}
		if first == 0 {
			late, got, err := workflow.Receive[note](ctx, "orders", 0)
			if err != nil {
				return "", err
			}
			outcome += fmt.Sprintf(", then %d (%v)", late.N, got)
		}
		return outcome, nil
	}
}

func childOrMessageHandlers(c *counter) *leasehold.Handlers {
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "fast", childOrMessage(c, "double"))
	leasehold.Handle(hs, "slow", childOrMessage(c, "stuck"))
	leasehold.Handle(hs, "double", func(_ context.Context, task *leasehold.Task[int]) (int, error) { return 2 * task.Payload, nil })
	leasehold.Handle(hs, "stuck", func(ctx context.Context, _ *leasehold.Task[int]) (int, error) {
		return workflow.WaitForCallback[int](ctx, "never", 96*time.Hour, func(context.Context, string) error { return nil })
	})
	return hs
}

// The message comes first: the parent waits for its child (WAITING for
// children, the receive's topic in its wait note); the send has the
// worker cancel the child, as at a raced timer's deadline, and the
// parent runs again in the same attempt, takes the message and records
// the receive first, the cancelled child after it; a replay decides the
// same.
func TestRaceChildAgainstMessageMessageWins(t *testing.T) {
	t.Parallel()
	var c counter
	hs := childOrMessageHandlers(&c)
	env := leaseholdtest.New(t, hs)
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "slow", MaxAttempts: 1})
	mustRun(t, env)
	waiting := mustTask(t, env, id)
	if waiting.Status != leasehold.StatusWaiting || waiting.Wait != "children" {
		t.Fatalf("after the first run: %s waiting for %q (%s), want WAITING for its child", waiting.Status, waiting.Wait, waiting.Error)
	}
	if until := waiting.WaitUntil.Sub(env.Clock().Now()); until > 48*time.Hour || until < 47*time.Hour {
		t.Errorf("the wait ends in %s, want the receive's 48h", until)
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
	want := []string{"recv:orders#1#start", "children:kid", "recv:orders#1", "race:kid-or-order", "after"}
	if names := got.StepNames(); !slices.Equal(names, want) {
		t.Errorf("steps %v, want %v", names, want)
	} else if race := string(got.Steps[3].Result); race != `{"order":[1,0]}` {
		t.Errorf("the race recorded %s, want the receive first, then the child", race)
	}
	if kid := mustTask(t, env, workflow.ChildIDIn(id, "kid", 0)); kid.Status != leasehold.StatusCancelled {
		t.Errorf("the child that lost: %s (%s), want CANCELLED", kid.Status, kid.Error)
	}
	replaySame(t, env, hs, &c, id, "decided 1")
}

// The child ends first: it wins; the receive that lost took nothing, so
// the message sent afterwards goes to the next receive on the topic; a
// replay decides the same.
func TestRaceChildAgainstMessageChildWins(t *testing.T) {
	t.Parallel()
	var c counter
	hs := childOrMessageHandlers(&c)
	env := leaseholdtest.New(t, hs)
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "fast", MaxAttempts: 1})
	mustRun(t, env)
	if got := mustTask(t, env, id); got.Status != leasehold.StatusSucceeded || string(got.Result) != `"child 8, then 0 (false)"` {
		t.Fatalf("task: %s %s (%s), want SUCCEEDED child 8 with no message yet", got.Status, got.Result, got.Error)
	}
	want := []string{"recv:orders#1#start", "children:kid", "race:kid-or-order", "after", "recv:orders#2"}
	if names := mustTask(t, env, id).StepNames(); !slices.Equal(names, want) {
		t.Errorf("steps %v, want %v", names, want)
	}
	replaySame(t, env, hs, &c, id, "decided 0")
}

// Neither within 48 hours: the receive's deadline cancels the child, as
// a raced timer's, and the receive, timed out, settles first.
func TestRaceChildAgainstMessageReceiveTimesOut(t *testing.T) {
	t.Parallel()
	var c counter
	hs := childOrMessageHandlers(&c)
	env := leaseholdtest.New(t, hs)
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "slow", MaxAttempts: 1})
	mustRun(t, env)
	env.Clock().Advance(48 * time.Hour)
	mustRun(t, env)
	got := mustTask(t, env, id)
	if got.Status != leasehold.StatusSucceeded || string(got.Result) != `"no order"` || got.Attempt != 1 {
		t.Fatalf("task: %s %s attempt %d (%s), want SUCCEEDED no order in attempt 1", got.Status, got.Result, got.Attempt, got.Error)
	}
	replaySame(t, env, hs, &c, id, "decided 1")
}

// orderOrCancel races receives on two topics (issue 37, point 1: messages
// on two topics), then a step, then a receive on the topic that lost (the
// message the race did not take goes to it).
func orderOrCancel(c *counter) func(context.Context, *leasehold.Task[int]) (string, error) {
	return func(ctx context.Context, _ *leasehold.Task[int]) (string, error) {
		order := workflow.ReceiveAsync[note](ctx, "orders", 48*time.Hour)
		cancel := workflow.ReceiveAsync[note](ctx, "cancels", 48*time.Hour)
		first, err := workflow.Race(ctx, "order-or-cancel", order, cancel)
		if err != nil {
			return "", err
		}
		c.add(fmt.Sprint("decided ", first))
		won, lost, topic := order, cancel, "cancels"
		if first == 1 {
			won, lost, topic = cancel, order, "orders"
		}
		m, err := won.Get(ctx)
		if err != nil {
			return "", err
		}
		if _, err := lost.Get(ctx); err == nil {
			return "", errors.New("the receive that lost the race has a message")
		}
		outcome := fmt.Sprintf("%d on %s", m.N, []string{"orders", "cancels"}[first])
		if _, err := workflow.Step(ctx, "after", func(context.Context) (string, error) { c.add("after " + outcome); return outcome, nil }); err != nil {
			return "", err
		}
		late, got, err := workflow.Receive[note](ctx, topic, 24*time.Hour)
		if err != nil {
			return "", err
		}
		return outcome + fmt.Sprintf(", then %d (%v)", late.N, got), nil
	}
}

// Whichever topic's message comes first wins: the task sleeps waiting on
// both topics, a send on either wakes it (not at the receives' next look,
// an hour on), the message of the other topic stays for the next receive
// on it, and a replay decides the same.
func TestRaceOfTwoTopics(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		first, second, want, decided string
	}{
		{"cancels", "orders", `"2 on cancels, then 1 (true)"`, "decided 1"},
		{"orders", "cancels", `"1 on orders, then 2 (true)"`, "decided 0"},
	} {
		t.Run(c.first, func(t *testing.T) {
			t.Parallel()
			var cnt counter
			hs := leasehold.NewHandlers()
			leasehold.Handle(hs, "order", orderOrCancel(&cnt))
			env := leaseholdtest.New(t, hs)
			id := mustEnqueue(t, env, leasehold.Submission{Kind: "order", MaxAttempts: 1})
			mustRun(t, env)
			if got := mustTask(t, env, id); got.Status != leasehold.StatusPending {
				t.Fatalf("after the first run: %s (%s), want PENDING in the race", got.Status, got.Error)
			}
			env.Clock().Advance(time.Minute)
			n := map[string]int{"orders": 1, "cancels": 2}
			if _, err := env.Send(id, c.first, "m1", note{N: n[c.first]}); err != nil {
				t.Fatal(err)
			}
			mustRun(t, env)
			if got := mustTask(t, env, id); got.Status != leasehold.StatusPending || !got.RunAt.After(env.Clock().Now()) {
				t.Fatalf("after the first message: %s due %v (%s %s), want PENDING in its last receive", got.Status, got.RunAt, got.Result, got.Error)
			}
			if steps := mustTask(t, env, id).StepNames(); !slices.Contains(steps, "race:order-or-cancel") {
				t.Fatalf("after the first message: steps %v, want the race decided (a send on %s wakes the task)", steps, c.first)
			}
			if _, err := env.Send(id, c.second, "m2", note{N: n[c.second]}); err != nil {
				t.Fatal(err)
			}
			mustRun(t, env)
			got := mustTask(t, env, id)
			if got.Status != leasehold.StatusSucceeded || string(got.Result) != c.want || got.Attempt != 1 {
				t.Fatalf("task: %s %s attempt %d (%s), want SUCCEEDED %s in attempt 1", got.Status, got.Result, got.Attempt, got.Error, c.want)
			}
			replaySame(t, env, hs, &cnt, id, c.decided)
		})
	}
}

// kidToken is a child's callback token, handed out with the child's
// payload.
type kidToken struct {
	n   int
	tok string
}

// twoChildren races, as kind (Race or Any), two children that each wait
// for a callback (issue 37, point 1: two children, which ended first),
// and returns the winner's value and what the loser's Get says.
func twoChildren(c *counter, any bool) func(context.Context, *leasehold.Task[int]) (string, error) {
	return func(ctx context.Context, _ *leasehold.Task[int]) (string, error) {
		a := workflow.InvokeAsync[int](ctx, "a", workflow.Child{Kind: "answered", Payload: 1, MaxAttempts: 1})
		b := workflow.InvokeAsync[int](ctx, "b", workflow.Child{Kind: "answered", Payload: 2, MaxAttempts: 1})
		race := workflow.Race
		if any {
			race = workflow.Any
		}
		first, err := race(ctx, "a-or-b", a, b)
		if err != nil {
			return "", err
		}
		c.add(fmt.Sprint("decided ", first))
		won, lost := a, b
		if first == 1 {
			won, lost = b, a
		}
		v, err := won.Get(ctx)
		if err != nil {
			return "", err
		}
		_, lerr := lost.Get(ctx)
		return fmt.Sprintf("%d from %d, the other: %v", v, first, lerr != nil), nil
	}
}

func twoChildrenHandlers(c *counter, tokens chan<- kidToken) *leasehold.Handlers {
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "race", twoChildren(c, false))
	leasehold.Handle(hs, "any", twoChildren(c, true))
	leasehold.Handle(hs, "answered", func(ctx context.Context, task *leasehold.Task[int]) (int, error) {
		v, err := workflow.WaitForCallback[int](ctx, "answer", 96*time.Hour, func(_ context.Context, tok string) error {
			tokens <- kidToken{task.Payload, tok}
			return nil
		})
		return v * task.Payload, err
	})
	return hs
}

// takeTokens reads the two children's tokens, by payload.
func takeTokens(t *testing.T, tokens <-chan kidToken) map[int]string {
	t.Helper()
	got := map[int]string{}
	for range 2 {
		select {
		case k := <-tokens:
			got[k.n] = k.tok
		default:
			t.Fatalf("the children handed out %d tokens, want 2", len(got))
		}
	}
	return got
}

// Two children raced: the one that ends first wins, whichever it is; the
// worker that hears of its end cancels the other, and the parent runs
// again once it has ended, in the same attempt; a replay decides the same.
func TestRaceOfTwoChildren(t *testing.T) {
	t.Parallel()
	for _, first := range []int{1, 2} {
		t.Run(fmt.Sprint("child ", first), func(t *testing.T) {
			t.Parallel()
			var c counter
			tokens := make(chan kidToken, 4)
			hs := twoChildrenHandlers(&c, tokens)
			env := leaseholdtest.New(t, hs)
			id := mustEnqueue(t, env, leasehold.Submission{Kind: "race", MaxAttempts: 1})
			mustRun(t, env)
			if got := mustTask(t, env, id); got.Status != leasehold.StatusWaiting || got.Wait != "children" {
				t.Fatalf("after the first run: %s waiting for %q (%s), want WAITING for its children", got.Status, got.Wait, got.Error)
			}
			toks := takeTokens(t, tokens)
			env.Clock().Advance(time.Minute)
			if err := env.CompleteCallback(toks[first], 10); err != nil {
				t.Fatal(err)
			}
			mustRun(t, env)
			got := mustTask(t, env, id)
			want := fmt.Sprintf(`"%d from %d, the other: true"`, 10*first, first-1)
			if got.Status != leasehold.StatusSucceeded || string(got.Result) != want || got.Attempt != 1 {
				t.Fatalf("task: %s %s attempt %d (%s), want SUCCEEDED %s in attempt 1", got.Status, got.Result, got.Attempt, got.Error, want)
			}
			other := map[int]string{1: "b", 2: "a"}[first]
			if kid := mustTask(t, env, workflow.ChildIDIn(id, other, 0)); kid.Status != leasehold.StatusCancelled {
				t.Errorf("the child that lost: %s (%s), want CANCELLED", kid.Status, kid.Error)
			}
			if err := env.CompleteCallback(toks[3-first], 10); !errors.Is(err, leasehold.ErrBadCallback) {
				t.Errorf("the loser's late answer: %v, want ErrBadCallback", err)
			}
			replaySame(t, env, hs, &c, id, fmt.Sprint("decided ", first-1))
		})
	}
}

// In an Any, a child that fails first does not end the wait: the other
// goes on, and wins when it succeeds.
func TestAnyOfTwoChildrenSkipsAFailure(t *testing.T) {
	t.Parallel()
	var c counter
	tokens := make(chan kidToken, 4)
	hs := twoChildrenHandlers(&c, tokens)
	env := leaseholdtest.New(t, hs)
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "any", MaxAttempts: 1})
	mustRun(t, env)
	toks := takeTokens(t, tokens)
	if err := env.FailCallback(toks[1], "refused"); err != nil {
		t.Fatal(err)
	}
	mustRun(t, env)
	if got := mustTask(t, env, id); got.Status != leasehold.StatusWaiting {
		t.Fatalf("after the first child failed: %s (%s), want still WAITING for the other", got.Status, got.Error)
	}
	if kid := mustTask(t, env, workflow.ChildIDIn(id, "b", 0)); kid.Status != leasehold.StatusWaiting {
		t.Fatalf("the other child: %s (%s), want still WAITING for its answer", kid.Status, kid.Error)
	}
	env.Clock().Advance(time.Minute)
	if err := env.CompleteCallback(toks[2], 10); err != nil {
		t.Fatal(err)
	}
	mustRun(t, env)
	got := mustTask(t, env, id)
	if want := `"20 from 1, the other: true"`; got.Status != leasehold.StatusSucceeded || string(got.Result) != want {
		t.Fatalf("task: %s %s (%s), want SUCCEEDED %s", got.Status, got.Result, got.Error, want)
	}
	replaySame(t, env, hs, &c, id, "decided 1")
}

// A message sent while the task runs, after the race's inbox wait and
// before its suspension (here, by the handler itself, as it returns the
// race's wait), finds the task RUNNING: its message form comes back and
// ends the callback wait once the task has suspended, and the message
// wins, in the same attempt.
func TestRaceMessageAgainstCallbackSentWhileSuspending(t *testing.T) {
	t.Parallel()
	var c counter
	handed := make(chan string, 4)
	hs := leasehold.NewHandlers()
	var env *leaseholdtest.Env
	inner := messageOrApproval(&c, handed)
	leasehold.Handle(hs, "order", func(ctx context.Context, task *leasehold.Task[int]) (string, error) {
		out, err := inner(ctx, task)
		if err != nil && c.get("sent") == 0 {
			c.add("sent")
			if _, serr := env.Send(task.ID, "orders", "o1", note{N: 5}); serr != nil {
				return "", serr
			}
		}
		return out, err
	})
	env = leaseholdtest.New(t, hs)
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "order", MaxAttempts: 1})
	mustRun(t, env)
	if got := mustTask(t, env, id); got.Status == leasehold.StatusWaiting {
		env.Clock().Advance(5 * time.Second) // the message form's delay
		mustRun(t, env)
	}
	got := mustTask(t, env, id)
	if got.Status != leasehold.StatusSucceeded || string(got.Result) != `"order 5"` || got.Attempt != 1 {
		t.Fatalf("task: %s %s attempt %d (%s), want SUCCEEDED order 5 in attempt 1", got.Status, got.Result, got.Attempt, got.Error)
	}
	want := []string{"recv:orders#1#start", "callback:approval", "recv:orders#1", "race:first", "notify"}
	if names := got.StepNames(); !slices.Equal(names, want) {
		t.Errorf("steps %v, want %v", names, want)
	}
}

// A race of more receives beside a callback than its wait's note can
// name fails the task, saying so, rather than suspending a wait that no
// message could end.
func TestRaceOfTooManyReceivesBesideACallbackFails(t *testing.T) {
	t.Parallel()
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "many", func(ctx context.Context, _ *leasehold.Task[int]) (string, error) {
		fs := []workflow.Awaitable{workflow.CallbackAsync[int](ctx, "ok", time.Hour, func(context.Context, string) error { return nil })}
		for i := range 60 {
			fs = append(fs, workflow.ReceiveAsync[int](ctx, fmt.Sprintf("a-topic-with-a-long-name-num-%03d", i), time.Hour))
		}
		_, err := workflow.Race(ctx, "many", fs...)
		return "", err
	})
	env := leaseholdtest.New(t, hs)
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "many", MaxAttempts: 1})
	mustRun(t, env)
	if got := mustTask(t, env, id); got.Status != leasehold.StatusFailed || !strings.Contains(got.Error, "races 60 receives beside a callback or children") {
		t.Fatalf("task: %s (%s), want FAILED saying the receives do not fit", got.Status, got.Error)
	}
}
