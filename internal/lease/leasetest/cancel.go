package leasetest

import (
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
)

func testCancelPending(t *testing.T, a *adminEnv) {
	n := a.newTask()
	task := a.create(n)
	a.clock.Advance(time.Second)
	got, err := a.admin.RequestCancel(a.ctx, task.ID)
	if err != nil {
		t.Fatalf("RequestCancel: %v", err)
	}
	want := a.cancelled(task)
	a.same("RequestCancel", got, want)
	a.stored(want)
	if len(want.History) != 1 || want.History[0].Attempt != 0 {
		t.Fatalf("history %+v, want one entry for attempt 0", want.History)
	}
	_, err = a.store.Claim(a.ctx, task.ID, "w1")
	wantFinished(t, err, lease.StatusCancelled)
	sameDue(t, "after the cancel", a.dueAll(a.now().Add(24*time.Hour)), nil)
	_, err = a.admin.RequestCancel(a.ctx, task.ID)
	wantFinished(t, err, lease.StatusCancelled)
}

func testCancelPendingAfterAttempt(t *testing.T, a *adminEnv) {
	claimed := a.createClaimed(a.newTask(), "w1")
	a.clock.Advance(time.Second)
	back := a.release(claimed, lease.Release{Status: lease.StatusPending, RunAt: a.now().Add(time.Hour), Error: "try later"})
	a.clock.Advance(time.Second)
	got, err := a.admin.RequestCancel(a.ctx, back.ID)
	if err != nil {
		t.Fatalf("RequestCancel: %v", err)
	}
	want := a.cancelled(back)
	a.same("RequestCancel", got, want)
	a.stored(want)
	if h := want.History; len(h) != 2 || h[1].Attempt != 1 || h[1].Fence != 1 {
		t.Fatalf("history %+v, want the cancel recorded after attempt 1", h)
	}
}

func testCancelRunning(t *testing.T, a *adminEnv) {
	claimed := a.createClaimed(a.newTask(), "w1")
	a.clock.Advance(time.Second)
	got, err := a.admin.RequestCancel(a.ctx, claimed.ID)
	if err != nil {
		t.Fatalf("RequestCancel: %v", err)
	}
	want := claimed
	want.CancelRequested = true
	want.UpdatedAt = a.now()
	a.same("RequestCancel", got, want)
	a.stored(want)
	// Asking again changes nothing but the time.
	a.clock.Advance(time.Second)
	if _, err := a.admin.RequestCancel(a.ctx, claimed.ID); err != nil {
		t.Fatalf("RequestCancel again: %v", err)
	}
	renewed, err := a.store.Renew(a.ctx, claimed.LeaseOf())
	if err != nil || !renewed.CancelRequested || renewed.Status != lease.StatusRunning {
		t.Fatalf("Renew = %s, cancel requested %t, %v; want RUNNING, true, nil", renewed.Status, renewed.CancelRequested, err)
	}
	ended := a.release(renewed, lease.Release{Status: lease.StatusCancelled, Error: "cancelled"})
	if ended.Status != lease.StatusCancelled || !ended.CancelRequested {
		t.Fatalf("after release: %s, cancel requested %t", ended.Status, ended.CancelRequested)
	}
}

func testCancelFinishedOrUnknown(t *testing.T, a *adminEnv) {
	done := a.finish(a.createClaimed(a.newTask(), "w1"), []byte(`1`))
	_, err := a.admin.RequestCancel(a.ctx, done.ID)
	wantFinished(t, err, lease.StatusSucceeded)
	a.stored(done)
	failed := a.release(a.createClaimed(a.newTask(), "w1"), lease.Release{Status: lease.StatusFailed, Error: "x"})
	_, err = a.admin.RequestCancel(a.ctx, failed.ID)
	wantFinished(t, err, lease.StatusFailed)
	_, err = a.admin.RequestCancel(a.ctx, a.id())
	wantErr(t, "RequestCancel of an unknown id", err, lease.ErrNotFound)
}

// The cancel flag a cancel of a RUNNING task sets stays through the
// holder's release to PENDING and the next claim, and through the task's
// end; only a retry clears it. A cancel of the PENDING task then cancels
// it. (The history check, history_test.go, models the flag so.)
func testCancelFlagLifecycle(t *testing.T, a *adminEnv) {
	claimed, err := a.admin.RequestCancel(a.ctx, a.createClaimed(a.newTask(), "w1").ID)
	if err != nil || !claimed.CancelRequested {
		t.Fatalf("RequestCancel: flag %t, %v", claimed.CancelRequested, err)
	}
	released := a.release(claimed, lease.Release{Status: lease.StatusPending, RunAt: a.now(), Error: "again"})
	if !released.CancelRequested {
		t.Fatal("a release to PENDING cleared the cancel flag")
	}
	again := a.claim(released, "w2")
	if !again.CancelRequested {
		t.Fatal("the next claim cleared the cancel flag")
	}
	done := a.finish(again, []byte(`1`))
	if !done.CancelRequested {
		t.Fatal("the finish cleared the cancel flag")
	}
	failed := a.release(a.createClaimed(a.newTask(), "w1"), lease.Release{Status: lease.StatusFailed, Error: "x"})
	cancelledFirst, err := a.admin.RequestCancel(a.ctx, a.createClaimed(a.newTask(), "w1").ID)
	if err != nil {
		t.Fatal(err)
	}
	ended := a.release(cancelledFirst, lease.Release{Status: lease.StatusCancelled, Error: "cancelled"})
	for _, prev := range []lease.Task{failed, ended} {
		got, err := a.admin.Retry(a.ctx, prev.ID, 1)
		if err != nil || got.CancelRequested {
			t.Fatalf("Retry of %s: cancel requested %t, %v; want the flag cleared", prev.Status, got.CancelRequested, err)
		}
	}
	pending := a.release(a.createClaimed(a.newTask(), "w1"), lease.Release{Status: lease.StatusPending, RunAt: a.now(), Error: "again"})
	got, err := a.admin.RequestCancel(a.ctx, pending.ID)
	if err != nil || got.Status != lease.StatusCancelled || !got.CancelRequested {
		t.Fatalf("cancel of a PENDING task: %s, flag %t, %v; want CANCELLED with the flag", got.Status, got.CancelRequested, err)
	}
}
