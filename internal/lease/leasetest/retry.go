package leasetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/query"
)

func testRetryFailed(t *testing.T, a *adminEnv) {
	n := a.newTask()
	n.MaxAttempts = 1
	failed := a.release(a.createClaimed(n, "w1"), lease.Release{Status: lease.StatusFailed, Error: "boom"})
	a.clock.Advance(time.Minute)
	got, err := a.admin.Retry(a.ctx, failed.ID, 2)
	if err != nil {
		t.Fatalf("Retry: %v", err)
	}
	want := a.retried(failed, 2)
	a.same("Retry", got, want)
	a.stored(want)
	sameDue(t, "after the grace", a.dueAll(a.now().Add(grace)), map[string]time.Time{want.ID: want.DispatchAt})

	again := a.claim(got, "w2")
	if again.Attempt != 2 || again.Fence != 2 || len(again.History) != 1 {
		t.Fatalf("claim after retry: attempt %d, fence %d, %d history entries; want 2, 2, 1", again.Attempt, again.Fence, len(again.History))
	}
	done := a.finish(again, []byte(`"ok"`))
	if len(done.History) != 2 || done.History[0].Status != lease.StatusFailed || done.History[1].Status != lease.StatusSucceeded {
		t.Fatalf("history %+v, want FAILED then SUCCEEDED", done.History)
	}
	_, err = a.admin.Retry(a.ctx, done.ID, 1)
	wantErr(t, "Retry of a succeeded task", err, query.ErrNotRetryable)
}

func testRetryCancelled(t *testing.T, a *adminEnv) {
	task := a.create(a.newTask())
	if _, err := a.admin.RequestCancel(a.ctx, task.ID); err != nil {
		t.Fatalf("RequestCancel: %v", err)
	}
	cancelled := a.cancelled(task)
	a.clock.Advance(time.Second)
	got, err := a.admin.Retry(a.ctx, task.ID, 3)
	if err != nil {
		t.Fatalf("Retry: %v", err)
	}
	want := a.retried(cancelled, 3)
	a.same("Retry", got, want)
	a.stored(want)
	a.claim(got, "w1")
}

func testRetryRejects(t *testing.T, a *adminEnv) {
	pending := a.create(a.newTask())
	_, err := a.admin.Retry(a.ctx, pending.ID, 1)
	wantErr(t, "Retry of a pending task", err, query.ErrNotRetryable)
	running := a.createClaimed(a.newTask(), "w1")
	_, err = a.admin.Retry(a.ctx, running.ID, 1)
	wantErr(t, "Retry of a running task", err, query.ErrNotRetryable)
	a.stored(pending)
	a.stored(running)
	_, err = a.admin.Retry(a.ctx, a.id(), 1)
	wantErr(t, "Retry of an unknown id", err, lease.ErrNotFound)

	failed := a.release(running, lease.Release{Status: lease.StatusFailed, Error: "x"})
	for _, extra := range []int{0, -1, lease.MaxAttemptsLimit + 1} {
		_, err = a.admin.Retry(a.ctx, failed.ID, extra)
		wantErr(t, fmt.Sprintf("Retry with %d more attempts", extra), err, lease.ErrInvalid)
	}
	// One attempt used: 100 more would go over the limit of 100.
	_, err = a.admin.Retry(a.ctx, failed.ID, lease.MaxAttemptsLimit)
	wantErr(t, "Retry over the attempts limit", err, lease.ErrInvalid)
	a.stored(failed)
	if _, err = a.admin.Retry(a.ctx, failed.ID, lease.MaxAttemptsLimit-1); err != nil {
		t.Fatalf("Retry up to the limit: %v", err)
	}
}
