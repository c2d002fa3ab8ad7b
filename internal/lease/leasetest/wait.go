package leasetest

import (
	"slices"

	"github.com/leasehold/leasehold/internal/lease"
)

// child creates and claims a child of parent.
func (e *env) child(parent lease.Task, owner string) lease.Task {
	e.t.Helper()
	n := e.newTask()
	n.Parent = parent.ID
	got, err := e.store.CreateClaimed(e.ctx, n, owner)
	if err != nil {
		e.t.Fatalf("CreateClaimed(child of %s): %v", parent.ID, err)
	}
	if got.Parent != parent.ID || !slices.Equal(got.Waiters, []lease.Waiter{{ID: parent.ID, Mode: lease.WaitChildren}}) {
		e.t.Fatalf("child: parent %q waiters %v, want %s and it as a children waiter", got.Parent, got.Waiters, parent.ID)
	}
	return got
}

func (e *env) suspend(prev lease.Task, w lease.Wait) lease.Task {
	e.t.Helper()
	got, err := e.store.Suspend(e.ctx, prev.LeaseOf(), w)
	if err != nil {
		e.t.Fatalf("Suspend(%s): %v", prev.ID, err)
	}
	want := e.ended(prev, lease.StatusWaiting, "")
	want.Wait, want.WaitNote = w.Mode, w.Note
	want.Ended = prev.Ended
	// Every wait has a deadline, and a sweep entry that ends it there
	// (DispatchAt, the deadline unless set).
	want.WaitUntil, want.DispatchAt = ms(w.Until), ms(w.DispatchAt)
	if w.Until.IsZero() {
		want.WaitUntil = e.now().Add(lease.DefaultWaitTimeout)
	}
	if w.DispatchAt.IsZero() && !w.Carried {
		want.DispatchAt = want.WaitUntil
	}
	if w.Heartbeat > 0 {
		// The first heartbeat deadline, and the sweep entry there if it
		// comes first.
		want.HeartbeatTimeout, want.BeatUntil = w.Heartbeat, e.now().Add(w.Heartbeat)
		if w.DispatchAt.IsZero() && want.BeatUntil.Before(want.WaitUntil) {
			want.DispatchAt = want.BeatUntil
		}
	}
	switch w.Mode {
	case lease.WaitChildren:
		want.WaitFor = w.For
		want.Attempt = 0 // the count starts again
	case lease.WaitCallback:
		want.CallbackHash, want.CallbackStep = lease.CallbackHash(w.Nonce), w.Step
		want.WaitFor = nil
	}
	e.same("Suspend", got, want)
	return got
}

func (e *env) notify(w lease.Waiter, ended lease.Task) lease.Task {
	e.t.Helper()
	got, err := e.store.Notify(e.ctx, w, ended)
	if err != nil {
		e.t.Fatalf("Notify(%s of %s): %v", w, ended.ID, err)
	}
	if !slices.Contains(got.Ended, ended.ID) {
		e.t.Fatalf("Notify(%s of %s): Ended = %v", w, ended.ID, got.Ended)
	}
	return got
}
