package lifecycle_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lifecycle"
	"github.com/leasehold/leasehold/internal/token"
	"github.com/leasehold/leasehold/settings"
)

// A queue's rate limit lets Starts tokens start in a window and holds the
// rest back before any write to their tasks: not created, not claimed, no
// attempt used; their messages are hidden until a later window and not
// acknowledged. In the next window they start. Another queue is not
// limited, and neither are callbacks or wake tokens.
func TestRateLimitHoldsTokensBackBeforeTheClaim(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *lifecycle.Config) {
		c.RateLimits = map[string]settings.RateLimit{"work": {Starts: 2, Per: time.Second}}
	})
	ran := 0
	e.handlers["echo"] = func(_ context.Context, task lease.Task) ([]byte, error) {
		ran++
		return task.Payload, nil
	}
	// A stored task, dispatched by reference, is held back like an inline one.
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
		case res.Held:
			if res.Ack || !strings.Contains(res.Reason, "rate limit of queue work (2/s)") {
				t.Errorf("%s held: %+v; want not acknowledged, with the limit in the reason", m.ID, res)
			}
			held = append(held, m)
		case !res.Ack || res.Outcome != lifecycle.OutcomeSucceeded:
			t.Errorf("%s: %+v, want it run or held", m.ID, res)
		}
	}
	if ran != 2 || len(held) != 3 {
		t.Fatalf("ran %d, held %d of 5 in one window; want 2 and 3", ran, len(held))
	}
	for _, m := range held {
		if m.ID == "ref" {
			if got := e.get(t, "stored"); got.Status != lease.StatusPending || got.Attempt != 0 {
				t.Errorf("a held stored task is %s at attempt %d; want PENDING, no attempt used", got.Status, got.Attempt)
			}
		} else if _, err := e.store.Get(t.Context(), m.ID); !errors.Is(err, lease.ErrNotFound) {
			t.Errorf("held inline token %s: its task was written (%v)", m.ID, err)
		}
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

	// The next window starts two more; the third waits again.
	e.clock.Advance(time.Second)
	again := 0
	for _, m := range held {
		m.ReceiveCount++
		if res := e.exec.Process(t.Context(), nil, m); res.Held {
			again++
		} else if !res.Ack {
			t.Errorf("%s in the next window: %+v", m.ID, res)
		}
	}
	if ran != 4 || again != 1 {
		t.Errorf("next window: ran %d in all, held %d again; want 4 and 1", ran, again)
	}

	// Another queue has no limit.
	other := msg("elsewhere", inline(t, "echo", "", `{}`, 0))
	other.QueueURL, other.Queue = "https://sqs.test/000000000000/reports", "reports"
	if res := e.exec.Process(t.Context(), nil, other); res.Held || !res.Ack {
		t.Errorf("a token of an unlimited queue: %+v", res)
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
	m := msg("late", inline(t, "echo", "", `{"n":1}`, 0))
	m.ReceiveCount = lifecycle.DefaultReplaceAtReceiveCount
	res := e.exec.Process(t.Context(), nil, m)
	if !res.Held || !res.Ack {
		t.Fatalf("held at the receive limit: %+v; want held, and acknowledged once replaced", res)
	}
	sent := e.sqs.sentTo(workURL)
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
	deadHolder := lease.SlotHolder(dead.ID, dead.Fence)
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
