package leasetest

import (
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
)

func testFinishStoresResult(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	first := e.createClaimed(e.newTask(), "w1")
	e.clock.Advance(time.Second)
	retry := e.release(first, lease.Release{Status: lease.StatusPending, RunAt: e.now(), Error: "timeout"})
	e.clock.Advance(time.Second)
	second := e.claim(retry, "w2")
	e.clock.Advance(4 * time.Second)

	done := e.finish(second, []byte(`{"sent":true,"id":"m-1"}`))
	if done.Status != lease.StatusSucceeded || done.Error != "" || !done.DispatchAt.IsZero() ||
		!done.FinishedAt.Equal(e.now()) || !done.ExpiresAt.Equal(expires(e.now())) || done.LeaseOwner != "" {
		t.Fatalf("finished task %+v", done)
	}
	e.stored(done)

	_, err := e.store.Claim(e.ctx, done.ID, "w3")
	wantFinished(t, err, lease.StatusSucceeded)
	e.wantLeaseLost(second.LeaseOf())
	e.stored(done)
}

func testFinishRejectsBadResult(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	claimed := e.createClaimed(e.newTask(), "w1")
	e.clock.Advance(time.Second)

	_, err := e.store.Finish(e.ctx, claimed.LeaseOf(), jsonText(lease.MaxResultBytes+1))
	wantErr(t, "Finish with a large result", err, lease.ErrTooLarge)
	var tl *lease.TooLargeError
	if !errors.As(err, &tl) || tl.What != "result" || tl.Size != lease.MaxResultBytes+1 || tl.Limit != lease.MaxResultBytes {
		t.Fatalf("Finish with a large result: error %v, want *TooLargeError for the result", err)
	}
	_, err = e.store.Finish(e.ctx, claimed.LeaseOf(), []byte("\"\xc3\x28\""))
	wantErr(t, "Finish with a non-UTF-8 result", err, lease.ErrInvalid)
	e.stored(claimed)

	e.stored(e.finish(claimed, jsonText(lease.MaxResultBytes)))
}

func testFinishWithoutRetention(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore, func(o *lease.Options) { o.Retention = -1 })
	done := e.finish(e.createClaimed(e.newTask(), "w1"), []byte(`1`))
	failed := e.release(e.createClaimed(e.newTask(), "w1"), lease.Release{Status: lease.StatusFailed, Error: "bad input"})
	for _, task := range []lease.Task{done, failed} {
		if !task.ExpiresAt.IsZero() {
			t.Fatalf("%s task expires at %s, want never", task.Status, task.ExpiresAt)
		}
		e.stored(task)
	}
}
