package lifecycle_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/leasehold/leasehold/internal/durable"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lifecycle"
	"github.com/leasehold/leasehold/internal/token"
)

// drainSent processes every message sent to the work queue since mark, in
// order, and returns the new mark.
func (e *env) drainSent(t *testing.T, mark int) int {
	t.Helper()
	for {
		sent := e.sqs.sentTo(workURL)
		if mark >= len(sent) {
			return mark
		}
		m := sent[mark]
		mark++
		e.exec.Process(t.Context(), nil, msg(fmt.Sprintf("s%d", mark), aws.ToString(m.MessageBody)))
	}
}

func fanInHandlers(e *env, runs *int) {
	e.handlers["parent"] = func(ctx context.Context, task lease.Task) ([]byte, error) {
		*runs++
		if r, ok := durable.WaitResultsOf(ctx); ok {
			var parts []string
			for _, c := range r.Tasks {
				parts = append(parts, fmt.Sprintf("%s=%s:%s", c.ID[len(task.ID)+1:], c.Status, c.Result))
			}
			return json.Marshal(strings.Join(parts, ","))
		}
		return nil, &durable.AwaitChildrenError{Children: []durable.Child{
			{Kind: "child", Payload: []byte(`1`)}, {Kind: "child", Payload: []byte(`2`)}, {Kind: "fails", MaxAttempts: 1},
		}}
	}
	e.handlers["child"] = func(_ context.Context, task lease.Task) ([]byte, error) { return task.Payload, nil }
	e.handlers["fails"] = func(context.Context, lease.Task) ([]byte, error) { return nil, errors.New("no luck") }
}

func TestFanOutFanInResumesOnceWithEveryChild(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	var runs int
	fanInHandlers(e, &runs)
	res := e.exec.Process(t.Context(), nil, msg("p", inline(t, "parent", "p", "", 0)))
	if !res.Ack || res.Outcome != lifecycle.OutcomeSuspended {
		t.Fatalf("parent: %+v, want acked and suspended", res)
	}
	if got := e.get(t, "p"); got.Status != lease.StatusWaiting || len(got.WaitFor) != 3 || got.Attempt != 0 {
		t.Fatalf("parent after spawn: status %s wait_for %v attempt %d", got.Status, got.WaitFor, got.Attempt)
	}
	if n := len(e.sqs.sentTo(workURL)); n != 3 {
		t.Fatalf("%d messages sent, want the 3 children", n)
	}
	// A wake token for a parent whose children have not ended (forged, or
	// a bug) must not resume it.
	e.exec.Process(t.Context(), nil, msg("forged-wake", token.Wake("p")))
	if got := e.get(t, "p"); got.Status != lease.StatusWaiting || runs != 1 {
		t.Fatalf("a wake token before the children ended: parent %s after %d runs", got.Status, runs)
	}
	e.drainSent(t, 0)
	got := e.get(t, "p")
	if got.Status != lease.StatusSucceeded || string(got.Result) != `"0=SUCCEEDED:1,1=SUCCEEDED:2,2=FAILED:"` {
		t.Fatalf("parent: %s %s", got.Status, got.Result)
	}
	if runs != 2 || got.Attempt != 1 || got.Fence != 2 {
		t.Fatalf("parent ran %d times, attempt %d fence %d; want 2 runs of attempt 1, fence 2", runs, got.Attempt, got.Fence)
	}
	// Every child's message delivered again (an at-least-once queue): the
	// parent must not resume again.
	before := len(e.sqs.sentTo(workURL))
	for i := range 3 {
		e.exec.Process(t.Context(), nil, msg(fmt.Sprintf("dup%d", i), token.Ref(durable.ChildID("p", i))))
	}
	if after := len(e.sqs.sentTo(workURL)); after != before || runs != 2 {
		t.Fatalf("duplicates sent %d tokens and ran the parent %d times", after-before, runs)
	}
}

// A worker that dies after a child finished but before the parent heard:
// the child's message comes back, and its redelivery notifies the parent.
func TestChildEndLostBeforeNotifyIsRedone(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	var runs int
	fanInHandlers(e, &runs)
	e.exec.Process(t.Context(), nil, msg("p", inline(t, "parent", "p", "", 0)))
	children := e.sqs.sentTo(workURL)
	// Finish the first child behind the worker's back: as if its worker
	// died between the finish write and the notification.
	held, err := e.store.CreateClaimed(t.Context(), lease.NewTask{ID: "p/0", Kind: "child", Payload: []byte(`1`), MaxAttempts: 3, Parent: "p"}, "ghost")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Finish(t.Context(), held.LeaseOf(), []byte(`1`)); err != nil {
		t.Fatal(err)
	}
	if got := e.get(t, "p"); len(got.Ended) != 0 {
		t.Fatalf("parent heard of a child nobody notified it of: %v", got.Ended)
	}
	// The redelivered token of child 0, then the others.
	for i, m := range children {
		e.exec.Process(t.Context(), nil, msg(fmt.Sprintf("c%d", i), aws.ToString(m.MessageBody)))
	}
	e.drainSent(t, len(children))
	if got := e.get(t, "p"); got.Status != lease.StatusSucceeded || runs != 2 {
		t.Fatalf("parent %s after %d runs, want SUCCEEDED after 2", got.Status, runs)
	}
}

func TestDependenciesRunInOrderAndFailureCancels(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	var order []string
	e.handlers["step"] = func(ctx context.Context, task lease.Task) ([]byte, error) {
		order = append(order, task.ID)
		if r, ok := durable.WaitResultsOf(ctx); ok {
			return r.Tasks[0].Result, nil
		}
		return task.Payload, nil
	}
	e.handlers["boom"] = func(context.Context, lease.Task) ([]byte, error) {
		return nil, &durable.PermanentError{Err: errors.New("bad input")}
	}
	dep := func(id string, after []string, any bool) lifecycle.Message {
		body, err := token.Token{ID: id, Kind: "step", Payload: []byte(`"from ` + id + `"`), After: after, AfterAny: any}.Encode()
		if err != nil {
			t.Fatal(err)
		}
		m := msg("m-"+id, body)
		m.SentAt = e.clock.Now()
		return m
	}
	// b's token is taken before a's: b waits for a to appear.
	if res := e.exec.Process(t.Context(), nil, dep("b", []string{"a"}, false)); res.Ack {
		t.Fatalf("b with a missing dependency: %+v, want the message kept", res)
	}
	e.exec.Process(t.Context(), nil, msg("a", inline(t, "step", "a", `"from a"`, 0)))
	e.exec.Process(t.Context(), nil, dep("c", []string{"b"}, false))
	if got := e.get(t, "c"); got.Status != lease.StatusWaiting {
		t.Fatalf("c: %s, want WAITING", got.Status)
	}
	e.exec.Process(t.Context(), nil, dep("b", []string{"a"}, false)) // redelivered
	e.drainSent(t, 0)
	if got := e.get(t, "c"); got.Status != lease.StatusSucceeded || string(got.Result) != `"from a"` {
		t.Fatalf("c: %s %s", got.Status, got.Result)
	}
	if strings.Join(order, ",") != "a,b,c" {
		t.Fatalf("ran %v, want a,b,c", order)
	}

	e.exec.Process(t.Context(), nil, msg("z", inline(t, "boom", "z", "", 0)))
	e.exec.Process(t.Context(), nil, dep("d", []string{"z"}, false))
	e.exec.Process(t.Context(), nil, dep("f", []string{"z"}, true))
	if got := e.get(t, "d"); got.Status != lease.StatusCancelled || got.Error != "dependency z ended FAILED: bad input" {
		t.Fatalf("d: %s %q", got.Status, got.Error)
	}
	// A dependent of d hears of the cancellation in turn.
	e.exec.Process(t.Context(), nil, dep("g", []string{"d"}, false))
	if got := e.get(t, "g"); got.Status != lease.StatusCancelled {
		t.Fatalf("g after cancelled d: %s", got.Status)
	}
	e.drainSent(t, 0)
	if got := e.get(t, "f"); got.Status != lease.StatusSucceeded {
		t.Fatalf("f (after-any a failed task): %s", got.Status)
	}
	// A dependency that never appears cancels its dependent in the end.
	h := dep("h", []string{"never"}, false)
	h.ReceiveCount = 10 // kept past the replace count: the same body goes back
	if res := e.exec.Process(t.Context(), nil, h); res.Ack != true {
		t.Fatalf("h kept near the receive limit: %+v, want replaced and acknowledged", res)
	}
	sent := e.sqs.sentTo(workURL)
	if body := aws.ToString(sent[len(sent)-1].MessageBody); body != h.Body {
		t.Fatalf("h's replacement is %s, want its own body (with its dependencies)", body)
	}
	e.clock.Advance(lifecycle.MissingDependencyGrace)
	e.exec.Process(t.Context(), nil, msg("h-again", h.Body))
	if got := e.get(t, "h"); got.Status != lease.StatusCancelled || got.Error != "dependency never does not exist" {
		t.Fatalf("h: %s %q", got.Status, got.Error)
	}
}

func TestCallbackCompletesOnceAndTimesOut(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	tokens := make(chan string, 4)
	e.handlers["approve"] = func(ctx context.Context, task lease.Task) ([]byte, error) {
		cb, err := durable.CallbackTokenOf(ctx)
		if err != nil {
			return nil, err
		}
		tokens <- cb
		return nil, &durable.AwaitCallbackError{Timeout: time.Minute}
	}
	res := e.exec.Process(t.Context(), nil, msg("x", inline(t, "approve", "x", "", 2)))
	if res.Outcome != lifecycle.OutcomeSuspended {
		t.Fatalf("%+v", res)
	}
	cb := <-tokens
	timeout := e.sqs.sentTo(workURL)
	if len(timeout) != 1 || timeout[0].DelaySeconds != 60 {
		t.Fatalf("timeout token: %+v", timeout)
	}
	body := func(tok string, result string) string {
		b, err := token.CallbackMessage(tok, json.RawMessage(result), false, "")
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	parsed, err := token.ParseCallback(cb)
	if err != nil {
		t.Fatal(err)
	}
	parsed.Nonce = strings.Repeat("A", len(parsed.Nonce))
	forged := parsed.String()
	if res := e.exec.Process(t.Context(), nil, msg("f", body(forged, `1`))); !res.Ack || !strings.Contains(res.Reason, "rejected") {
		t.Fatalf("forged callback: %+v", res)
	}
	// A reader of the table sees only the nonce's hash; a message with the
	// hash for the nonce is rejected from a queue.
	parsed.Nonce = e.get(t, "x").CallbackHash
	if res := e.exec.Process(t.Context(), nil, msg("h", body(parsed.String(), `1`))); !res.Ack || !strings.Contains(res.Reason, "stored hash") {
		t.Fatalf("callback message with the stored hash: %+v", res)
	}
	if got := e.get(t, "x"); got.Status != lease.StatusWaiting {
		t.Fatalf("x after a callback message with the stored hash: %s", got.Status)
	}
	if res := e.exec.Process(t.Context(), nil, msg("ok", body(cb, `{"approved":true}`))); !res.Ack || res.Reason != "" {
		t.Fatalf("callback: %+v", res)
	}
	if got := e.get(t, "x"); got.Status != lease.StatusSucceeded || string(got.Result) != `{"approved":true}` {
		t.Fatalf("x: %s %s", got.Status, got.Result)
	}
	if res := e.exec.Process(t.Context(), nil, msg("again", body(cb, `{"approved":false}`))); !strings.Contains(res.Reason, "rejected") {
		t.Fatalf("second callback: %+v", res)
	}
	if got := e.get(t, "x"); string(got.Result) != `{"approved":true}` {
		t.Fatalf("second callback changed the result: %s", got.Result)
	}

	// A callback that never comes: the attempt fails at the timeout and is
	// retried; the last attempt's timeout fails the task.
	e.exec.Process(t.Context(), nil, msg("y", inline(t, "approve", "y", "", 2)))
	<-tokens
	for attempt := 1; attempt <= 2; attempt++ {
		e.clock.Advance(2 * time.Minute)
		e.exec.Process(t.Context(), nil, msg(fmt.Sprintf("t%d", attempt), token.Ref("y")))
		got := e.get(t, "y")
		if attempt == 1 {
			if got.Status != lease.StatusPending || !strings.Contains(got.Error, "callback not received") {
				t.Fatalf("after the first timeout: %s %q", got.Status, got.Error)
			}
			e.clock.Advance(time.Minute)
			e.exec.Process(t.Context(), nil, msg("retry", token.Ref("y")))
			<-tokens
			continue
		}
		if got.Status != lease.StatusFailed {
			t.Fatalf("after the last timeout: %s", got.Status)
		}
	}
}

func TestStepsRunOncePerTask(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	runs := map[string]int{}
	e.handlers["steps"] = func(ctx context.Context, task lease.Task) ([]byte, error) {
		var out []string
		for _, name := range []string{"a", "b", "c"} {
			r, err := durable.StepOf(ctx, name, func(context.Context) ([]byte, error) {
				runs[name]++
				if name == "c" && task.Attempt == 1 {
					return nil, errors.New("c fails once")
				}
				return json.Marshal(name + fmt.Sprint(task.Attempt))
			})
			if err != nil {
				return nil, err
			}
			out = append(out, string(r))
		}
		return json.Marshal(strings.Join(out, "+"))
	}
	e.exec.Process(t.Context(), nil, msg("s", inline(t, "steps", "s", "", 3)))
	if got := e.get(t, "s"); got.Status != lease.StatusPending || len(got.Steps) != 2 {
		t.Fatalf("after attempt 1: %s with %d steps", got.Status, len(got.Steps))
	}
	e.clock.Advance(time.Hour)
	e.exec.Process(t.Context(), nil, msg("s2", token.Ref("s")))
	got := e.get(t, "s")
	if got.Status != lease.StatusSucceeded || string(got.Result) != `"\"a1\"+\"b1\"+\"c2\""` {
		t.Fatalf("after attempt 2: %s %s", got.Status, got.Result)
	}
	if runs["a"] != 1 || runs["b"] != 1 || runs["c"] != 2 {
		t.Fatalf("step runs %v: a and b must run once, c twice", runs)
	}
}

// A step name used twice in one run is a programming error: the second call
// fails the task before running its function, with an error naming the
// step, rather than returning the first step's result. An invalid name is
// refused before its function runs. A step whose function failed may be
// called again in the same run (a retry loop), and a retried attempt
// replays each recorded step once.
func TestStepNamesAreCheckedBeforeTheStepRuns(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		steps []string
		want  string // in the task's error
	}{
		{"duplicate", []string{"a", "a"}, `step "a": step name used twice in one run`},
		{"duplicate after others", []string{"a", "b", "a"}, `step "a": step name used twice in one run`},
		{"empty name", []string{""}, fmt.Sprintf("step name must be 1..%d bytes", lease.MaxStepNameBytes)},
		{"long name", []string{strings.Repeat("n", lease.MaxStepNameBytes+1)}, fmt.Sprintf("step name must be 1..%d bytes", lease.MaxStepNameBytes)},
		{"not UTF-8", []string{"\xff"}, fmt.Sprintf("step name must be 1..%d bytes", lease.MaxStepNameBytes)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, nil)
			runs := 0
			e.handlers["steps"] = func(ctx context.Context, task lease.Task) ([]byte, error) {
				for i, name := range tc.steps {
					if _, err := durable.StepOf(ctx, name, func(context.Context) ([]byte, error) {
						runs++
						return json.Marshal(i)
					}); err != nil {
						return nil, err
					}
				}
				return nil, nil
			}
			e.exec.Process(t.Context(), nil, msg("s", inline(t, "steps", "s", "", 3)))
			got := e.get(t, "s")
			if got.Status != lease.StatusFailed || !strings.Contains(got.Error, tc.want) {
				t.Fatalf("task: %s %q, want FAILED with %q", got.Status, got.Error, tc.want)
			}
			if want := len(tc.steps) - 1; runs != want {
				t.Fatalf("%d step functions ran, want %d: the bad step's must not run", runs, want)
			}
		})
	}
}

func TestStepMayBeCalledAgainAfterItsFunctionFails(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	runs := 0
	e.handlers["retry"] = func(ctx context.Context, task lease.Task) ([]byte, error) {
		var r []byte
		var err error
		for range 3 {
			if r, err = durable.StepOf(ctx, "fetch", func(context.Context) ([]byte, error) {
				runs++
				if runs < 3 {
					return nil, errors.New("not yet")
				}
				return []byte(`"ok"`), nil
			}); err == nil {
				break
			}
		}
		return r, err
	}
	e.exec.Process(t.Context(), nil, msg("r", inline(t, "retry", "r", "", 1)))
	if got := e.get(t, "r"); got.Status != lease.StatusSucceeded || string(got.Result) != `"ok"` || runs != 3 {
		t.Fatalf("task: %s %s after %d runs, want SUCCEEDED \"ok\" after 3", got.Status, got.Result, runs)
	}
}

// Children with large payloads go in batches that SQS accepts: at most ten
// entries and 256 KiB a call.
func TestLargeChildrenAreSentInBatchesSQSAccepts(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	big := `"` + strings.Repeat("x", 100<<10) + `"`
	e.handlers["parent"] = func(ctx context.Context, task lease.Task) ([]byte, error) {
		kids := make([]durable.Child, 12)
		for i := range kids {
			kids[i] = durable.Child{Kind: "child", Payload: []byte(big)}
		}
		return nil, &durable.AwaitChildrenError{Children: kids}
	}
	if res := e.exec.Process(t.Context(), nil, msg("p", inline(t, "parent", "p", "", 0))); res.Outcome != lifecycle.OutcomeSuspended {
		t.Fatalf("%+v", res)
	}
	e.sqs.mu.Lock()
	defer e.sqs.mu.Unlock()
	if len(e.sqs.batches) != 6 || len(e.sqs.sent) != 12 {
		t.Fatalf("%d batch calls for %d tokens, want 6 of 2 (each under 256 KiB)", len(e.sqs.batches), len(e.sqs.sent))
	}
	for _, b := range e.sqs.batches {
		if b > 256<<10 {
			t.Fatalf("a batch of %d bytes", b)
		}
	}
}

// A dependent whose dependency does not exist yet keeps its message; once
// that message has been received often enough to be replaced by a fresh
// one, the fresh one must still register the dependent on its dependency.
// A reference token would find the task WAITING and acknowledge it, and
// the dependent would never hear that its dependency ended.
func TestReplacedTokenOfAWaitingDependentStillRegistersIt(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.handlers["step"] = func(_ context.Context, task lease.Task) ([]byte, error) { return task.Payload, nil }
	body, err := token.Token{ID: "b", Kind: "step", Payload: []byte(`"b"`), After: []string{"a"}}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	m := msg("m-b", body)
	m.SentAt = e.clock.Now()
	m.ReceiveCount = lifecycle.DefaultReplaceAtReceiveCount
	mark := len(e.sqs.sentTo(workURL))
	if res := e.exec.Process(t.Context(), nil, m); !res.Ack {
		t.Fatalf("b at receive %d with a missing dependency: %+v, want its message replaced (acknowledged)", m.ReceiveCount, res)
	}
	if got := e.get(t, "b"); got.Status != lease.StatusWaiting {
		t.Fatalf("b: %s, want WAITING", got.Status)
	}
	e.exec.Process(t.Context(), nil, msg("a", inline(t, "step", "a", `"a"`, 0)))
	e.drainSent(t, mark) // the replacement, then whatever it leads to
	if got := e.get(t, "b"); got.Status != lease.StatusSucceeded {
		t.Fatalf("b: %s (waiting for %v, ended %v), want SUCCEEDED: its dependency a ended", got.Status, got.WaitFor, got.Ended)
	}
}

// A replaced token restarts the message's clock; the grace for a missing
// dependency still counts from when the dependent was first taken.
func TestMissingDependencyGraceOutlivesReplacement(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	body, err := token.Token{ID: "h", Kind: "step", After: []string{"never"}}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	first := msg("m-h", body)
	first.SentAt = e.clock.Now()
	e.exec.Process(t.Context(), nil, first)
	if got := e.get(t, "h"); got.Status != lease.StatusWaiting {
		t.Fatalf("h: %s, want WAITING", got.Status)
	}
	e.clock.Advance(lifecycle.MissingDependencyGrace)
	fresh := msg("m-h2", body) // a replacement, sent just now
	fresh.SentAt = e.clock.Now()
	e.exec.Process(t.Context(), nil, fresh)
	if got := e.get(t, "h"); got.Status != lease.StatusCancelled || got.Error != "dependency never does not exist" {
		t.Fatalf("h: %s %q, want CANCELLED: its dependency never appeared within the grace", got.Status, got.Error)
	}
}

// A durable sleep suspends the task without a lease until its wake-up,
// however far; the run after it replays the steps before the sleep and
// runs the rest once. A token that arrives before the wake-up runs
// nothing.
func TestSleepSuspendsUntilItsWakeUp(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	runs := map[string]int{}
	step := func(ctx context.Context, name string) error {
		_, err := durable.StepOf(ctx, name, func(context.Context) ([]byte, error) {
			runs[name]++
			return json.Marshal(name)
		})
		return err
	}
	e.handlers["sleeper"] = func(ctx context.Context, task lease.Task) ([]byte, error) {
		runs["handler"]++
		if err := step(ctx, "before"); err != nil {
			return nil, err
		}
		if err := durable.SleepOf(ctx, 72*time.Hour); err != nil {
			return nil, err
		}
		if err := step(ctx, "between"); err != nil {
			return nil, err
		}
		if err := durable.SleepOf(ctx, time.Minute); err != nil {
			return nil, err
		}
		if err := step(ctx, "after"); err != nil {
			return nil, err
		}
		return json.Marshal(task.Attempt)
	}
	start := e.clock.Now()
	e.exec.Process(t.Context(), nil, msg("s", inline(t, "sleeper", "s", "", 3)))
	got := e.get(t, "s")
	if got.Status != lease.StatusPending || !got.RunAt.Equal(start.Add(72*time.Hour)) || got.Attempt != 0 || got.LeaseOwner != "" {
		t.Fatalf("after the first run: %s, run at %s (want %s), attempt %d, owner %q; want PENDING, unleased, the attempt handed back",
			got.Status, got.RunAt, start.Add(72*time.Hour), got.Attempt, got.LeaseOwner)
	}
	if !strings.Contains(got.Error, "sleep#1 until") {
		t.Errorf("error %q, want it to name the sleep", got.Error)
	}
	if sent := e.sqs.sentTo(workURL); len(sent) != 0 {
		t.Fatalf("a 72h sleep sent %d tokens; beyond 15 minutes the sweep wakes the task", len(sent))
	}
	// Early: nothing runs.
	e.clock.Advance(71 * time.Hour)
	e.exec.Process(t.Context(), nil, msg("s2", token.Ref("s")))
	if runs["handler"] != 1 {
		t.Fatalf("a token before the wake-up ran the handler (%d runs)", runs["handler"])
	}
	e.clock.Advance(time.Hour)
	e.exec.Process(t.Context(), nil, msg("s3", token.Ref("s")))
	if got := e.get(t, "s"); got.Status != lease.StatusPending || !got.RunAt.Equal(e.clock.Now().Add(time.Minute)) {
		t.Fatalf("after the second run: %s, run at %s; want PENDING until the second sleep's wake-up", got.Status, got.RunAt)
	}
	if sent := e.sqs.sentTo(workURL); len(sent) != 1 || sent[0].DelaySeconds != 60 {
		t.Fatalf("tokens sent %+v; want one, delayed by the minute's sleep", sent)
	}
	e.clock.Advance(time.Minute)
	e.exec.Process(t.Context(), nil, msg("s4", token.Ref("s")))
	got = e.get(t, "s")
	if got.Status != lease.StatusSucceeded || string(got.Result) != "1" {
		t.Fatalf("after the wake-ups: %s %s; want SUCCEEDED in attempt 1", got.Status, got.Result)
	}
	if runs["before"] != 1 || runs["between"] != 1 || runs["after"] != 1 || runs["handler"] != 3 {
		t.Fatalf("runs %v: each step once, the handler three times", runs)
	}
	if names := stepNames(got); !slices.Equal(names, []string{"before", "sleep#1", "between", "sleep#2", "after"}) {
		t.Fatalf("steps %v", names)
	}
}

func stepNames(t lease.Task) []string {
	var out []string
	for _, s := range t.Steps {
		out = append(out, s.Name)
	}
	return out
}

// A sleep longer than a year, or negative, fails the task before anything
// is recorded; outside a handler SleepOf says so.
func TestSleepRejectsBadDurations(t *testing.T) {
	t.Parallel()
	if err := durable.SleepOf(t.Context(), time.Second); !errors.Is(err, durable.ErrNoWorkflow) {
		t.Fatalf("outside a handler: %v, want ErrNoWorkflow", err)
	}
	for _, d := range []time.Duration{-time.Second, durable.MaxSleep + time.Hour} {
		e := setup(t, nil)
		e.handlers["sleeper"] = func(ctx context.Context, task lease.Task) ([]byte, error) {
			return nil, durable.SleepOf(ctx, d)
		}
		e.exec.Process(t.Context(), nil, msg("s", inline(t, "sleeper", "s", "", 3)))
		if got := e.get(t, "s"); got.Status != lease.StatusFailed || !strings.Contains(got.Error, "sleep of") || len(got.Steps) != 0 {
			t.Fatalf("sleep of %s: %s %q with %d steps; want FAILED naming the sleep, nothing recorded", d, got.Status, got.Error, len(got.Steps))
		}
	}
}

// A condition is checked with a backoff that doubles from its minimum
// (the wait is the time since the first check), each wait a snooze with
// no lease; once it holds its result is recorded, and a later run
// replays it without checking again.
func TestPollWaitsForItsConditionWithBackoff(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	checks, runs := 0, 0
	e.handlers["poller"] = func(ctx context.Context, task lease.Task) ([]byte, error) {
		runs++
		r, err := durable.PollOf(ctx, "ready", durable.Poll{Min: time.Second, Max: 4 * time.Second, Timeout: time.Hour},
			func(context.Context) ([]byte, bool, error) {
				checks++
				return []byte(strconv.Itoa(checks)), checks == 5, nil
			})
		if err != nil {
			return nil, err
		}
		if runs == 5 {
			return nil, errors.New("fail once after the condition held")
		}
		return r, nil
	}
	e.exec.Process(t.Context(), nil, msg("p", inline(t, "poller", "p", "", 3)))
	var waits []time.Duration
	for i := 0; i < 10 && e.get(t, "p").Status == lease.StatusPending; i++ {
		got := e.get(t, "p")
		waits = append(waits, got.RunAt.Sub(e.clock.Now()))
		e.clock.Advance(got.RunAt.Sub(e.clock.Now()))
		e.exec.Process(t.Context(), nil, msg(fmt.Sprint("p", i), token.Ref("p")))
	}
	got := e.get(t, "p")
	if got.Status != lease.StatusSucceeded || string(got.Result) != "5" {
		t.Fatalf("task %s %s (%q), want SUCCEEDED with the fifth check's result", got.Status, got.Result, got.Error)
	}
	// Checks at 0, 1s, 2s, 4s, 8s: waits of 1s, 1s, 2s, 4s (the max); then
	// the retry after the failing run, whose backoff is the worker's.
	if len(waits) < 4 || !slices.Equal(waits[:4], []time.Duration{time.Second, time.Second, 2 * time.Second, 4 * time.Second}) {
		t.Fatalf("waits %v, want 1s 1s 2s 4s first", waits)
	}
	if checks != 5 || runs != 6 || got.Attempt != 2 {
		t.Fatalf("%d checks, %d runs, attempt %d: want 5 checks (the retry replays the result), 6 runs, attempt 2", checks, runs, got.Attempt)
	}
	if names := stepNames(got); !slices.Equal(names, []string{"ready#start", "ready"}) {
		t.Fatalf("steps %v", names)
	}
}

// A condition not met within its timeout fails the task, naming it.
func TestPollTimesOut(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.handlers["poller"] = func(ctx context.Context, task lease.Task) ([]byte, error) {
		return durable.PollOf(ctx, "never", durable.Poll{Min: time.Minute, Max: time.Hour, Timeout: 3 * time.Hour},
			func(context.Context) ([]byte, bool, error) { return nil, false, nil })
	}
	e.exec.Process(t.Context(), nil, msg("p", inline(t, "poller", "p", "", 3)))
	for i := 0; i < 20 && e.get(t, "p").Status == lease.StatusPending; i++ {
		e.clock.Advance(e.get(t, "p").RunAt.Sub(e.clock.Now()))
		e.exec.Process(t.Context(), nil, msg(fmt.Sprint("p", i), token.Ref("p")))
	}
	if got := e.get(t, "p"); got.Status != lease.StatusFailed || !strings.Contains(got.Error, `condition "never" not met within 3h0m0s`) {
		t.Fatalf("task %s %q, want FAILED naming the condition and its timeout", got.Status, got.Error)
	}
	if waited := e.clock.Now().Sub(epoch); waited != 3*time.Hour {
		t.Fatalf("failed after %s, want at the 3h timeout", waited)
	}
}
