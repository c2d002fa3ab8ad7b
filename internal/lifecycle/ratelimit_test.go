package lifecycle_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/leasehold/leasehold/internal/durable"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/leasemem"
	"github.com/leasehold/leasehold/internal/lease/limiter"
	"github.com/leasehold/leasehold/internal/lifecycle"
	"github.com/leasehold/leasehold/internal/token"
	"github.com/leasehold/leasehold/settings"
)

// A queue's rate limit lets Starts tasks start in a window. The first
// claimed task that finds the window full is released with its attempt
// handed back (the reason in its error, a fresh delayed token, its message
// acknowledged); the tokens after it in the window are held back before
// their claim, with no write at all: not created, not claimed, their
// messages hidden until a later window and not acknowledged. In the next
// window they start. Another queue is not limited.
func TestRateLimitHoldsTasksBeyondTheWindow(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *lifecycle.Config) {
		c.RateLimits = map[string]settings.RateLimit{"work": {Starts: 2, Per: time.Second}}
	})
	ran := 0
	e.handlers["echo"] = func(_ context.Context, task lease.Task) ([]byte, error) {
		ran++
		return task.Payload, nil
	}
	// A stored task, dispatched by reference, counts like an inline one.
	if _, err := e.store.Create(t.Context(), lease.NewTask{ID: "stored", Kind: "echo", MaxAttempts: 3}); err != nil {
		t.Fatal(err)
	}
	msgs := []lifecycle.Message{msg("ref", token.Ref("stored"))}
	for i := range 4 {
		msgs = append(msgs, msg(fmt.Sprintf("m%d", i), inline(t, "echo", "", `{}`, 0)))
	}
	var held []lifecycle.Message
	for _, m := range msgs {
		res := e.exec.Process(t.Context(), nil, m)
		switch {
		case !res.Held:
			if !res.Ack || res.Outcome != lifecycle.OutcomeSucceeded {
				t.Errorf("%s: %+v, want it run or held", m.ID, res)
			}
		case m.ID == "m1": // the first to find the window full
			if !res.Ack || res.Outcome != lifecycle.OutcomeHeld || !strings.Contains(res.Reason, "rate limit of queue work (2/s)") {
				t.Errorf("%s held after its claim: %+v; want acknowledged (a fresh token stands for it), the limit in the reason", m.ID, res)
			}
			got := e.get(t, "m1")
			if got.Status != lease.StatusPending || got.Attempt != 0 || !strings.Contains(got.Error, "rate limit of queue work (2/s)") {
				t.Errorf("m1 after its hold: %s at attempt %d (%q); want PENDING, its attempt handed back, the reason", got.Status, got.Attempt, got.Error)
			}
		default:
			if res.Ack || !strings.Contains(res.Reason, "rate limit of queue work (2/s)") {
				t.Errorf("%s held: %+v; want not acknowledged, with the limit in the reason", m.ID, res)
			}
			if _, err := e.store.Get(t.Context(), m.ID); !errors.Is(err, lease.ErrNotFound) {
				t.Errorf("%s held before its claim: its task was written (%v)", m.ID, err)
			}
			held = append(held, m)
		}
	}
	if ran != 2 || len(held) != 2 {
		t.Fatalf("ran %d, held %d before their claim of 5 in one window; want 2 and 2", ran, len(held))
	}
	hidden := map[string]int32{}
	for _, v := range e.sqs.visibilityChanges() {
		hidden[aws.ToString(v.ReceiptHandle)] = v.VisibilityTimeout
	}
	for _, m := range held {
		if s := hidden[m.ReceiptHandle]; s < 1 || s > int32((15*time.Minute)/time.Second) {
			t.Errorf("held %s hidden for %ds; want 1s..15m", m.ID, s)
		}
	}
	var fresh []lifecycle.Message
	for i, s := range e.sqs.sentTo(workURL) {
		if s.DelaySeconds < 1 || aws.ToString(s.MessageBody) != token.Ref("m1") {
			t.Fatalf("sent %s delayed %ds; want only m1's fresh token, delayed", aws.ToString(s.MessageBody), s.DelaySeconds)
		}
		fresh = append(fresh, msg(fmt.Sprintf("fresh%d", i), aws.ToString(s.MessageBody)))
	}
	if len(fresh) != 1 {
		t.Fatalf("%d fresh tokens, want m1's", len(fresh))
	}

	// The next window starts the two held before their claim; m1 starts
	// from its fresh token when it is due (a later window).
	e.clock.Advance(time.Second)
	for _, m := range held {
		m.ReceiveCount++
		if res := e.exec.Process(t.Context(), nil, m); res.Held || res.Outcome != lifecycle.OutcomeSucceeded {
			t.Errorf("%s in the next window: %+v, want it run", m.ID, res)
		}
	}
	e.clock.Advance(max(e.clock.Until(e.get(t, "m1").RunAt), time.Second)) // a window with room
	if res := e.exec.Process(t.Context(), nil, fresh[0]); res.Outcome != lifecycle.OutcomeSucceeded {
		t.Errorf("m1 from its fresh token: %+v", res)
	}
	if got := e.get(t, "m1"); ran != 5 || got.Attempt != 1 {
		t.Errorf("ran %d in all, m1 at attempt %d; want 5, and m1 at its first attempt", ran, got.Attempt)
	}

	// Another queue has no limit.
	other := msg("elsewhere", inline(t, "echo", "", `{}`, 0))
	other.QueueURL, other.Queue = "https://sqs.test/000000000000/reports", "reports"
	if res := e.exec.Process(t.Context(), nil, other); res.Held || !res.Ack {
		t.Errorf("a token of an unlimited queue: %+v", res)
	}
}

// countedStarts counts the starts a rate window gave.
type countedStarts struct {
	*leasemem.Store
	mu     sync.Mutex
	starts int
}

func (c *countedStarts) TakeStart(ctx context.Context, key string, window time.Time, per time.Duration, limit int) (bool, error) {
	ok, err := c.Store.TakeStart(ctx, key, window, per, limit)
	if ok {
		c.mu.Lock()
		c.starts++
		c.mu.Unlock()
	}
	return ok, err
}

func (c *countedStarts) taken() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.starts
}

// Only a task claimed to run spends a start. A flood of references to
// tasks that do not exist, duplicate deliveries of a finished task, a token
// of a task leased elsewhere, a resume after a wait and a callback spend
// nothing, so the real task after them starts in its window.
func TestRateLimitCountsOnlyTasksClaimedToRun(t *testing.T) {
	t.Parallel()
	var counted *countedStarts
	e := setup(t, func(c *lifecycle.Config) {
		c.RateLimits = map[string]settings.RateLimit{"work": {Starts: 5, Per: time.Minute}}
		counted = &countedStarts{Store: c.Store.(*leasemem.Store)}
		c.Store = counted
	})
	e.handlers["echo"] = func(_ context.Context, task lease.Task) ([]byte, error) { return task.Payload, nil }
	e.handlers["parent"] = func(ctx context.Context, task lease.Task) ([]byte, error) {
		if _, ok := durable.WaitResultsOf(ctx); ok {
			return []byte(`"resumed"`), nil
		}
		return nil, &durable.AwaitChildrenError{Children: []durable.Child{{Kind: "echo", Payload: []byte(`1`)}}}
	}
	for i := range 5 {
		body := fmt.Sprintf(`{"v":1,"id":"no-such-task-%d"}`, i)
		if res := e.exec.Process(t.Context(), nil, msg(fmt.Sprintf("bogus%d", i), body)); res.Held || !strings.Contains(res.Reason, "not found") {
			t.Fatalf("bogus reference %d: %+v; want rejected as not found", i, res)
		}
	}
	if n := counted.taken(); n != 0 {
		t.Fatalf("5 references to missing tasks spent %d starts", n)
	}
	// A task that ran, then its token delivered twice more.
	if res := e.exec.Process(t.Context(), nil, msg("done", inline(t, "echo", "done", `1`, 0))); res.Outcome != lifecycle.OutcomeSucceeded {
		t.Fatalf("done: %+v", res)
	}
	for i := range 2 {
		if res := e.exec.Process(t.Context(), nil, msg(fmt.Sprintf("dup%d", i), token.Ref("done"))); res.Held || !res.Ack {
			t.Fatalf("duplicate %d of a finished task: %+v", i, res)
		}
	}
	// A task whose lease another worker holds.
	if _, err := e.store.CreateClaimed(t.Context(), lease.NewTask{ID: "busy", Kind: "echo", MaxAttempts: 3}, "elsewhere"); err != nil {
		t.Fatal(err)
	}
	if res := e.exec.Process(t.Context(), nil, msg("busy", token.Ref("busy"))); res.Held || res.Ack {
		t.Fatalf("a token of a leased task: %+v; want kept for later, not held", res)
	}
	if n := counted.taken(); n != 1 {
		t.Fatalf("starts after the duplicates and a leased task: %d, want 1 (done's)", n)
	}
	// A parent: its start, its child's, and not its resume.
	if res := e.exec.Process(t.Context(), nil, msg("p", inline(t, "parent", "p", "", 0))); res.Outcome != lifecycle.OutcomeSuspended {
		t.Fatalf("parent: %+v", res)
	}
	e.drainSent(t, 0)
	if got := e.get(t, "p"); got.Status != lease.StatusSucceeded {
		t.Fatalf("parent %s, want resumed and SUCCEEDED", got.Status)
	}
	if n := counted.taken(); n != 3 {
		t.Fatalf("starts after a parent, its child and its resume: %d, want 3", n)
	}
	// The real tasks after all that start in this window: two of them.
	for i := range 2 {
		if res := e.exec.Process(t.Context(), nil, msg(fmt.Sprintf("real%d", i), inline(t, "echo", "", `{}`, 0))); res.Held || res.Outcome != lifecycle.OutcomeSucceeded {
			t.Fatalf("real task %d after the flood: %+v; want it started in the window", i, res)
		}
	}
	if res := e.exec.Process(t.Context(), nil, msg("sixth", inline(t, "echo", "", `{}`, 0))); !res.Held {
		t.Fatalf("the sixth start of a 5/m window: %+v, want held", res)
	}
}

// A token held back at the receive count where tokens are replaced is
// handed to a fresh token (delayed by the hold) and its message
// acknowledged, so a long hold never sends it to the dead-letter queue.
func TestRateLimitReplacesAHeldTokenNearTheReceiveLimit(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *lifecycle.Config) {
		c.RateLimits = map[string]settings.RateLimit{"work": {Starts: 1, Per: time.Minute}}
	})
	e.handlers["echo"] = func(_ context.Context, task lease.Task) ([]byte, error) { return nil, nil }
	if res := e.exec.Process(t.Context(), nil, msg("first", inline(t, "echo", "", "", 0))); !res.Ack || res.Held {
		t.Fatalf("first: %+v", res)
	}
	// The second finds the window full (and is released); the worker
	// remembers the window as full.
	if res := e.exec.Process(t.Context(), nil, msg("second", inline(t, "echo", "", "", 0))); !res.Held || res.Outcome != lifecycle.OutcomeHeld {
		t.Fatalf("second: %+v, want held after its claim", res)
	}
	mark := len(e.sqs.sentTo(workURL))
	m := msg("late", inline(t, "echo", "", `{"n":1}`, 0))
	m.ReceiveCount = lifecycle.DefaultReplaceAtReceiveCount
	res := e.exec.Process(t.Context(), nil, m)
	if !res.Held || !res.Ack {
		t.Fatalf("held at the receive limit: %+v; want held, and acknowledged once replaced", res)
	}
	sent := e.sqs.sentTo(workURL)[mark:]
	if len(sent) != 1 {
		t.Fatalf("%d tokens sent, want the replacement", len(sent))
	}
	tok, err := token.Decode(aws.ToString(sent[0].MessageBody))
	if err != nil || tok.ID != "late" || tok.Kind != "echo" || string(tok.Payload) != `{"n":1}` {
		t.Errorf("replacement %+v (%v); want the inline task with its id made explicit", tok, err)
	}
	if sent[0].DelaySeconds < 1 {
		t.Errorf("replacement delayed %ds; want the hold", sent[0].DelaySeconds)
	}
}

// A rate limit needs a store with rate windows, and a well-formed limit.
func TestRateLimitConfig(t *testing.T) {
	t.Parallel()
	for name, limits := range map[string]map[string]settings.RateLimit{
		"no starts":    {"work": {Starts: 0, Per: time.Second}},
		"part-seconds": {"work": {Starts: 1, Per: 1500 * time.Millisecond}},
		"twice":        {"": {Starts: 1, Per: time.Second}, "work": {Starts: 2, Per: time.Second}},
	} {
		cfg := lifecycle.Config{Store: noRates{}, SQS: newFakeSQS(), QueueURL: workURL, Owner: "w",
			Handlers: func(string) (lifecycle.Handler, bool) { return nil, false }, RateLimits: limits}
		if _, err := lifecycle.New(cfg); !errors.Is(err, lifecycle.ErrConfig) {
			t.Errorf("%s: New = %v, want ErrConfig", name, err)
		}
	}
	cfg := lifecycle.Config{Store: noRates{}, SQS: newFakeSQS(), QueueURL: workURL, Owner: "w",
		Handlers:   func(string) (lifecycle.Handler, bool) { return nil, false },
		RateLimits: map[string]settings.RateLimit{"work": {Starts: 1, Per: time.Second}}}
	if _, err := lifecycle.New(cfg); !errors.Is(err, lifecycle.ErrConfig) || !strings.Contains(err.Error(), "rate windows") {
		t.Errorf("a store without rate windows: New = %v, want ErrConfig", err)
	}
}

// noRates is a store without rate windows.
type noRates struct{ lease.Store }

// A kind's concurrency limit: while one attempt of the kind runs, a second
// claimed task of it is released to PENDING without using an attempt, with
// the reason, and a delayed token; once the first ends its slot is free
// again, and the second runs from its token. Another kind is not limited.
func TestKindConcurrencyHoldsTasksBeyondTheLimit(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *lifecycle.Config) { c.KindConcurrency = map[string]int{"slow": 1} })
	release := make(chan struct{})
	started := make(chan string, 4)
	e.handlers["slow"] = func(ctx context.Context, task lease.Task) ([]byte, error) {
		started <- task.ID
		select {
		case <-release:
			return nil, nil
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
	e.handlers["fast"] = func(context.Context, lease.Task) ([]byte, error) { return nil, nil }
	first := e.processAsync(t.Context(), msg("a", inline(t, "slow", "", "", 3)))
	if id := <-started; id != "a" {
		t.Fatalf("started %s", id)
	}
	if got := e.store.Slots("slow"); len(got) != 1 {
		t.Fatalf("slots of slow while a runs: %v", got)
	}

	res := e.exec.Process(t.Context(), nil, msg("b", inline(t, "slow", "", "", 3)))
	if !res.Held || !res.Ack || res.Outcome != lifecycle.OutcomeHeld {
		t.Fatalf("b at the limit: %+v; want held, acknowledged once its token is re-sent", res)
	}
	b := e.get(t, "b")
	if b.Status != lease.StatusPending || b.Attempt != 0 || !strings.Contains(b.Error, `kind "slow" is at its concurrency limit (1 running)`) {
		t.Fatalf("b after the hold: %s attempt %d error %q", b.Status, b.Attempt, b.Error)
	}
	var token string
	for _, s := range e.sqs.sentTo(workURL) {
		if s.DelaySeconds >= 1 && strings.Contains(aws.ToString(s.MessageBody), `"b"`) {
			token = aws.ToString(s.MessageBody)
		}
	}
	if token == "" {
		t.Fatalf("no delayed token for b; sent %v", e.sqs.sentTo(workURL))
	}
	if res := e.exec.Process(t.Context(), nil, msg("c", inline(t, "fast", "", "", 3))); !res.Ack || res.Outcome != lifecycle.OutcomeSucceeded {
		t.Errorf("a kind without a limit: %+v", res)
	}

	close(release)
	if res := first(); res.Outcome != lifecycle.OutcomeSucceeded {
		t.Fatalf("a: %+v", res)
	}
	if got := e.store.Slots("slow"); len(got) != 0 {
		t.Fatalf("slots of slow once a ended: %v", got)
	}
	e.clock.Advance(time.Minute)
	if res := e.exec.Process(t.Context(), nil, msg("b-again", token)); res.Outcome != lifecycle.OutcomeSucceeded {
		t.Fatalf("b from its token: %+v", res)
	}
	if b := e.get(t, "b"); b.Status != lease.StatusSucceeded || b.Attempt != 1 {
		t.Errorf("b: %s at attempt %d, want SUCCEEDED at 1", b.Status, b.Attempt)
	}
	if got := e.store.Slots("slow"); len(got) != 0 {
		t.Errorf("slots of slow at the end: %v", got)
	}
}

// A slot is given back whatever the attempt's end: a failure retried too.
func TestKindConcurrencySlotFreedWhenTheAttemptFails(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *lifecycle.Config) { c.KindConcurrency = map[string]int{"bad": 2} })
	e.handlers["bad"] = func(context.Context, lease.Task) ([]byte, error) { return nil, errors.New("boom") }
	for i := range 3 {
		if res := e.exec.Process(t.Context(), nil, msg(fmt.Sprintf("m%d", i), inline(t, "bad", "", "", 3))); res.Outcome != lifecycle.OutcomeRetried {
			t.Fatalf("m%d: %+v, want retried (not held: each slot was given back)", i, res)
		}
	}
	if got := e.store.Slots("bad"); len(got) != 0 {
		t.Errorf("slots after three failed attempts: %v", got)
	}
}

// A worker that died holding a slot: while its attempt's lease lasts, the
// slot stays taken and another task of the kind is held back; once the
// lease has run out (beyond the skew), the next attempt finds the set full,
// gives the lost attempt's slot back and runs, long before the slot's own
// time (the dead invocation's deadline) would have freed it.
func TestKindConcurrencyFreesTheSlotOfADeadWorker(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *lifecycle.Config) { c.KindConcurrency = map[string]int{"slow": 1} })
	e.handlers["slow"] = func(context.Context, lease.Task) ([]byte, error) { return nil, nil }
	dead, err := e.store.CreateClaimed(t.Context(), lease.NewTask{ID: "dead", Kind: "slow", MaxAttempts: 3}, "gone")
	if err != nil {
		t.Fatal(err)
	}
	deadHolder := limiter.SlotHolder(dead.ID, dead.Fence)
	if ok, err := e.store.AcquireSlot(t.Context(), "slow", deadHolder, 1, e.clock.Now().Add(15*time.Minute)); err != nil || !ok {
		t.Fatalf("the dead worker's slot: %t %v", ok, err)
	}
	if res := e.exec.Process(t.Context(), nil, msg("b", inline(t, "slow", "", "", 3))); !res.Held {
		t.Fatalf("b while the dead worker's lease lasts: %+v, want held", res)
	}
	e.clock.Advance(20*time.Second + 3*time.Second) // the lease and the skew
	if res := e.exec.Process(t.Context(), nil, msg("c", inline(t, "slow", "", "", 3))); res.Held || res.Outcome != lifecycle.OutcomeSucceeded {
		t.Fatalf("c once the dead worker's lease ran out: %+v, want it run", res)
	}
	if got := e.store.Slots("slow"); len(got) != 0 {
		t.Errorf("slots of slow at the end: %v (the dead worker's should be gone)", got)
	}
}
