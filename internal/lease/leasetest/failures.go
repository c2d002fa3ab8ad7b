package leasetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
)

func testCancelledContext(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	cancelled, cancel := context.WithCancel(e.ctx)
	cancel()
	failed := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, lease.ErrBackend) && !errors.Is(err, context.Canceled) {
			t.Fatalf("%s with a cancelled context: error %v, want ErrBackend or context.Canceled", what, err)
		}
		for _, class := range []error{lease.ErrNotFound, lease.ErrAlreadyExists, lease.ErrLeased, lease.ErrLeaseLost, lease.ErrFinished} {
			if errors.Is(err, class) {
				t.Fatalf("%s with a cancelled context: %v is classified as %v", what, err, class)
			}
		}
	}

	n := e.newTask()
	_, err := e.store.Create(cancelled, n)
	failed("Create", err)
	_, err = e.store.CreateClaimed(cancelled, n, "w1")
	failed("CreateClaimed", err)
	e.absent(n.ID)

	pending := e.create(e.newTask())
	_, err = e.store.Claim(cancelled, pending.ID, "w1")
	failed("Claim", err)
	e.stored(pending)

	claimed := e.claim(pending, "w1")
	e.clock.Advance(time.Second)
	_, err = e.store.Renew(cancelled, claimed.LeaseOf())
	failed("Renew", err)
	_, err = e.store.Finish(cancelled, claimed.LeaseOf(), []byte(`1`))
	failed("Finish", err)
	_, err = e.store.Release(cancelled, claimed.LeaseOf(), lease.Release{Status: lease.StatusFailed})
	failed("Release", err)
	_, err = e.store.Get(cancelled, claimed.ID)
	failed("Get", err)
	e.stored(claimed)
}

func testFailedWritesCarryObserved(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	held := e.createClaimed(e.newTask(), "w1")

	e.clock.Advance(time.Second)
	_, err := e.store.Claim(e.ctx, held.ID, "w2")
	wantErr(t, "claim of a held task", err, lease.ErrLeased)
	if got := e.observed("claim of a held task", err, held); lease.ClaimedBy("w2", got) || !lease.ClaimedBy("w1", got) {
		t.Fatalf("ClaimedBy: w2 %v, w1 %v; want false, true", lease.ClaimedBy("w2", got), lease.ClaimedBy("w1", got))
	}

	stale := held.LeaseOf()
	stale.Fence++
	_, err = e.store.Finish(e.ctx, stale, []byte(`1`))
	var lost *lease.LeaseLostError
	if !errors.As(err, &lost) || !errors.Is(err, lease.ErrLeaseLost) {
		t.Fatalf("finish under a wrong fence: error %v, want *LeaseLostError", err)
	}
	e.observed("finish under a wrong fence", err, held)
	_, err = e.store.Renew(e.ctx, stale)
	e.observed("renew under a wrong fence", err, held)

	done := e.finish(held, []byte(`"ok"`))
	_, err = e.store.Claim(e.ctx, held.ID, "w2")
	wantFinished(t, err, lease.StatusSucceeded)
	e.observed("claim of a finished task", err, done)
	_, err = e.store.Release(e.ctx, held.LeaseOf(), lease.Release{Status: lease.StatusFailed, Error: "late"})
	e.observed("release after the finish", err, done)
}

// A retried write meets its own earlier landing: the failure carries the
// item that shows it, and Landed and ClaimedBy recognise it, while another
// holder's writes are never taken for one's own.
func testRetriedWritesRecogniseOwn(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	n := e.newTask()
	first, err := e.store.CreateClaimed(e.ctx, n, "w1#1")
	if err != nil {
		t.Fatalf("CreateClaimed: %v", err)
	}
	again, err := e.store.CreateClaimed(e.ctx, n, "w1#1")
	wantErr(t, "CreateClaimed retried", err, lease.ErrAlreadyExists)
	if !lease.ClaimedBy("w1#1", again) || again.Fence != 1 {
		t.Fatalf("retried CreateClaimed returned %+v; want the own lease at fence 1", again)
	}

	e.clock.Advance(time.Second)
	released := e.release(first, lease.Release{Status: lease.StatusPending, RunAt: e.now(), Error: "retry"})
	_, err = e.store.Release(e.ctx, first.LeaseOf(), lease.Release{Status: lease.StatusPending, RunAt: e.now(), Error: "retry"})
	got := e.observed("release retried", err, released)
	if !lease.Landed(first.LeaseOf(), lease.StatusPending, got) || lease.Landed(first.LeaseOf(), lease.StatusFailed, got) {
		t.Fatalf("Landed after the own release: PENDING %v, FAILED %v; want true, false",
			lease.Landed(first.LeaseOf(), lease.StatusPending, got), lease.Landed(first.LeaseOf(), lease.StatusFailed, got))
	}

	second := e.claim(released, "w2#1")
	_, err = e.store.Claim(e.ctx, n.ID, "w2#1")
	if got := e.observed("claim retried", err, second); !lease.ClaimedBy("w2#1", got) {
		t.Fatalf("retried claim does not see its own lease: %+v", got)
	}
	// The first holder's release is still recognised after the task moved on.
	_, err = e.store.Release(e.ctx, first.LeaseOf(), lease.Release{Status: lease.StatusPending, RunAt: e.now()})
	if got := e.observed("release retried after a new claim", err, second); !lease.Landed(first.LeaseOf(), lease.StatusPending, got) {
		t.Fatal("own release not recognised once the task was claimed again")
	}

	e.clock.Advance(time.Second)
	done := e.finish(second, []byte(`"r"`))
	_, err = e.store.Finish(e.ctx, second.LeaseOf(), []byte(`"r"`))
	got = e.observed("finish retried", err, done)
	if !lease.Landed(second.LeaseOf(), lease.StatusSucceeded, got) {
		t.Fatal("own finish not recognised")
	}
	if lease.Landed(first.LeaseOf(), lease.StatusSucceeded, got) {
		t.Fatal("the second holder's finish taken for the first holder's")
	}
}
