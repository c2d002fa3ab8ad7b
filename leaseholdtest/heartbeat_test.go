package leaseholdtest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/workflow"
)

// beatingHandlers register "job": it waits 24 hours for a callback with a
// 10-minute heartbeat timeout, handing each attempt's token to handed.
func beatingHandlers(handed chan<- string) *leasehold.Handlers {
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "job", func(ctx context.Context, task *leasehold.Task[int]) (string, error) {
		got, err := workflow.WaitForCallback[string](ctx, "done", 24*time.Hour, func(ctx context.Context, token string) error {
			handed <- token
			return nil
		}, workflow.HeartbeatTimeout(10*time.Minute))
		return "done by " + got, err
	})
	return hs
}

// A wait with a 10-minute heartbeat timeout survives an hour of beats
// every 5 minutes, then times out 10 minutes after the last beat (long
// before its 24-hour timeout): the attempt fails with the heartbeat's
// reason and is retried with a new token; the old token's beat is
// refused.
func TestEnvCallbackHeartbeat(t *testing.T) {
	t.Parallel()
	handed := make(chan string, 4)
	env := leaseholdtest.New(t, beatingHandlers(handed))
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "job", MaxAttempts: 2})
	mustRun(t, env)
	tok := <-handed
	for range 12 { // an hour
		env.Clock().Advance(5 * time.Minute)
		mustRun(t, env)
		if got := mustTask(t, env, id); got.Status != leasehold.StatusWaiting || got.Attempt != 1 {
			t.Fatalf("beating: %s attempt %d (%q), want WAITING in attempt 1", got.Status, got.Attempt, got.Error)
		}
		if err := env.HeartbeatCallback(tok); err != nil {
			t.Fatal(err)
		}
	}
	env.Clock().Advance(9*time.Minute + 59*time.Second)
	mustRun(t, env)
	if got := mustTask(t, env, id); got.Status != leasehold.StatusWaiting || got.Attempt != 1 {
		t.Fatalf("a second before the heartbeat deadline: %s attempt %d (%q)", got.Status, got.Attempt, got.Error)
	}
	env.Clock().Advance(time.Second)
	mustRun(t, env)
	got := mustTask(t, env, id)
	if got.Status != leasehold.StatusWaiting || got.Attempt != 2 || len(got.History) == 0 {
		t.Fatalf("after the heartbeat deadline: %s attempt %d, want WAITING again in attempt 2", got.Status, got.Attempt)
	}
	var timedOut leasehold.AttemptInfo
	for _, a := range got.History {
		if a.Attempt == 1 && a.Status == leasehold.StatusPending {
			timedOut = a
		}
	}
	const reason = "callback heartbeat timed out after 10m0s: no heartbeat since 2026-01-01T01:00:00Z"
	if timedOut.Error != reason || !timedOut.At.Equal(time.Date(2026, 1, 1, 1, 10, 0, 0, time.UTC)) {
		t.Fatalf("attempt 1 ended with %q at %v, want %q at 01:10 (history %+v)", timedOut.Error, timedOut.At, reason, got.History)
	}
	if err := env.HeartbeatCallback(tok); !errors.Is(err, leasehold.ErrBadCallback) || !errors.Is(err, leasehold.ErrNotWaiting) {
		t.Errorf("a beat with the timed-out attempt's token: %v, want ErrBadCallback and ErrNotWaiting", err)
	}
	second := <-handed
	if err := env.HeartbeatCallback(second); err != nil {
		t.Fatal(err)
	}
	if err := env.CompleteCallback(second, "ops"); err != nil {
		t.Fatal(err)
	}
	mustRun(t, env)
	if got := mustTask(t, env, id); got.Status != leasehold.StatusSucceeded || string(got.Result) != `"done by ops"` {
		t.Fatalf("job: %s %s (%q)", got.Status, got.Result, got.Error)
	}
	if err := env.HeartbeatCallback(second); !errors.Is(err, leasehold.ErrBadCallback) {
		t.Errorf("a beat after the answer: %v, want ErrBadCallback", err)
	}
}

// A wait without a heartbeat timeout refuses a beat, and a bad heartbeat
// timeout fails the attempt at once.
func TestEnvHeartbeatNeedsATimeout(t *testing.T) {
	t.Parallel()
	handed := make(chan string, 1)
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "plain", func(ctx context.Context, task *leasehold.Task[int]) (string, error) {
		return workflow.WaitForCallback[string](ctx, "done", time.Hour, func(ctx context.Context, token string) error {
			handed <- token
			return nil
		})
	})
	leasehold.Handle(hs, "bad", func(ctx context.Context, task *leasehold.Task[int]) (string, error) {
		return workflow.WaitForCallback[string](ctx, "done", time.Hour, func(context.Context, string) error { return nil },
			workflow.HeartbeatTimeout(2*time.Hour))
	})
	env := leaseholdtest.New(t, hs)
	mustEnqueue(t, env, leasehold.Submission{Kind: "plain"})
	bad := mustEnqueue(t, env, leasehold.Submission{Kind: "bad", MaxAttempts: 3})
	mustRun(t, env)
	if err := env.HeartbeatCallback(<-handed); !errors.Is(err, leasehold.ErrInvalid) {
		t.Errorf("a beat for a wait without heartbeats: %v, want ErrInvalid", err)
	}
	if got := mustTask(t, env, bad); got.Status != leasehold.StatusFailed || !strings.Contains(got.Error, "heartbeat timeout 2h0m0s is outside") {
		t.Errorf("a heartbeat timeout over the wait's timeout: %s (%q), want FAILED saying why", got.Status, got.Error)
	}
}
