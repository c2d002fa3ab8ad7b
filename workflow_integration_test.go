package leasehold_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lifecycle"
	"github.com/leasehold/leasehold/internal/token"
	"github.com/leasehold/leasehold/workflow"
)

// workflowHandlers: "fanout" spawns n "square" children and sums their
// results; "step" returns its payload plus its dependency's result (and
// fails for good on "fail");
// "approve" waits for a callback, handing its token out on tokens.
func workflowHandlers(tokens chan<- string) *leasehold.Handlers {
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "fanout", func(ctx context.Context, t *leasehold.Task[int]) (int, error) {
		var kids []workflow.Child
		for i := 1; i <= t.Payload; i++ {
			kids = append(kids, workflow.Child{Kind: "square", Payload: i})
		}
		outs, err := workflow.All(ctx, "squares", kids...)
		if err != nil {
			return 0, err
		}
		sum := 0
		for _, k := range outs {
			var v int
			if k.Status != leasehold.StatusSucceeded || json.Unmarshal(k.Result, &v) != nil {
				return 0, leasehold.Fail(fmt.Errorf("child %s: %s", k.ID, k.Status))
			}
			sum += v
		}
		return sum, nil
	})
	leasehold.Handle(hs, "square", func(_ context.Context, t *leasehold.Task[int]) (int, error) {
		return t.Payload * t.Payload, nil
	})
	leasehold.Handle(hs, "step", func(ctx context.Context, t *leasehold.Task[string]) (string, error) {
		if t.Payload == "fail" {
			return "", leasehold.Fail(errors.New("asked to fail"))
		}
		deps, _ := workflow.Dependencies(ctx)
		out := t.Payload
		for _, d := range deps {
			var s string
			_ = json.Unmarshal(d.Result, &s)
			out = s + "-" + out
		}
		return out, nil
	})
	leasehold.Handle(hs, "approve", func(ctx context.Context, _ *leasehold.Task[any]) (json.RawMessage, error) {
		return workflow.WaitForCallback[json.RawMessage](ctx, "approval", time.Hour, func(_ context.Context, tok string) error {
			tokens <- tok
			return nil
		})
	})
	return hs
}

// TestWorkflowsOnTheStack runs a fan-out/fan-in of 5, a chain of 3 and a
// callback through the real worker and client on the local stack.
func TestWorkflowsOnTheStack(t *testing.T) {
	t.Parallel()
	e := setupStack(t)
	c := newClientOn(t, e)
	tokens := make(chan string, 4)
	w := e.worker(t, leasehold.WorkerConfig{Handlers: workflowHandlers(tokens)})
	ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(2*time.Minute))
	defer cancel()

	if _, err := c.Enqueue(ctx, leasehold.Submission{Kind: "fanout", Payload: 5, ID: "fan"}); err != nil {
		t.Fatal(err)
	}
	// The chain is enqueued last step first: each waits for its
	// predecessor to appear.
	if _, err := c.Enqueue(ctx, leasehold.Submission{Kind: "step", Payload: "c", ID: "chain-c", After: []string{"chain-b"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Enqueue(ctx, leasehold.Submission{Kind: "step", Payload: "b", ID: "chain-b", After: []string{"chain-a"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Enqueue(ctx, leasehold.Submission{Kind: "step", Payload: "a", ID: "chain-a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Enqueue(ctx, leasehold.Submission{Kind: "approve", ID: "cb"}); err != nil {
		t.Fatal(err)
	}
	tok := e.pumpForToken(t, w, tokens, 90*time.Second, func() bool {
		return e.status(t, "fan") == lease.StatusSucceeded && e.status(t, "chain-c") == lease.StatusSucceeded &&
			e.status(t, "cb") == lease.StatusWaiting
	})
	if got := e.get(t, "fan"); string(got.Result) != "55" || got.Fence != 2 {
		t.Fatalf("fan-in: result %s fence %d, want 55 (1+4+9+16+25) after one resume", got.Result, got.Fence)
	}
	if got := e.get(t, "chain-c"); string(got.Result) != `"a-b-c"` {
		t.Fatalf("chain: %s", got.Result)
	}
	// (The result shows each step ran with its predecessor's result.)
	// A token built from what the table holds (the hash of the secret in
	// place of the secret) answers nothing.
	cb, err := token.ParseCallback(tok)
	if err != nil {
		t.Fatal(err)
	}
	cb.Nonce = e.get(t, "cb").CallbackHash
	if _, err := c.CompleteCallback(ctx, cb.String(), "forged"); !errors.Is(err, leasehold.ErrBadCallback) || e.status(t, "cb") != lease.StatusWaiting {
		t.Fatalf("CompleteCallback with a token built from the table: %v (task %s), want ErrBadCallback and the task still waiting", err, e.status(t, "cb"))
	}
	info, err := c.CompleteCallback(ctx, tok, map[string]bool{"approved": true})
	if err != nil || info.Status != leasehold.StatusPending {
		t.Fatalf("CompleteCallback: %+v, %v; want the task PENDING to run again with the answer", info, err)
	}
	if _, err := c.CompleteCallback(ctx, tok, nil); !errors.Is(err, leasehold.ErrBadCallback) {
		t.Fatalf("second CompleteCallback: %v, want ErrBadCallback", err)
	}
	e.pump(t, w, 60*time.Second, func() bool { return e.status(t, "cb") == lease.StatusSucceeded })
	if got := e.get(t, "cb"); string(got.Result) != `{"approved":true}` {
		t.Fatalf("cb: result %s, want the callback's answer", got.Result)
	}
	kids, err := c.Children(ctx, "fan")
	if err != nil || len(kids) != 5 || kids[4].ID != "fan/squares/4" || kids[4].Status != leasehold.StatusSucceeded {
		t.Fatalf("Children: %+v, %v", kids, err)
	}
}

// pumpForToken delivers work-queue batches until an "approve" handler has
// handed out its callback token on tokens and done reports true, and
// returns the token.
func (e *stackEnv) pumpForToken(t *testing.T, w *leasehold.Worker, tokens <-chan string, budget time.Duration, done func() bool) string {
	t.Helper()
	var tok string
	e.pump(t, w, budget, func() bool {
		select {
		case tok = <-tokens:
		default:
		}
		return tok != "" && done()
	})
	return tok
}

func newClientOn(t *testing.T, e *stackEnv) *leasehold.Client {
	t.Helper()
	c, err := leasehold.NewClient(leasehold.ClientConfig{AWS: e.cfg, Table: e.table, QueueURL: e.queues.Work})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCallbackMessagesAndCancelOnTheStack: the SQS callback form is
// accepted once and a forged one is dead-lettered with its reason; a
// cancelled parent takes its running children with it.
func TestCallbackMessagesAndCancelOnTheStack(t *testing.T) {
	t.Parallel()
	e := setupStack(t)
	c := newClientOn(t, e)
	tokens := make(chan string, 4)
	hs := workflowHandlers(tokens)
	release := make(chan struct{})
	leasehold.Handle(hs, "hold", func(ctx context.Context, _ *leasehold.Task[any]) (any, error) {
		select { // runs until cancelled (or the test ends)
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-release:
			return nil, nil
		}
	})
	leasehold.Handle(hs, "parent", func(ctx context.Context, _ *leasehold.Task[any]) (any, error) {
		_, err := workflow.All(ctx, "hold", workflow.Child{Kind: "hold"}, workflow.Child{Kind: "hold"})
		return nil, err
	})
	defer close(release)
	w := e.worker(t, leasehold.WorkerConfig{Handlers: hs, LeaseDuration: awstest.Scale(4 * time.Second), RenewBefore: awstest.Scale(2 * time.Second), LongPoll: time.Second})
	ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(2*time.Minute))
	defer cancel()

	if _, err := c.Enqueue(ctx, leasehold.Submission{Kind: "approve", ID: "cb"}); err != nil {
		t.Fatal(err)
	}
	tok := e.pumpForToken(t, w, tokens, 60*time.Second, func() bool { return e.status(t, "cb") == lease.StatusWaiting })
	cb, err := token.ParseCallback(tok)
	if err != nil {
		t.Fatal(err)
	}
	cb.Nonce = strings.Repeat("x", len(cb.Nonce))
	forged, _ := token.CallbackMessage(cb.String(), json.RawMessage(`1`), false, "")
	good, _ := token.CallbackMessage(tok, json.RawMessage(`{"approved":true}`), false, "")
	again, _ := token.CallbackMessage(tok, nil, true, "too late")
	// One at a time: SQS does not keep order, and the first callback to
	// land wins.
	deadLetter := func(body, want string) {
		t.Helper()
		e.send(t, e.queues.Work, body)
		for deadline := time.Now().Add(awstest.Scale(30 * time.Second)); ; {
			if time.Now().After(deadline) {
				t.Fatalf("callback not dead-lettered with %q", want)
			}
			if ev := e.receive(t, e.queues.Work, 10, time.Second, 30); len(ev.Records) > 0 {
				e.deliver(t, w, t.Context(), ev)
			}
			for _, m := range e.receive(t, e.queues.WorkDLQ, 10, time.Second, 30).Records {
				r := m.MessageAttributes[lifecycle.AttrReason].StringValue
				if m.Body == body && r != nil && strings.Contains(*r, want) {
					return
				}
				if m.Body == body {
					t.Fatalf("callback dead-lettered with %v, want %q", r, want)
				}
			}
		}
	}
	deadLetter(forged, "does not match")
	e.send(t, e.queues.Work, good)
	e.pump(t, w, 60*time.Second, func() bool { return e.status(t, "cb") == lease.StatusSucceeded })
	if got := e.get(t, "cb"); string(got.Result) != `{"approved":true}` {
		t.Fatalf("cb: %s", got.Result)
	}
	deadLetter(again, "finished")

	// Cancel a parent while its children run: they end CANCELLED too. (A
	// context of its own: the waits above may have used up the first.)
	ctx, cancel = context.WithTimeout(t.Context(), awstest.Scale(2*time.Minute))
	defer cancel()
	if _, err := c.Enqueue(ctx, leasehold.Submission{Kind: "parent", ID: "p"}); err != nil {
		t.Fatal(err)
	}
	running := func() bool {
		return e.status(t, "p") == lease.StatusWaiting && e.status(t, "p/hold/0") == lease.StatusRunning && e.status(t, "p/hold/1") == lease.StatusRunning
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	waitFor(t, 60*time.Second, running)
	info, err := c.Cancel(ctx, "p")
	if err != nil || info.Status != leasehold.StatusCancelled {
		t.Fatalf("Cancel(p): %+v, %v", info, err)
	}
	waitFor(t, 60*time.Second, func() bool {
		return e.status(t, "p/hold/0") == lease.StatusCancelled && e.status(t, "p/hold/1") == lease.StatusCancelled
	})
}

// waitFor polls cond until it holds or the (scaled) budget runs out.
func waitFor(t *testing.T, budget time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(awstest.Scale(budget)); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s", awstest.Scale(budget))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A durable sleep on the stack: the task sleeps PENDING between its steps,
// a delayed token wakes it, and the run after the wake-up replays the
// first step and runs the second once.
func TestSleepOnTheStack(t *testing.T) {
	t.Parallel()
	e := setupStack(t)
	c := newClientOn(t, e)
	const nap = 8 * time.Second
	count, runsOf := stepCounter()
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "sleeper", func(ctx context.Context, _ *leasehold.Task[any]) (string, error) {
		if _, err := workflow.Step(ctx, "before", count("before")); err != nil {
			return "", err
		}
		if err := workflow.Sleep(ctx, nap); err != nil {
			return "", err
		}
		return workflow.Step(ctx, "after", count("after"))
	})
	w := e.worker(t, leasehold.WorkerConfig{Handlers: hs})
	ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(2*time.Minute))
	defer cancel()
	start := time.Now()
	if _, err := c.Enqueue(ctx, leasehold.Submission{Kind: "sleeper", ID: "napper"}); err != nil {
		t.Fatal(err)
	}
	e.pump(t, w, 60*time.Second, func() bool { return e.status(t, "napper") == lease.StatusPending && len(e.get(t, "napper").Steps) == 2 })
	e.pump(t, w, 60*time.Second, func() bool { return e.status(t, "napper") == lease.StatusSucceeded })
	got := e.get(t, "napper")
	if elapsed := time.Since(start); elapsed < nap {
		t.Errorf("the task ended %s after it was enqueued, before its %s sleep was over", elapsed, nap)
	}
	if string(got.Result) != `"after"` || got.Attempt != 1 || len(got.Steps) != 3 || got.Steps[1].Name != "sleep#1" {
		t.Errorf("task: result %s, attempt %d, steps %+v; want \"after\" in attempt 1 with before, sleep#1, after", got.Result, got.Attempt, got.Steps)
	}
	runs := runsOf()
	if runs["before"] != 1 || runs["after"] != 1 {
		t.Errorf("step runs %v, want each once", runs)
	}
}

// A durable condition on the stack: checked until it holds, the task
// sleeping between checks, and its result recorded once.
func TestWaitForOnTheStack(t *testing.T) {
	t.Parallel()
	e := setupStack(t)
	c := newClientOn(t, e)
	var checks atomic.Int32
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "poller", func(ctx context.Context, _ *leasehold.Task[any]) (int32, error) {
		return workflow.WaitFor(ctx, "third", workflow.Poll{Min: time.Second, Max: 2 * time.Second, Timeout: time.Hour},
			func(context.Context) (int32, bool, error) {
				n := checks.Add(1)
				return n, n == 3, nil
			})
	})
	w := e.worker(t, leasehold.WorkerConfig{Handlers: hs})
	ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(2*time.Minute))
	defer cancel()
	if _, err := c.Enqueue(ctx, leasehold.Submission{Kind: "poller", ID: "poll"}); err != nil {
		t.Fatal(err)
	}
	e.pump(t, w, 90*time.Second, func() bool { return e.status(t, "poll") == lease.StatusSucceeded })
	got := e.get(t, "poll")
	if string(got.Result) != "3" || checks.Load() != 3 || got.Attempt != 1 || got.Snoozes != 2 {
		t.Errorf("task: result %s after %d checks, attempt %d, %d snoozes; want 3 after 3 checks in attempt 1, 2 snoozes", got.Result, checks.Load(), got.Attempt, got.Snoozes)
	}
}

// Many awaits in one handler on the stack, through the real worker,
// client and queues: a step, 4 children, a step, a callback, a sleep, 2
// more children, a step. One order's callback is answered by the client,
// the other's refused by a callback message on the work queue. Each task
// ends in attempt 1 with every step recorded once.
func TestManyAwaitsOnTheStack(t *testing.T) {
	t.Parallel()
	e := setupStack(t)
	c := newClientOn(t, e)
	var mu sync.Mutex
	runs := map[string]int{}
	count := func(name string) {
		mu.Lock()
		defer mu.Unlock()
		runs[name]++
	}
	tokens := make(chan string, 8)
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "pack", func(ctx context.Context, task *leasehold.Task[int]) (int, error) {
		count("pack")
		return task.Payload, nil
	})
	leasehold.Handle(hs, "order", func(ctx context.Context, task *leasehold.Task[string]) (string, error) {
		stepped := func(name string) error {
			_, err := workflow.Step(ctx, name, func(context.Context) (string, error) { count(task.ID + " " + name); return name, nil })
			return err
		}
		if err := stepped("plan"); err != nil {
			return "", err
		}
		kids := make([]workflow.Child, 4)
		for i := range kids {
			kids[i] = workflow.Child{Kind: "pack", Payload: i + 1}
		}
		packed, err := workflow.All(ctx, "pack", kids...)
		if err != nil {
			return "", err
		}
		if err := stepped("total"); err != nil {
			return "", err
		}
		ok, err := workflow.WaitForCallback[string](ctx, "approval", time.Hour, func(ctx context.Context, tok string) error {
			tokens <- tok
			return nil
		})
		var refused *workflow.CallbackFailedError
		if errors.As(err, &refused) {
			return "refused: " + refused.Reason, nil
		}
		if err != nil {
			return "", err
		}
		if err := workflow.Sleep(ctx, 2*time.Second); err != nil {
			return "", err
		}
		audits, err := workflow.All(ctx, "audit", workflow.Child{Kind: "pack", Payload: 10}, workflow.Child{Kind: "pack", Payload: 20})
		if err != nil {
			return "", err
		}
		if err := stepped("ship"); err != nil {
			return "", err
		}
		return fmt.Sprintf("%d packed, approved by %s, %d audits", len(packed), ok, len(audits)), nil
	})
	w := e.worker(t, leasehold.WorkerConfig{Handlers: hs})
	ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(3*time.Minute))
	defer cancel()
	for _, id := range []string{"yes", "no"} {
		if _, err := c.Enqueue(ctx, leasehold.Submission{Kind: "order", Payload: id, ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	var handed []string
	e.pump(t, w, 120*time.Second, func() bool {
		for len(tokens) > 0 {
			handed = append(handed, <-tokens)
		}
		return len(handed) == 2 && e.status(t, "yes") == lease.StatusWaiting && e.status(t, "no") == lease.StatusWaiting
	})
	byTask := map[string]string{}
	for _, tok := range handed {
		cb, err := token.ParseCallback(tok)
		if err != nil {
			t.Fatal(err)
		}
		byTask[cb.ID] = tok
	}
	if info, err := c.CompleteCallback(ctx, byTask["yes"], "ops"); err != nil || info.Status != leasehold.StatusPending {
		t.Fatalf("CompleteCallback: %+v, %v; want the task PENDING to resume", info, err)
	}
	refusal, err := token.CallbackMessage(byTask["no"], nil, true, "over budget")
	if err != nil {
		t.Fatal(err)
	}
	e.send(t, e.queues.Work, refusal)
	e.pump(t, w, 120*time.Second, func() bool {
		return e.status(t, "yes") == lease.StatusSucceeded && e.status(t, "no") == lease.StatusSucceeded
	})
	yes, no := e.get(t, "yes"), e.get(t, "no")
	if string(yes.Result) != `"4 packed, approved by ops, 2 audits"` || yes.Attempt != 1 || len(yes.Steps) != 7 {
		t.Errorf("yes: %s in attempt %d, %d steps; want it approved in attempt 1 with 7 steps", yes.Result, yes.Attempt, len(yes.Steps))
	}
	if string(no.Result) != `"refused: over budget"` || no.Attempt != 1 {
		t.Errorf("no: %s in attempt %d; want the refusal in attempt 1", no.Result, no.Attempt)
	}
	if _, err := c.CompleteCallback(ctx, byTask["yes"], "again"); !errors.Is(err, leasehold.ErrBadCallback) {
		t.Errorf("a second answer: %v, want ErrBadCallback", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if runs["pack"] != 10 || runs["yes plan"] != 1 || runs["yes total"] != 1 || runs["yes ship"] != 1 || runs["no ship"] != 0 {
		t.Errorf("runs %v; want 10 children (4+2 and 4) and each step once", runs)
	}
}

// A chain known at enqueue (Then) on the stack: four links run in order
// through the real client, worker and queues, each created and claimed
// from the token its predecessor sent, none WAITING; a chain sent as a
// plain SQS message with "then" runs the same; a failing link cancels the
// rest.
func TestChainOnTheStack(t *testing.T) {
	t.Parallel()
	e := setupStack(t)
	c := newClientOn(t, e)
	w := e.worker(t, leasehold.WorkerConfig{Handlers: workflowHandlers(make(chan string, 1))})
	ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(2*time.Minute))
	defer cancel()
	if _, err := c.Enqueue(ctx, leasehold.Submission{
		Kind:    "step",
		Payload: "a",
		ID:      "then",
		Then:    []leasehold.Link{{Kind: "step", Payload: "b"}, {Kind: "step", Payload: "c"}, {Kind: "step", Payload: "d"}},
	}); err != nil {
		t.Fatal(err)
	}
	e.send(t, e.queues.Work, `{"v":1,"id":"raw","kind":"step","payload":"x","then":[{"id":"raw-2","kind":"step","payload":"y"}]}`)
	if _, err := c.Enqueue(ctx, leasehold.Submission{
		Kind:    "step",
		Payload: "fail",
		ID:      "broken",
		Then:    []leasehold.Link{{Kind: "step", Payload: "never"}},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Enqueue(ctx, leasehold.Submission{
		Kind:    "step",
		Payload: "later",
		ID:      "stopped",
		Delay:   time.Hour,
		Then:    []leasehold.Link{{Kind: "step"}},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Cancel(ctx, "stopped"); err != nil {
		t.Fatal(err)
	}
	e.pump(t, w, 90*time.Second, func() bool {
		return e.status(t, "then#4") == lease.StatusSucceeded && e.status(t, "raw-2") == lease.StatusSucceeded &&
			e.status(t, "broken#2") == lease.StatusCancelled && e.status(t, "stopped#2") == lease.StatusCancelled
	})
	if got := e.get(t, "then#4"); string(got.Result) != `"a-b-c-d"` || got.Attempt != 1 || got.Fence != 1 {
		t.Errorf("last link: %s, attempt %d, fence %d; want \"a-b-c-d\" from its first claim", got.Result, got.Attempt, got.Fence)
	}
	if got := e.get(t, "raw-2"); string(got.Result) != `"x-y"` {
		t.Errorf("raw chain: %s", got.Result)
	}
	if got := e.get(t, "broken#2"); !strings.Contains(got.Error, "chain: broken ended FAILED") {
		t.Errorf("link after a failure: %s %q", got.Status, got.Error)
	}
}

// A map on the stack: 60 children, 20 at a time, through the real worker
// and queues; the parent ends in one attempt with every child's result.
func TestMapOnTheStack(t *testing.T) {
	t.Parallel()
	e := setupStack(t)
	c := newClientOn(t, e)
	hs := workflowHandlers(make(chan string, 1))
	leasehold.Handle(hs, "mapper", func(ctx context.Context, task *leasehold.Task[int]) (int, error) {
		res, err := workflow.Map(ctx, "sq", task.Payload, func(i int) workflow.Child {
			return workflow.Child{Kind: "square", Payload: i}
		}, workflow.MapOptions{MaxConcurrency: 20})
		if err != nil {
			return 0, err
		}
		ids := make([]string, res.Started)
		for i := range ids {
			ids[i] = workflow.ChildIDIn(task.ID, "sq", i)
		}
		outs, err := workflow.ReadOutcomes(ctx, ids...)
		if err != nil {
			return 0, err
		}
		sum := 0
		for _, o := range outs {
			var v int
			if err := json.Unmarshal(o.Result, &v); err != nil {
				return 0, leasehold.Fail(fmt.Errorf("%s: %s %s", o.ID, o.Status, o.Result))
			}
			sum += v
		}
		return sum, nil
	})
	w := e.worker(t, leasehold.WorkerConfig{Handlers: hs})
	ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(3*time.Minute))
	defer cancel()
	if _, err := c.Enqueue(ctx, leasehold.Submission{Kind: "mapper", Payload: 60, ID: "mapped"}); err != nil {
		t.Fatal(err)
	}
	e.pump(t, w, 150*time.Second, func() bool { return e.status(t, "mapped") == lease.StatusSucceeded })
	got := e.get(t, "mapped")
	// The sum of i*i for i < 60; one batch of items: the parent's first
	// run, and its resume once the children are done (a wake that finds
	// the map still running costs one more).
	if string(got.Result) != "70210" || got.Attempt != 1 || got.Fence > 3 {
		t.Errorf("mapper: %s in attempt %d, fence %d; want 70210 in attempt 1 after at most 2 resumes", got.Result, got.Attempt, got.Fence)
	}
}

// A sliding map on the stack: 300 children, 25 at a time, through the
// real worker and queues, each child taking a few milliseconds: never
// more than 25 run at once (counted in the handler), each runs once, and
// the parent runs a handful of times, not once per child nor per 25.
func TestSlidingMapOnTheStack(t *testing.T) {
	t.Parallel()
	e := setupStack(t)
	c := newClientOn(t, e)
	hs := leasehold.NewHandlers()
	var (
		mu            sync.Mutex
		running, peak int
		ran           = map[string]int{}
	)
	leasehold.Handle(hs, "slidesq", func(ctx context.Context, task *leasehold.Task[int]) (int, error) {
		mu.Lock()
		running++
		peak = max(peak, running)
		ran[task.ID]++
		mu.Unlock()
		defer func() {
			mu.Lock()
			running--
			mu.Unlock()
		}()
		select {
		case <-time.After(time.Duration(task.Payload%7) * time.Millisecond):
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		return task.Payload * task.Payload, nil
	})
	leasehold.Handle(hs, "slider", func(ctx context.Context, task *leasehold.Task[int]) (string, error) {
		res, err := workflow.Map(ctx, "sq", task.Payload, func(i int) workflow.Child {
			return workflow.Child{Kind: "slidesq", Payload: i}
		}, workflow.MapOptions{MaxConcurrency: 25})
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%s %d/%d", res.Stopped, res.Succeeded, res.Total), nil
	})
	w := e.worker(t, leasehold.WorkerConfig{Handlers: hs})
	ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(3*time.Minute))
	defer cancel()
	if _, err := c.Enqueue(ctx, leasehold.Submission{Kind: "slider", Payload: 300, ID: "slid"}); err != nil {
		t.Fatal(err)
	}
	e.pump(t, w, 150*time.Second, func() bool { return e.status(t, "slid") == lease.StatusSucceeded })
	got := e.get(t, "slid")
	if string(got.Result) != `"all 300/300"` || got.Attempt != 1 || got.Fence > 4 {
		t.Errorf("slider: %s in attempt %d, fence %d; want all 300/300 in attempt 1 after at most 3 resumes", got.Result, got.Attempt, got.Fence)
	}
	mu.Lock()
	defer mu.Unlock()
	if peak > 25 || len(ran) != 300 {
		t.Errorf("%d children ran, at most %d at once; want 300, at most 25", len(ran), peak)
	}
	for id, n := range ran {
		if n != 1 {
			t.Errorf("%s ran %d times", id, n)
		}
	}
	t.Logf("300 children, 25 at a time: at most %d at once, parent fence %d", peak, got.Fence)
}

// A divergence on the stack (issue 35): a step renamed under a task in
// flight holds the task PENDING with the divergence as its error, the
// renamed step never running; the old code back, the task's next check
// (a minute later) replays its history and it succeeds, each step having
// run once. The steps on the table keep the operation that recorded them.
func TestDivergenceOnTheStack(t *testing.T) {
	t.Parallel()
	e := setupStack(t)
	c := newClientOn(t, e)
	var code atomic.Int32
	code.Store(1)
	count, runsOf := stepCounter()
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "versioned", func(ctx context.Context, _ *leasehold.Task[any]) (string, error) {
		summary := map[int32]string{1: "summarize", 2: "summarise"}[code.Load()]
		if _, err := workflow.Step(ctx, summary, count(summary)); err != nil {
			return "", err
		}
		if err := workflow.Sleep(ctx, 4*time.Second); err != nil {
			return "", err
		}
		return workflow.Step(ctx, "send", count("send"))
	})
	w := e.worker(t, leasehold.WorkerConfig{Handlers: hs})
	ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(4*time.Minute))
	defer cancel()
	if _, err := c.Enqueue(ctx, leasehold.Submission{Kind: "versioned", ID: "deployed-under"}); err != nil {
		t.Fatal(err)
	}
	e.pump(t, w, 60*time.Second, func() bool { return len(e.get(t, "deployed-under").Steps) == 2 })
	code.Store(2) // a deploy renames the step
	e.pump(t, w, 60*time.Second, func() bool { return strings.HasPrefix(e.get(t, "deployed-under").Error, "held: diverged") })
	held := e.get(t, "deployed-under")
	if held.Status != lease.StatusPending || held.Attempt != 0 && held.Attempt != 1 || len(held.Steps) != 2 ||
		!strings.Contains(held.Error, `at operation 1: recorded step string "summarize", the code asked for step string "summarise"`) {
		t.Fatalf("held: %s attempt %d, steps %d, error %q", held.Status, held.Attempt, len(held.Steps), held.Error)
	}
	if held.Steps[0].Op != "step string" || held.Steps[1].Op != "sleep" {
		t.Errorf("recorded operations %q, %q; want step string and sleep", held.Steps[0].Op, held.Steps[1].Op)
	}
	code.Store(1) // and the next deploy brings the old code back
	e.pump(t, w, 150*time.Second, func() bool { return e.status(t, "deployed-under") == lease.StatusSucceeded })
	runs := runsOf()
	if runs["summarize"] != 1 || runs["summarise"] != 0 || runs["send"] != 1 {
		t.Errorf("step runs %v; want summarize and send once, summarise never", runs)
	}
}

// stepCounter returns a step function maker that counts each step's runs
// by name, and a reader of the counts.
func stepCounter() (count func(name string) func(context.Context) (string, error), runs func() map[string]int) {
	var mu sync.Mutex
	n := map[string]int{}
	count = func(name string) func(context.Context) (string, error) {
		return func(context.Context) (string, error) {
			mu.Lock()
			defer mu.Unlock()
			n[name]++
			return name, nil
		}
	}
	runs = func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(n)
	}
	return count, runs
}

// TestContinueAsNewOnTheStack (issue 36, point 4): on the stack, a loop
// that continues as new after each iteration ends in its third run with
// the loop's result; its two ended runs are archived tasks with their own
// steps and inputs; the live item holds only the last run's steps.
func TestContinueAsNewOnTheStack(t *testing.T) {
	t.Parallel()
	e := setupStack(t)
	c := newClientOn(t, e)
	count, runsOf := stepCounter()
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "looping", func(ctx context.Context, task *leasehold.Task[int]) (int, error) {
		name := fmt.Sprintf("iteration-%d", task.Payload)
		if _, err := workflow.Step(ctx, name, count(name)); err != nil {
			return 0, err
		}
		if task.Payload < 3 {
			return 0, workflow.ContinueAsNew(ctx, task.Payload+1)
		}
		return task.Payload, nil
	})
	w := e.worker(t, leasehold.WorkerConfig{Handlers: hs})
	ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(4*time.Minute))
	defer cancel()
	if _, err := c.Enqueue(ctx, leasehold.Submission{Kind: "looping", ID: "looper", Payload: 1}); err != nil {
		t.Fatal(err)
	}
	e.pump(t, w, 120*time.Second, func() bool { return e.status(t, "looper") == lease.StatusSucceeded })
	got, err := c.Get(ctx, "looper")
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Result) != "3" || got.Run != 3 || strings.Join(got.Steps, " ") != "iteration-3" || string(got.Payload) != "3" {
		t.Fatalf("looper: result %s, run %d, steps %v, payload %s", got.Result, got.Run, got.Steps, got.Payload)
	}
	for n := 1; n <= 2; n++ {
		a, err := c.Get(ctx, fmt.Sprintf("looper@run%d", n))
		if err != nil {
			t.Fatal(err)
		}
		if a.Status != leasehold.StatusSucceeded || a.Parent != "looper" || strings.Join(a.Steps, " ") != fmt.Sprintf("iteration-%d", n) || string(a.Payload) != fmt.Sprint(n) || a.Run != n {
			t.Errorf("run %d: %s parent %s steps %v payload %s run %d", n, a.Status, a.Parent, a.Steps, a.Payload, a.Run)
		}
	}
	if runs := runsOf(); runs["iteration-1"] != 1 || runs["iteration-2"] != 1 || runs["iteration-3"] != 1 {
		t.Errorf("step runs %v, want each iteration once", runs)
	}
}
