package lifecycle_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/leasehold/leasehold/internal/durable"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lifecycle"
	"github.com/leasehold/leasehold/internal/token"
)

// replayingStore stands for an SDK that retries a write whose response was
// lost: the first try lands in the store, its answer is dropped, and the
// caller gets the answer of the retry. Only the operations named in replay
// are affected, each once.
type replayingStore struct {
	lease.Store
	mu     sync.Mutex
	replay map[string]bool
}

func (r *replayingStore) take(op string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.replay[op] {
		delete(r.replay, op)
		return true
	}
	return false
}

func (r *replayingStore) CreateClaimed(ctx context.Context, n lease.NewTask, owner string) (lease.Task, error) {
	if r.take("create") {
		if _, err := r.Store.CreateClaimed(ctx, n, owner); err != nil {
			return lease.Task{}, err
		}
	}
	return r.Store.CreateClaimed(ctx, n, owner)
}

func (r *replayingStore) CreateFailed(ctx context.Context, n lease.NewTask, reason string) (lease.Task, error) {
	if r.take("create") {
		if _, err := r.Store.CreateFailed(ctx, n, reason); err != nil {
			return lease.Task{}, err
		}
	}
	return r.Store.CreateFailed(ctx, n, reason)
}

func (r *replayingStore) Claim(ctx context.Context, id, owner string) (lease.Task, error) {
	if r.take("claim") {
		if _, err := r.Store.Claim(ctx, id, owner); err != nil {
			return lease.Task{}, err
		}
	}
	return r.Store.Claim(ctx, id, owner)
}

func (r *replayingStore) Finish(ctx context.Context, l lease.Lease, result []byte) (lease.Task, error) {
	if r.take("finish") {
		if _, err := r.Store.Finish(ctx, l, result); err != nil {
			return lease.Task{}, err
		}
	}
	return r.Store.Finish(ctx, l, result)
}

func (r *replayingStore) Release(ctx context.Context, l lease.Lease, rel lease.Release) (lease.Task, error) {
	if r.take("release") {
		if _, err := r.Store.Release(ctx, l, rel); err != nil {
			return lease.Task{}, err
		}
	}
	return r.Store.Release(ctx, l, rel)
}

func replaying(ops ...string) func(*lifecycle.Config) {
	return func(c *lifecycle.Config) {
		r := &replayingStore{Store: c.Store, replay: map[string]bool{}}
		for _, op := range ops {
			r.replay[op] = true
		}
		c.Store = r
	}
}

// A worker whose write landed but whose response was lost recognises its own
// write in what the SDK's retry saw, instead of reading it as another
// worker's: no lease_lost, no hidden message, no attempt burnt.
func TestOwnWriteRecognisedAfterLostResponse(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		replay  string
		ref     bool // dispatch a reference to a stored PENDING task
		fail    bool // the handler fails (the outcome is a release)
		outcome lifecycle.Outcome
		status  lease.Status
	}{
		{name: "create", replay: "create", outcome: lifecycle.OutcomeSucceeded, status: lease.StatusSucceeded},
		{name: "claim", replay: "claim", ref: true, outcome: lifecycle.OutcomeSucceeded, status: lease.StatusSucceeded},
		{name: "finish", replay: "finish", outcome: lifecycle.OutcomeSucceeded, status: lease.StatusSucceeded},
		{name: "release", replay: "release", fail: true, outcome: lifecycle.OutcomeRetried, status: lease.StatusPending},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, replaying(c.replay))
			runs := 0
			e.handlers["k"] = func(context.Context, lease.Task) ([]byte, error) {
				runs++
				if c.fail {
					return nil, errors.New("transient")
				}
				return []byte(`"ok"`), nil
			}
			body := inline(t, "k", "own", `{"a":1}`, 3)
			if c.ref {
				if _, err := e.store.Create(t.Context(), lease.NewTask{ID: "own", Kind: "k", Payload: []byte(`{"a":1}`), MaxAttempts: 3}); err != nil {
					t.Fatal(err)
				}
				body = token.Ref("own")
			}
			res := e.exec.Process(t.Context(), nil, msg("m1", body))
			if !res.Ack || res.Outcome != c.outcome {
				t.Fatalf("result %+v, want acked %s", res, c.outcome)
			}
			got := e.get(t, "own")
			if runs != 1 || got.Status != c.status || got.Attempt != 1 || got.Fence != 1 {
				t.Fatalf("handler ran %d times; stored %s attempt %d fence %d; want once, %s, attempt 1, fence 1",
					runs, got.Status, got.Attempt, got.Fence, c.status)
			}
			if v := e.sqs.visibilityChanges(); len(v) != 0 {
				t.Fatalf("message hidden as if leased elsewhere: %+v", v)
			}
		})
	}
}

// stealingRenewals hands the lease to "w2" just before the first renewal,
// as a takeover after a stall would, so the renewer learns the lease is gone
// for certain.
type stealingRenewals struct {
	lease.Store
	clock interface{ Now() time.Time }
	once  sync.Once
}

func (s *stealingRenewals) Renew(ctx context.Context, l lease.Lease) (lease.Task, error) {
	var err error
	s.once.Do(func() {
		if _, err = s.Store.Release(ctx, l, lease.Release{Status: lease.StatusPending, RunAt: s.clock.Now()}); err == nil {
			_, err = s.Store.Claim(ctx, l.TaskID, "w2")
		}
	})
	if err != nil {
		return lease.Task{}, err
	}
	return s.Store.Renew(ctx, l)
}

// A fenced-out worker must not acknowledge a token while the task can still
// run: the new holder may have got the task through this very message, and
// if it dies nothing else brings the task back. The token is replaced by a
// fresh one, delayed until the new lease can be taken over.
func TestFencedOutWorkerReplacesTokenOfRunningTask(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"renewal", "finish"} {
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			e := setup(t, func(c *lifecycle.Config) {
				if path == "renewal" {
					c.Store = &stealingRenewals{Store: c.Store, clock: c.Clock}
				} else {
					c.Store = failingRenewals{c.Store}
				}
			})
			started := make(chan struct{})
			runs := 0
			e.handlers["k"] = func(ctx context.Context, task lease.Task) ([]byte, error) {
				runs++
				if runs > 1 {
					return []byte(`"second"`), nil
				}
				close(started)
				<-ctx.Done()
				if path == "renewal" {
					return nil, context.Cause(ctx)
				}
				return []byte(`"stale"`), nil // tries to finish anyway
			}
			wait := e.processAsync(t.Context(), msg("m1", inline(t, "k", "t1", "", 3)))
			<-started
			switch path {
			case "renewal":
				if err := e.clock.BlockUntilContext(t.Context(), 1); err != nil {
					t.Fatal(err)
				}
				e.clock.Advance(10 * time.Second) // first renewal: the lease is gone
			case "finish":
				// Renewals fail until the lease runs out locally; then w2
				// takes over (expiry + skew) before the old holder writes.
				for range 8 {
					if err := e.clock.BlockUntilContext(t.Context(), 1); err != nil {
						t.Fatal(err)
					}
					e.clock.Advance(2500 * time.Millisecond)
				}
				e.clock.Advance(3 * time.Second)
				if _, err := e.store.Claim(t.Context(), "t1", "w2"); err != nil {
					t.Fatalf("takeover: %v", err)
				}
			}
			res := wait()
			if res.Outcome != lifecycle.OutcomeLeaseLost || !res.Ack {
				t.Fatalf("old holder result %+v, want lease lost, acked after its replacement", res)
			}
			held := e.get(t, "t1")
			if held.Status != lease.StatusRunning || held.LeaseOwner != "w2" {
				t.Fatalf("task %s held by %q, want RUNNING by w2", held.Status, held.LeaseOwner)
			}
			sent := e.sqs.sentTo(workURL)
			if len(sent) != 1 || aws.ToString(sent[0].MessageBody) != token.Ref("t1") {
				t.Fatalf("tokens sent %+v, want one reference to t1", sent)
			}
			// Until w2's lease ends (20s from its claim) plus the margin.
			if want := int32(e.clock.Until(held.LeaseUntil.Add(10*time.Second)) / time.Second); sent[0].DelaySeconds != want {
				t.Fatalf("fresh token delayed %ds, want %ds", sent[0].DelaySeconds, want)
			}

			// w2 dies. The fresh token brings the task back.
			e.clock.Advance(time.Duration(sent[0].DelaySeconds) * time.Second)
			res = e.exec.Process(t.Context(), nil, msg("m2", aws.ToString(sent[0].MessageBody)))
			if got := e.get(t, "t1"); res.Outcome != lifecycle.OutcomeSucceeded || got.Status != lease.StatusSucceeded || string(got.Result) != `"second"` {
				t.Fatalf("after the new holder died: %+v, stored %s %s", res, got.Status, got.Result)
			}
		})
	}
}

// An over-limit inline payload is recorded without its bytes and must never
// run: it is created FAILED in one write; when the create's response is lost
// and the retry meets the created task, or the task is found already stored,
// it still ends FAILED without running.
func TestOverLimitPayloadNeverRuns(t *testing.T) {
	t.Parallel()
	big := `{"v":1,"kind":"k","id":"big","payload":{"blob":"` + strings.Repeat("x", lease.MaxPayloadBytes) + `"}}`
	for _, c := range []string{"create response lost", "task already stored", "task already failed", "no dead-letter URL"} {
		t.Run(c, func(t *testing.T) {
			t.Parallel()
			var tweak func(*lifecycle.Config)
			switch c {
			case "create response lost":
				tweak = replaying("create")
			case "no dead-letter URL":
				tweak = func(c *lifecycle.Config) { c.DeadLetterURL = "" }
			}
			e := setup(t, tweak)
			if c == "task already stored" {
				if _, err := e.store.Create(t.Context(), lease.NewTask{ID: "big", Kind: "k", MaxAttempts: 3}); err != nil {
					t.Fatal(err)
				}
			}
			ran := false
			e.handlers["k"] = func(context.Context, lease.Task) ([]byte, error) { ran = true; return nil, nil }
			if c == "task already failed" { // an earlier receive recorded it, and its ack was lost
				e.exec.Process(t.Context(), nil, msg("m1", big))
			}
			res := e.exec.Process(t.Context(), nil, msg("m1", big))
			got := e.get(t, "big")
			if ran || got.Status != lease.StatusFailed || !strings.Contains(got.Error, "payload is") {
				t.Fatalf("ran=%v result %+v stored %s %q; want FAILED with the payload error, never run", ran, res, got.Status, got.Error)
			}
			// The stored task has no payload: the message is acknowledged
			// only once its body is on the dead-letter queue. Without a
			// dead-letter URL it is left to the queue's redrive policy,
			// which moves it, body and all, after maxReceiveCount receives.
			forwarded := 0
			for _, d := range e.sqs.sentTo(dlqURL) {
				if aws.ToString(d.MessageBody) == big && strings.Contains(aws.ToString(d.MessageAttributes[lifecycle.AttrReason].StringValue), "payload is") {
					forwarded++
				}
			}
			if c == "no dead-letter URL" {
				if res.Ack || forwarded != 0 {
					t.Fatalf("acked=%v, %d forwarded; want the message kept for the redrive policy", res.Ack, forwarded)
				}
				return
			}
			if !res.Ack || forwarded == 0 {
				t.Fatalf("acked=%v, %d copies on the dead-letter queue; want acked after the body is there", res.Ack, forwarded)
			}
		})
	}
}

// A result the store can never keep fails the task at once with the real
// reason, instead of re-running the handler until its lease runs out.
func TestUnstorableResultFailsAtOnce(t *testing.T) {
	t.Parallel()
	cases := map[string][]byte{
		"not UTF-8":     []byte("\"\xff\""),
		"not JSON":      []byte(`{"open":`),
		"over the size": []byte(`"` + strings.Repeat("x", lease.MaxResultBytes) + `"`),
		"too deep":      []byte(strings.Repeat("[", lease.MaxJSONDepth+1) + strings.Repeat("]", lease.MaxJSONDepth+1)),
	}
	// The reason names the limit that was broken.
	wants := map[string]string{"not JSON": "is not a JSON document", "over the size": "over the 65536-byte limit", "too deep": "deeper than 10000 levels"}
	for name, result := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, nil)
			runs := 0
			e.handlers["k"] = func(context.Context, lease.Task) ([]byte, error) { runs++; return result, nil }
			res := e.exec.Process(t.Context(), nil, msg("m1", inline(t, "k", "r1", "", 5)))
			got := e.get(t, "r1")
			if !res.Ack || res.Outcome != lifecycle.OutcomeFailed || runs != 1 || got.Status != lease.StatusFailed ||
				!strings.Contains(got.Error, "result") || !strings.Contains(got.Error, wants[name]) || strings.Contains(got.Error, "expired") {
				t.Fatalf("result %+v, runs %d, stored %s %q; want FAILED at once with the result's problem", res, runs, got.Status, got.Error)
			}
		})
	}
}

// An unknown kind may be known to another fleet on the same queue (a rolling
// deploy, a shared queue): the task is released without using an attempt,
// with a wait that grows, and fails only once the kind has stayed unknown
// for the limit.
func TestUnknownKindUsesNoAttempt(t *testing.T) {
	t.Parallel()
	const limit = time.Hour
	e := setup(t, func(c *lifecycle.Config) {
		c.UnknownKindBackoffMin = 10 * time.Second
		c.UnknownKindBackoffMax = 15 * time.Minute
		c.UnknownKindLimit = limit
	})
	first := e.clock.Now()
	body := inline(t, "later", "u1", "", 1)
	var delays []int32
	for round := 1; ; round++ {
		res := e.exec.Process(t.Context(), nil, msg("m", body))
		got := e.get(t, "u1")
		if !res.Ack || !strings.Contains(got.Error, `unknown task kind "later"`) {
			t.Fatalf("round %d: result %+v, stored %s %q", round, res, got.Status, got.Error)
		}
		if e.clock.Since(first) >= limit {
			if got.Status != lease.StatusFailed || res.Outcome != lifecycle.OutcomeFailed || !strings.Contains(got.Error, "no worker had a handler") {
				t.Fatalf("past the limit: %s %s %q, want FAILED with the reason", got.Status, res.Outcome, got.Error)
			}
			break
		}
		sent := e.sqs.sentTo(workURL)
		if got.Status != lease.StatusPending || got.Attempt != 0 || res.Outcome != lifecycle.OutcomeUnknownKind || len(sent) != round {
			t.Fatalf("round %d: %s attempt %d %s, %d tokens; want PENDING, attempt 0, a token per round", round, got.Status, got.Attempt, res.Outcome, len(sent))
		}
		if !got.UnknownKindSince.Equal(first.Truncate(time.Millisecond)) {
			t.Fatalf("round %d: unknown since %s, want %s", round, got.UnknownKindSince, first)
		}
		d := sent[round-1].DelaySeconds
		if d < 5 || d > 15*60 {
			t.Fatalf("round %d: delay %ds outside 5s..15m", round, d)
		}
		delays = append(delays, d)
		e.clock.Advance(time.Duration(d) * time.Second)
		body = aws.ToString(sent[round-1].MessageBody)
		if round > 100 {
			t.Fatalf("still offered after %d rounds; delays %v", round, delays)
		}
	}
	if len(delays) < 4 || delays[len(delays)-1] <= delays[0] {
		t.Fatalf("delays %v, want them to grow", delays)
	}

	// The fleet that knows the kind picks the task up, and a known kind
	// clears the record of the unknown one.
	e2 := setup(t, nil)
	e2.handlers["later"] = func(context.Context, lease.Task) ([]byte, error) { return []byte(`1`), nil }
	res := e2.exec.Process(t.Context(), nil, msg("m", inline(t, "later", "u2", "", 3)))
	if res.Outcome != lifecycle.OutcomeSucceeded {
		t.Fatalf("known kind: %+v", res)
	}
}

// A snooze shorter than MinSnooze (zero, negative) waits MinSnooze: no hot
// loop.
func TestSnoozeHasAFloor(t *testing.T) {
	t.Parallel()
	for _, d := range []time.Duration{0, -time.Minute, time.Millisecond} {
		t.Run(d.String(), func(t *testing.T) {
			t.Parallel()
			e := setup(t, nil)
			e.handlers["k"] = func(context.Context, lease.Task) ([]byte, error) { return nil, &durable.SnoozeError{Delay: d} }
			res := e.exec.Process(t.Context(), nil, msg("m1", inline(t, "k", "s1", "", 3)))
			got := e.get(t, "s1")
			sent := e.sqs.sentTo(workURL)
			if res.Outcome != lifecycle.OutcomeSnoozed || !got.RunAt.Equal(e.clock.Now().Add(lifecycle.MinSnooze)) ||
				len(sent) != 1 || sent[0].DelaySeconds != int32(lifecycle.MinSnooze/time.Second) {
				t.Fatalf("result %+v, run at %s, tokens %+v; want a snooze of %s", res, got.RunAt, sent, lifecycle.MinSnooze)
			}
		})
	}
}

// A message whose task is leased elsewhere is hidden while it has receives
// to spare; from ReplaceAtReceiveCount on it is replaced by a fresh token,
// so it never reaches the queue's maxReceiveCount.
func TestTokenNearMaxReceiveCountIsReplaced(t *testing.T) {
	t.Parallel()
	for _, count := range []int{lifecycle.DefaultReplaceAtReceiveCount - 1, lifecycle.DefaultReplaceAtReceiveCount, lifecycle.DefaultMaxReceiveCount} {
		t.Run(strings.Repeat("I", count), func(t *testing.T) {
			t.Parallel()
			e := setup(t, nil)
			if _, err := e.store.CreateClaimed(t.Context(), lease.NewTask{ID: "busy", Kind: "k", MaxAttempts: 3}, "elsewhere"); err != nil {
				t.Fatal(err)
			}
			e.clock.Advance(5 * time.Second)
			m := msg("m1", token.Ref("busy"))
			m.ReceiveCount = count
			res := e.exec.Process(t.Context(), nil, m)
			hidden, sent := e.sqs.visibilityChanges(), e.sqs.sentTo(workURL)
			if count < lifecycle.DefaultReplaceAtReceiveCount {
				if res.Ack || len(hidden) != 1 || hidden[0].VisibilityTimeout != 27 || len(sent) != 0 {
					t.Fatalf("receive %d: %+v, hidden %+v, sent %+v; want hidden 27s", count, res, hidden, sent)
				}
				return
			}
			if !res.Ack || len(hidden) != 0 || len(sent) != 1 || sent[0].DelaySeconds != 27 || aws.ToString(sent[0].MessageBody) != token.Ref("busy") {
				t.Fatalf("receive %d: %+v, hidden %+v, sent %+v; want a fresh token delayed 27s, then acked", count, res, hidden, sent)
			}
			if d := e.sqs.deletedHandles(); len(d) != 1 || d[0] != "rh-m1" {
				t.Fatalf("receive %d: deleted %v, want the replaced message rh-m1 deleted at once", count, d)
			}
		})
	}
}

// When the fresh token cannot be sent, the old message is kept (not acked).
func TestTokenKeptWhenReplacementFails(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.sqs.failSend = true
	if _, err := e.store.CreateClaimed(t.Context(), lease.NewTask{ID: "busy", Kind: "k", MaxAttempts: 3}, "elsewhere"); err != nil {
		t.Fatal(err)
	}
	m := msg("m1", token.Ref("busy"))
	m.ReceiveCount = lifecycle.DefaultMaxReceiveCount
	if res := e.exec.Process(t.Context(), nil, m); res.Ack || len(e.sqs.deletedHandles()) != 0 {
		t.Fatalf("acked or deleted without a replacement: %+v, deleted %v", res, e.sqs.deletedHandles())
	}
}

// A message claimed on its ReplaceAtReceiveCount-th receive hands the task
// to a fresh token before the handler runs, and is deleted at once: if this
// attempt crashed, the old message would come back once more, perhaps past
// maxReceiveCount into the dead-letter queue. Nothing else is sent for it.
func TestClaimNearMaxReceiveCountHandsTaskToFreshToken(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	if _, err := e.store.Create(t.Context(), lease.NewTask{ID: "hc", Kind: "k", MaxAttempts: 3}); err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	proceed := make(chan struct{})
	e.handlers["k"] = func(ctx context.Context, task lease.Task) ([]byte, error) {
		close(started)
		<-proceed
		return nil, errors.New("transient")
	}
	m := msg("m1", token.Ref("hc"))
	m.ReceiveCount = lifecycle.DefaultReplaceAtReceiveCount
	wait := e.processAsync(t.Context(), m)
	<-started
	sent := e.sqs.sentTo(workURL)
	if len(sent) != 1 || aws.ToString(sent[0].MessageBody) != token.Ref("hc") || sent[0].DelaySeconds != 30 {
		t.Fatalf("tokens sent before the handler ran: %+v; want one reference delayed 30s (lease + margin)", sent)
	}
	if d := e.sqs.deletedHandles(); len(d) != 1 || d[0] != "rh-m1" {
		t.Fatalf("deleted %v, want the old message rh-m1", d)
	}
	// A renewal renews the lease but no longer touches the deleted message.
	if err := e.clock.BlockUntilContext(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(10 * time.Second)
	if err := e.clock.BlockUntilContext(t.Context(), 1); err != nil { // the renewer's next timer
		t.Fatal(err)
	}
	if got := e.get(t, "hc"); !got.LeaseUntil.Equal(e.clock.Now().Add(20 * time.Second)) {
		t.Fatalf("lease until %s, want renewed to %s", got.LeaseUntil, e.clock.Now().Add(20*time.Second))
	}
	close(proceed)
	res := wait()
	if !res.Ack || res.Outcome != lifecycle.OutcomeRetried {
		t.Fatalf("result %+v, want acked retry", res)
	}
	if v := e.sqs.visibilityChanges(); len(v) != 0 {
		t.Fatalf("visibility of the deleted message changed: %+v", v)
	}
	if sent := e.sqs.sentTo(workURL); len(sent) != 1 {
		t.Fatalf("%d tokens sent, want only the one sent at the claim", len(sent))
	}
	// The fresh token carries the retry: early, it is sent again with the
	// time still to wait; due, it runs the next attempt.
	if got := e.get(t, "hc"); got.Status != lease.StatusPending {
		t.Fatalf("task %s, want PENDING", got.Status)
	}
}
