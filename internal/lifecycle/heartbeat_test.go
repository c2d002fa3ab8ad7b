package lifecycle_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/durable"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lifecycle"
	"github.com/leasehold/leasehold/internal/token"
)

// TestHeartbeatMessageKeepsACallbackWaitAlive: a wait with a heartbeat
// timeout sends no timer token and sits in the sweep index at its first
// heartbeat deadline; a {"heartbeat": TOKEN} message is one write that
// moves the heartbeat deadline (not the entry); the sweep's token at the
// old deadline moves the entry on; without beats the attempt fails at the
// heartbeat deadline, long before the wait's timeout; a beat for the ended
// wait is dropped, acknowledged with its reason, and a forged one is
// rejected.
func TestHeartbeatMessageKeepsACallbackWaitAlive(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	tokens := make(chan string, 4)
	e.handlers["approve"] = func(ctx context.Context, task lease.Task) ([]byte, error) {
		cb, err := durable.CallbackTokenOf(ctx)
		if err != nil {
			return nil, err
		}
		tokens <- cb
		return nil, &durable.AwaitCallbackError{Timeout: time.Hour, Heartbeat: 10 * time.Minute}
	}
	start := e.clock.Now()
	if res := e.exec.Process(t.Context(), nil, msg("x", inline(t, "approve", "x", "", 2))); res.Outcome != lifecycle.OutcomeSuspended {
		t.Fatalf("%+v", res)
	}
	cb := <-tokens
	if sent := e.sqs.sentTo(workURL); len(sent) != 0 {
		t.Fatalf("a wait with a heartbeat timeout sent %d messages, want none (its sweep entry ends it)", len(sent))
	}
	if got := e.get(t, "x"); !got.DispatchAt.Equal(start.Add(10*time.Minute)) || got.HeartbeatTimeout != 10*time.Minute {
		t.Fatalf("suspended: sweep entry %v, heartbeat timeout %v; want the entry at the first heartbeat deadline", got.DispatchAt, got.HeartbeatTimeout)
	}

	e.clock.Advance(5 * time.Minute)
	before := e.store.Calls()
	if res := e.exec.Process(t.Context(), nil, msg("b1", token.HeartbeatMessage(cb))); !res.Ack || res.Reason != "" {
		t.Fatalf("heartbeat: %+v", res)
	}
	if c := e.store.Calls(); c.Writes-before.Writes != 1 {
		t.Errorf("a heartbeat made %d writes, want 1", c.Writes-before.Writes)
	}
	got := e.get(t, "x")
	if !got.BeatUntil.Equal(start.Add(15*time.Minute)) || !got.DispatchAt.Equal(start.Add(10*time.Minute)) {
		t.Fatalf("after a beat: heartbeat deadline %v, sweep entry %v", got.BeatUntil, got.DispatchAt)
	}
	parsed, err := token.ParseCallback(cb)
	if err != nil {
		t.Fatal(err)
	}
	parsed.Nonce = strings.Repeat("A", len(parsed.Nonce))
	if res := e.exec.Process(t.Context(), nil, msg("forged", token.HeartbeatMessage(parsed.String()))); !res.Ack || !strings.Contains(res.Reason, "heartbeat rejected") {
		t.Fatalf("forged heartbeat: %+v", res)
	}

	// The sweep's token at the first heartbeat deadline: beats came, so
	// the wait goes on and its entry moves to the heartbeat deadline.
	e.clock.Advance(6 * time.Minute)
	e.exec.Process(t.Context(), nil, msg("sweep1", token.Ref("x")))
	if got := e.get(t, "x"); got.Status != lease.StatusWaiting || !got.DispatchAt.Equal(start.Add(15*time.Minute)) {
		t.Fatalf("at the first heartbeat deadline, after a beat: %s, sweep entry %v; want WAITING, the entry at %v", got.Status, got.DispatchAt, start.Add(15*time.Minute))
	}

	// No more beats: the attempt fails at the heartbeat deadline.
	e.clock.Advance(4 * time.Minute)
	e.exec.Process(t.Context(), nil, msg("sweep2", token.Ref("x")))
	got = e.get(t, "x")
	if got.Status != lease.StatusPending || !strings.HasPrefix(got.Error, "callback heartbeat timed out after 10m0s") || got.HeartbeatTimeout != 0 {
		t.Fatalf("after the heartbeat deadline: %s %q (heartbeat %v)", got.Status, got.Error, got.HeartbeatTimeout)
	}
	if res := e.exec.Process(t.Context(), nil, msg("late", token.HeartbeatMessage(cb))); !res.Ack || !strings.Contains(res.Reason, "heartbeat dropped") {
		t.Fatalf("a beat for the ended wait: %+v, want acknowledged and dropped with the reason", res)
	}
	if sent := e.sqs.sentTo(dlqURL); len(sent) != 1 {
		t.Errorf("dead-lettered %d messages, want 1 (the forged beat; the late one is dropped)", len(sent))
	}
}
