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

// raceFlow is docs/workflows.md's race: an approval or a 48-hour timeout,
// whichever comes first, in one call; then a step, and a sleep of a day
// (so that a run after the decision replays the race when both have
// settled), then a step.
func raceFlow(c *counter, handed chan<- string) func(context.Context, *leasehold.Task[int]) (string, error) {
	return func(ctx context.Context, _ *leasehold.Task[int]) (string, error) {
		c.add("handler")
		ok := workflow.CallbackAsync[approval](ctx, "approval", 72*time.Hour, func(ctx context.Context, token string) error {
			c.add("submit")
			handed <- token
			return nil
		})
		timeout := workflow.SleepAsync(ctx, 48*time.Hour)
		first, err := workflow.Race(ctx, "decision", ok, timeout)
		if err != nil {
			return "", err
		}
		c.add(fmt.Sprint("decided ", first))
		outcome := "timed out"
		if first == 0 {
			a, err := ok.Get(ctx)
			if err != nil {
				return "", err
			}
			outcome = "approved by " + a.By
		}
		if _, err := workflow.Step(ctx, "notify", func(context.Context) (string, error) {
			c.add("notify " + outcome)
			return outcome, nil
		}); err != nil {
			return "", err
		}
		if err := workflow.Sleep(ctx, 24*time.Hour); err != nil {
			return "", err
		}
		return outcome, nil
	}
}

func raceHandlers(c *counter, handed chan<- string) *leasehold.Handlers {
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "approve", raceFlow(c, handed))
	return hs
}

// The approval comes first: the race records the callback's answer, then
// its outcome; the run after the day's sleep (both settled by then)
// replays the same winner; one attempt, one submit, one notify.
func TestRaceCallbackWins(t *testing.T) {
	t.Parallel()
	var c counter
	handed := make(chan string, 4)
	hs := raceHandlers(&c, handed)
	env := leaseholdtest.New(t, hs)
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "approve"})
	mustRun(t, env)
	waiting := mustTask(t, env, id)
	if waiting.Status != leasehold.StatusWaiting || waiting.Wait != "callback" {
		t.Fatalf("after the first run: %s waiting for %q (%s), want WAITING for the approval", waiting.Status, waiting.Wait, waiting.Error)
	}
	if until := waiting.WaitUntil.Sub(env.Clock().Now()); until > 48*time.Hour || until < 47*time.Hour {
		t.Errorf("the wait ends in %s, want the timer's 48h (not the callback's 72h)", until)
	}
	env.Clock().Advance(3 * time.Hour)
	if err := env.CompleteCallback(<-handed, approval{By: "ops"}); err != nil {
		t.Fatal(err)
	}
	mustRun(t, env)

	got := mustTask(t, env, id)
	if got.Status != leasehold.StatusSucceeded || string(got.Result) != `"approved by ops"` || got.Attempt != 1 {
		t.Fatalf("task: %s %s attempt %d (%s), want SUCCEEDED approved by ops in attempt 1", got.Status, got.Result, got.Attempt, got.Error)
	}
	want := []string{"sleep#1", "callback:approval", "race:decision", "notify", "sleep#2"}
	if names := got.StepNames(); !slices.Equal(names, want) {
		t.Errorf("steps %v, want %v", names, want)
	}
	for _, name := range []string{"submit", "notify approved by ops"} {
		if n := c.get(name); n != 1 {
			t.Errorf("%s ran %d times, want once", name, n)
		}
	}
	if n := c.get("notify timed out"); n != 0 {
		t.Errorf("the timer's branch ran %d times after the callback won", n)
	}
	// The history, exported after the timer's deadline too, replays
	// through the same code without running anything, to the same winner.
	env.Clock().Advance(100 * time.Hour)
	hist := mustHistory(t, env, id)
	decided := c.get("decided 0")
	ran := c.total() - c.get("handler") - decided
	if line, err := hs.Replay(t.Context(), hist); err != nil || !strings.HasPrefix(line, "ok ") {
		t.Fatalf("replay: %q, %v", line, err)
	}
	if n := c.total() - c.get("handler") - c.get("decided 0"); n != ran {
		t.Errorf("the replay ran %d functions (submit or a step's), or decided otherwise", n-ran)
	}
	if c.get("decided 0") != decided+1 || c.get("decided 1") != 0 {
		t.Errorf("the replay decided %d times for the approval and %d for the timer; want once for the approval", c.get("decided 0")-decided, c.get("decided 1"))
	}
}

// No answer within 48 hours: the timer wins, as an outcome and not a
// failure (same attempt, no retry), the callback's token answers nothing
// any more, and the runs after the decision keep it.
func TestRaceTimerWins(t *testing.T) {
	t.Parallel()
	var c counter
	handed := make(chan string, 4)
	hs := raceHandlers(&c, handed)
	env := leaseholdtest.New(t, hs)
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "approve", MaxAttempts: 1})
	mustRun(t, env)
	tok := <-handed
	env.Clock().Advance(48 * time.Hour)
	mustRun(t, env)

	got := mustTask(t, env, id)
	if got.Status != leasehold.StatusSucceeded || string(got.Result) != `"timed out"` || got.Attempt != 1 {
		t.Fatalf("task: %s %s attempt %d (%s), want SUCCEEDED timed out in attempt 1", got.Status, got.Result, got.Attempt, got.Error)
	}
	want := []string{"sleep#1", "callback:approval", "race:decision", "notify", "sleep#2"}
	if names := got.StepNames(); !slices.Equal(names, want) {
		t.Errorf("steps %v, want %v", names, want)
	}
	if n := c.get("notify timed out"); n != 1 {
		t.Errorf("notify timed out ran %d times, want once", n)
	}
	if n := c.get("submit"); n != 1 {
		t.Errorf("submit ran %d times, want once", n)
	}
	if err := env.CompleteCallback(tok, approval{By: "late"}); !errors.Is(err, leasehold.ErrBadCallback) {
		t.Errorf("a late answer: %v, want ErrBadCallback", err)
	}
	decided := c.get("decided 1")
	if line, err := hs.Replay(t.Context(), mustHistory(t, env, id)); err != nil || !strings.HasPrefix(line, "ok ") {
		t.Fatalf("replay: %q, %v", line, err)
	}
	if c.get("decided 1") != decided+1 || c.get("decided 0") != 0 {
		t.Errorf("the replay decided %d times for the timer and %d for the approval; want once for the timer", c.get("decided 1")-decided, c.get("decided 0"))
	}
}

// No outside system can make the timer win: the reason the worker
// records for it is refused as a callback's failure.
func TestRaceTimerAnswerIsReserved(t *testing.T) {
	t.Parallel()
	var c counter
	handed := make(chan string, 4)
	env := leaseholdtest.New(t, raceHandlers(&c, handed))
	mustEnqueue(t, env, leasehold.Submission{Kind: "approve"})
	mustRun(t, env)
	tok := <-handed
	for _, reason := range []string{"leasehold: the raced timer fired first"} {
		if err := env.FailCallback(tok, reason); !errors.Is(err, leasehold.ErrInvalid) {
			t.Errorf("FailCallback with the timer's reason: %v, want ErrInvalid", err)
		}
	}
}

// futuresFlow exercises the other combinators over steps and timers:
// AwaitAll of a step and two timers (1h, 2h), Any of two timers (the
// later one first in the arguments), AllSettled of a failed callback and
// a timer. It returns what each saw.
func futuresFlow(c *counter, handed chan<- string) func(context.Context, *leasehold.Task[int]) (string, error) {
	return func(ctx context.Context, _ *leasehold.Task[int]) (string, error) {
		c.add("handler")
		s := workflow.StepAsync(ctx, "lookup", func(context.Context) (int, error) {
			c.add("lookup")
			return 7, nil
		})
		t1, t2 := workflow.SleepAsync(ctx, time.Hour), workflow.SleepAsync(ctx, 2*time.Hour)
		if err := workflow.AwaitAll(ctx, "both", s, t1, t2); err != nil {
			return "", err
		}
		v, err := s.Get(ctx)
		if err != nil {
			return "", err
		}
		late, early := workflow.SleepAsync(ctx, 3*time.Hour), workflow.SleepAsync(ctx, time.Hour)
		first, err := workflow.Any(ctx, "either", late, early)
		if err != nil {
			return "", err
		}
		cb := workflow.CallbackAsync[string](ctx, "check", time.Hour, func(ctx context.Context, token string) error {
			handed <- token
			return nil
		})
		tick := workflow.SleepAsync(ctx, 10*time.Minute)
		order, err := workflow.AllSettled(ctx, "settled", cb, tick)
		if err != nil {
			return "", err
		}
		_, cbErr := cb.Get(ctx)
		var refused *workflow.CallbackFailedError
		return fmt.Sprintf("lookup %d, any %d, settled %v, refused %v", v, first, order, errors.As(cbErr, &refused)), nil
	}
}

// The combinators over steps and timers sleep until what they need has
// settled, and a callback in AllSettled is waited for with its own
// timeout, then the timer.
func TestFutureCombinators(t *testing.T) {
	t.Parallel()
	var c counter
	handed := make(chan string, 4)
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "futures", futuresFlow(&c, handed))
	env := leaseholdtest.New(t, hs)
	begin := env.Clock().Now()
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "futures", MaxAttempts: 1})
	mustRun(t, env)
	waiting := mustTask(t, env, id)
	if waiting.Status != leasehold.StatusWaiting || waiting.Wait != "callback" {
		t.Fatalf("%s waiting for %q (%s), want WAITING for the callback", waiting.Status, waiting.Wait, waiting.Error)
	}
	if d := env.Clock().Since(begin); d < 3*time.Hour {
		t.Errorf("the clock advanced %s before the callback, want the AwaitAll's 2h and the Any's 1h", d)
	}
	if until := waiting.WaitUntil.Sub(env.Clock().Now()); until != time.Hour {
		t.Errorf("the AllSettled's callback wait ends in %s, want its own timeout, 1h", until)
	}
	if err := env.FailCallback(<-handed, "no"); err != nil {
		t.Fatal(err)
	}
	mustRun(t, env)
	got := mustTask(t, env, id)
	if want := `"lookup 7, any 1, settled [0 1], refused true"`; got.Status != leasehold.StatusSucceeded || string(got.Result) != want {
		t.Fatalf("task: %s %s (%s), want SUCCEEDED %s", got.Status, got.Result, got.Error, want)
	}
	want := []string{"lookup", "sleep#1", "sleep#2", "all:both", "sleep#3", "sleep#4", "any:either", "sleep#5", "callback:check", "allsettled:settled"}
	if names := got.StepNames(); !slices.Equal(names, want) {
		t.Errorf("steps %v, want %v", names, want)
	}
	if n := c.get("lookup"); n != 1 {
		t.Errorf("lookup ran %d times, want once", n)
	}
	if line, err := hs.Replay(t.Context(), mustHistory(t, env, id)); err != nil || !strings.HasPrefix(line, "ok ") {
		t.Fatalf("replay: %q, %v", line, err)
	}
}

// A race of two callbacks neither of which has settled is a mix the
// executor cannot wait on: the task fails, naming both.
func TestRaceOfTwoCallbacksFails(t *testing.T) {
	t.Parallel()
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "two", func(ctx context.Context, _ *leasehold.Task[int]) (string, error) {
		submit := func(context.Context, string) error { return nil }
		a := workflow.CallbackAsync[string](ctx, "a", time.Hour, submit)
		b := workflow.CallbackAsync[string](ctx, "b", time.Hour, submit)
		_, err := workflow.Race(ctx, "ab", a, b)
		return "", err
	})
	env := leaseholdtest.New(t, hs)
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "two"})
	mustRun(t, env)
	got := mustTask(t, env, id)
	if got.Status != leasehold.StatusFailed || !strings.Contains(got.Error, "one callback") {
		t.Fatalf("task: %s (%s), want FAILED: a run waits for one callback", got.Status, got.Error)
	}
}

// A failed attempt after the race replays its outcome: the retry runs
// neither submit nor the race again, and sees the same winner although
// the timer has settled too by then.
func TestRaceOutcomeSurvivesARetry(t *testing.T) {
	t.Parallel()
	var c counter
	handed := make(chan string, 4)
	failed := false
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "retry", func(ctx context.Context, task *leasehold.Task[int]) (string, error) {
		ok := workflow.CallbackAsync[approval](ctx, "approval", 72*time.Hour, func(ctx context.Context, token string) error {
			c.add("submit")
			handed <- token
			return nil
		})
		first, err := workflow.Race(ctx, "decision", ok, workflow.SleepAsync(ctx, time.Hour))
		if err != nil {
			return "", err
		}
		if !failed {
			failed = true
			return "", errors.New("transient")
		}
		return fmt.Sprintf("winner %d", first), nil
	})
	env := leaseholdtest.New(t, hs)
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "retry", MaxAttempts: 3})
	mustRun(t, env)
	if err := env.CompleteCallback(<-handed, approval{By: "ops"}); err != nil {
		t.Fatal(err)
	}
	mustRun(t, env) // the race decided, the attempt fails, the retry after its backoff
	got := mustTask(t, env, id)
	if got.Status != leasehold.StatusSucceeded || string(got.Result) != `"winner 0"` || got.Attempt != 2 {
		t.Fatalf("task: %s %s attempt %d (%s), want SUCCEEDED winner 0 in attempt 2", got.Status, got.Result, got.Attempt, got.Error)
	}
	if n := c.get("submit"); n != 1 {
		t.Errorf("submit ran %d times, want once", n)
	}
}
