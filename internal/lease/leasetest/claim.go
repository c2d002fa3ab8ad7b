package leasetest

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
)

func testClaimUnknown(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	id := e.id()
	_, err := e.store.Claim(e.ctx, id, "w1")
	wantErr(t, "Claim", err, lease.ErrNotFound)
	for _, other := range []error{lease.ErrLeased, lease.ErrFinished, lease.ErrNotDue, lease.ErrBackend} {
		if errors.Is(err, other) {
			t.Fatalf("Claim: %v also matches %v", err, other)
		}
	}
	e.absent(id) // the claim must not have created an item
}

func testClaimNotDue(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	n := e.newTask()
	n.RunAt = e.now().Add(time.Hour)
	created := e.create(n)
	_, err := e.store.Claim(e.ctx, n.ID, "w1")
	wantNotDue(t, err, n.RunAt)

	e.clock.Advance(time.Hour - time.Millisecond)
	_, err = e.store.Claim(e.ctx, n.ID, "w1")
	wantNotDue(t, err, n.RunAt)
	e.stored(created)

	e.clock.Advance(time.Millisecond)
	e.stored(e.claim(created, "w1"))
}

func testClaimPending(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	created := e.create(e.newTask())
	e.clock.Advance(3 * time.Second)
	claimed := e.claim(created, "w1")
	if claimed.Attempt != 1 || claimed.Fence != 1 || !bytes.Equal(claimed.Payload, created.Payload) {
		t.Fatalf("claimed attempt %d fence %d payload %q", claimed.Attempt, claimed.Fence, claimed.Payload)
	}
	e.stored(claimed)
}

func testClaimRejectsEmptyOwner(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	created := e.create(e.newTask())
	_, err := e.store.Claim(e.ctx, created.ID, "")
	wantErr(t, "Claim without owner", err, lease.ErrInvalid)
	e.stored(created)
}

func testClaimLosesToLiveLease(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	claimed := e.createClaimed(e.newTask(), "w1")
	_, err := e.store.Claim(e.ctx, claimed.ID, "w2")
	wantLeased(t, err, "w1", claimed.LeaseUntil, leaseFor+skew)
	_, err = e.store.Claim(e.ctx, claimed.ID, "w1") // the holder too
	wantLeased(t, err, "w1", claimed.LeaseUntil, leaseFor+skew)
	e.clock.Advance(5 * time.Second)
	_, err = e.store.Claim(e.ctx, claimed.ID, "w2")
	wantLeased(t, err, "w1", claimed.LeaseUntil, leaseFor+skew-5*time.Second)
	e.stored(claimed)
}

func testClaimConcurrent(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	created := e.create(e.newTask())
	const claimers = 8
	type outcome struct {
		owner string
		task  lease.Task
		err   error
	}
	outcomes := make(chan outcome, claimers)
	begin := make(chan struct{})
	var wg sync.WaitGroup
	for i := range claimers {
		owner := fmt.Sprintf("w%d", i)
		wg.Go(func() {
			select {
			case <-begin:
			case <-e.ctx.Done():
				outcomes <- outcome{owner: owner, err: e.ctx.Err()}
				return
			}
			task, err := e.store.Claim(e.ctx, created.ID, owner)
			outcomes <- outcome{owner, task, err}
		})
	}
	close(begin)
	wg.Wait()
	close(outcomes)

	var winners []outcome
	var losers []error
	for o := range outcomes {
		if o.err == nil {
			winners = append(winners, o)
		} else {
			losers = append(losers, o.err)
		}
	}
	if len(winners) != 1 {
		t.Fatalf("%d claims won, want exactly 1 (losers: %v)", len(winners), losers)
	}
	won := winners[0]
	e.same("winning Claim", won.task, e.held(created, won.owner))
	for _, err := range losers {
		wantLeased(t, err, won.owner, won.task.LeaseUntil, leaseFor+skew)
	}
	e.stored(won.task)
}

func testTakeover(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	first := e.createClaimed(e.newTask(), "w1")

	e.clock.Advance(leaseFor) // expired, within the skew bound
	_, err := e.store.Claim(e.ctx, first.ID, "w2")
	wantLeased(t, err, "w1", first.LeaseUntil, skew)
	e.clock.Advance(skew) // exactly at expiry plus skew
	_, err = e.store.Claim(e.ctx, first.ID, "w2")
	wantLeased(t, err, "w1", first.LeaseUntil, 0)
	e.stored(first)

	e.clock.Advance(time.Millisecond)
	second := e.claim(first, "w2")
	if second.Fence != first.Fence+1 || second.Attempt != first.Attempt+1 {
		t.Fatalf("takeover: fence %d attempt %d after fence %d attempt %d", second.Fence, second.Attempt, first.Fence, first.Attempt)
	}
	e.wantLeaseLost(first.LeaseOf())
	e.stored(second)

	e.clock.Advance(time.Second)
	done := e.finish(second, []byte(`{"by":"w2"}`))
	e.wantLeaseLost(first.LeaseOf())
	e.wantLeaseLost(second.LeaseOf())
	// The expired first attempt ended without a write of its own, so only
	// the second one is in the history.
	if len(done.History) != 1 || done.History[0].Fence != second.Fence {
		t.Fatalf("history %+v, want only the second attempt", done.History)
	}
	e.stored(done)
}
