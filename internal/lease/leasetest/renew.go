package leasetest

import (
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
)

func testRenewExtendsLease(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	claimed := e.createClaimed(e.newTask(), "w1")
	renew := func(prev lease.Task) lease.Task {
		t.Helper()
		got, err := e.store.Renew(e.ctx, prev.LeaseOf())
		if err != nil {
			t.Fatalf("Renew: %v", err)
		}
		want := prev
		want.LeaseUntil = e.now().Add(leaseFor)
		// A renewal leaves the sweep entry where it is.
		want.UpdatedAt = e.now()
		e.same("Renew", got, want)
		return got
	}
	e.clock.Advance(7 * time.Second)
	renewed := renew(claimed)
	e.stored(renewed)
	_, err := e.store.Claim(e.ctx, claimed.ID, "w2")
	wantLeased(t, err, "w1", renewed.LeaseUntil, leaseFor+skew)

	// Nobody took the expired lease over: it is still the task's lease.
	e.clock.Advance(leaseFor + skew + time.Second)
	e.stored(renew(renewed))
}

func testRenewReportsCancel(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	marker := e.cancelMarker()
	claimed := e.createClaimed(e.newTask(), "w1")
	renewed, err := e.store.Renew(e.ctx, claimed.LeaseOf())
	if err != nil || renewed.CancelRequested {
		t.Fatalf("Renew = cancel requested %v, %v; want false, nil", renewed.CancelRequested, err)
	}
	if err := marker.MarkCancelRequested(e.ctx, claimed.ID); err != nil {
		t.Fatalf("MarkCancelRequested: %v", err)
	}
	e.clock.Advance(time.Second)
	renewed, err = e.store.Renew(e.ctx, claimed.LeaseOf())
	if err != nil || !renewed.CancelRequested {
		t.Fatalf("Renew after a cancel request = cancel requested %v, %v; want true, nil", renewed.CancelRequested, err)
	}
	e.stored(renewed)
	// The flag stays with the finished task.
	e.stored(e.finish(renewed, nil))
}

func testRenewNeedsTheLease(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	claimed := e.createClaimed(e.newTask(), "w1")
	l := claimed.LeaseOf()

	wrong := l
	wrong.Owner = "w2"
	e.wantLeaseLost(wrong)
	wrong = l
	wrong.Fence++
	e.wantLeaseLost(wrong)
	wrong = l
	wrong.Attempt++
	e.wantLeaseLost(wrong)

	for _, bad := range []lease.Lease{{}, {TaskID: l.TaskID, Owner: l.Owner, Fence: l.Fence}, {TaskID: l.TaskID, Owner: l.Owner, Attempt: 1}} {
		_, err := e.store.Renew(e.ctx, bad)
		wantErr(t, "Renew of a hand-made lease", err, lease.ErrInvalid)
		_, err = e.store.Finish(e.ctx, bad, nil)
		wantErr(t, "Finish of a hand-made lease", err, lease.ErrInvalid)
		_, err = e.store.Release(e.ctx, bad, lease.Release{Status: lease.StatusFailed})
		wantErr(t, "Release of a hand-made lease", err, lease.ErrInvalid)
	}
	e.stored(claimed)

	unknown := lease.Lease{TaskID: e.id(), Owner: "w1", Fence: 1, Attempt: 1}
	_, err := e.store.Renew(e.ctx, unknown)
	wantErr(t, "Renew of an unknown task", err, lease.ErrNotFound)
	_, err = e.store.Finish(e.ctx, unknown, nil)
	wantErr(t, "Finish of an unknown task", err, lease.ErrNotFound)
	_, err = e.store.Release(e.ctx, unknown, lease.Release{Status: lease.StatusFailed})
	wantErr(t, "Release of an unknown task", err, lease.ErrNotFound)
	e.absent(unknown.TaskID)
}
