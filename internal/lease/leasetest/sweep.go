package leasetest

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/query"
)

func sameDue(t *testing.T, what string, got, want map[string]time.Time) {
	t.Helper()
	for id, at := range want {
		if g, ok := got[id]; !ok || !g.Equal(at) {
			t.Errorf("%s: %s due at %s (listed %t), want %s", what, id, g.Format(time.RFC3339Nano), ok, at.Format(time.RFC3339Nano))
		}
	}
	for id := range got {
		if _, ok := want[id]; !ok {
			t.Errorf("%s: %s listed, want it not due", what, id)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

func testDueOldestFirst(t *testing.T, a *adminEnv) {
	// 48 tasks starting 0..47 s from now, created in a scrambled order,
	// spread over the shards.
	want := map[string]time.Time{}
	for i := range 48 {
		n := a.newTask()
		n.RunAt = start.Add(time.Duration((i*17)%48) * time.Second)
		created := a.create(n)
		want[created.ID] = created.DispatchAt
	}
	sameDue(t, "before any is due", a.dueAll(a.now().Add(grace-time.Millisecond)), nil)
	at := ms(start).Add(grace + 20*time.Second)
	dueNow := map[string]time.Time{}
	for id, d := range want {
		if !d.After(at) {
			dueNow[id] = d
		}
	}
	sameDue(t, "20s after the grace", a.dueAll(at), dueNow)
	sameDue(t, "once all are due", a.dueAll(at.Add(time.Hour)), want)

	// The limit keeps the oldest.
	for _, shard := range lease.Shards() {
		all := a.dueIn(shard, at.Add(time.Hour))
		if len(all) < 2 {
			continue
		}
		two, err := a.admin.Due(a.ctx, shard, at.Add(time.Hour), 2)
		if err != nil {
			t.Fatalf("Due(%s, limit 2): %v", shard, err)
		}
		if !slices.Equal(two, all[:2]) {
			t.Fatalf("Due(%s, limit 2) = %v, want %v", shard, two, all[:2])
		}
	}

	// A claim leaves a task's entry where it was: due under the live
	// lease, MarkDispatched re-arms it (MarkDispatchedRearmsLiveLease).
	var some lease.Task
	for id := range want {
		got, err := a.store.Get(a.ctx, id)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		if !got.RunAt.After(a.now()) {
			some = got
			break
		}
	}
	claimed := a.claim(some, "w1")
	if got := a.dueAll(some.DispatchAt)[some.ID]; !got.Equal(some.DispatchAt) || !claimed.DispatchAt.Equal(some.DispatchAt) {
		t.Fatalf("claimed task due at %s, want its entry's time %s", got.Format(time.RFC3339Nano), some.DispatchAt.Format(time.RFC3339Nano))
	}
}

func testDueSkipsTerminal(t *testing.T, a *adminEnv) {
	a.finish(a.createClaimed(a.newTask(), "w1"), []byte(`{}`))
	a.release(a.createClaimed(a.newTask(), "w1"), lease.Release{Status: lease.StatusFailed, Error: "no"})
	pending := a.create(a.newTask())
	got := a.dueAll(a.now().Add(24 * time.Hour))
	sameDue(t, "after finishing two of three", got, map[string]time.Time{pending.ID: pending.DispatchAt})
}

func testDueRejectsBadArguments(t *testing.T, a *adminEnv) {
	for _, c := range []struct {
		shard string
		limit int
	}{{"16", 1}, {"", 1}, {"7", 1}, {"00", 0}, {"00", query.MaxDueLimit + 1}} {
		if _, err := a.admin.Due(a.ctx, c.shard, a.now(), c.limit); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("Due(%q, %d): error %v, want ErrInvalid", c.shard, c.limit, err)
		}
	}
}

func testCreateWithDispatchAt(t *testing.T, a *adminEnv) {
	n := a.newTask()
	n.RunAt = start.Add(20 * time.Minute)
	n.DispatchAt = n.RunAt
	got, err := a.store.Create(a.ctx, n)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	want := a.pending(n)
	want.DispatchAt = ms(n.RunAt)
	a.same("Create", got, want)
	a.stored(want)
	sameDue(t, "a minute before its start", a.dueAll(want.RunAt.Add(-time.Minute)), nil)
	sameDue(t, "at its start", a.dueAll(want.RunAt), map[string]time.Time{want.ID: want.RunAt})
}

func testMarkDispatchedMoves(t *testing.T, a *adminEnv) {
	task := a.create(a.newTask())
	now := task.DispatchAt
	sameDue(t, "at dispatch time", a.dueAll(now), map[string]time.Time{task.ID: task.DispatchAt})
	next := now.Add(grace)
	if queue, err := a.admin.MarkDispatched(a.ctx, task.ID, task.DispatchAt, next); err != nil || queue != "" {
		t.Fatalf("MarkDispatched = %q, %v; want the default queue", queue, err)
	}
	want := task
	want.DispatchAt = next
	a.stored(want)
	sameDue(t, "after marking", a.dueAll(now), nil)
	sameDue(t, "at the new time", a.dueAll(next), map[string]time.Time{task.ID: next})

	_, err := a.admin.MarkDispatched(a.ctx, task.ID, task.DispatchAt, next.Add(time.Minute))
	wantErr(t, "MarkDispatched with a stale time", err, query.ErrDispatchRaced)
	a.stored(want)
	_, err = a.admin.MarkDispatched(a.ctx, a.id(), task.DispatchAt, next)
	wantErr(t, "MarkDispatched of an unknown id", err, query.ErrDispatchRaced)
	_, err = a.admin.MarkDispatched(a.ctx, task.ID, time.Time{}, next)
	wantErr(t, "MarkDispatched without a seen time", err, lease.ErrInvalid)

	// A finished task left the index.
	done := a.finish(a.claim(want, "w1"), nil)
	_, err = a.admin.MarkDispatched(a.ctx, task.ID, next, next.Add(grace))
	wantErr(t, "MarkDispatched of a finished task", err, query.ErrDispatchRaced)
	a.stored(done)
}

func testMarkDispatchedReturnsQueue(t *testing.T, a *adminEnv) {
	n := a.newTask()
	n.Queue = "images"
	task := a.create(n)
	queue, err := a.admin.MarkDispatched(a.ctx, task.ID, task.DispatchAt, task.DispatchAt.Add(grace))
	if err != nil || queue != "images" {
		t.Fatalf("MarkDispatched = %q, %v; want images", queue, err)
	}
}

// A claim leaves a task's sweep entry where it is, and so do renewals; when
// the entry comes due under a live lease the sweep gets ErrDispatchRaced and
// the entry moves to the lease's expiry plus skew plus grace. Once the lease
// has expired the entry is dispatched as any other.
func testMarkDispatchedRearmsLiveLease(t *testing.T, a *adminEnv) {
	created := a.create(a.newTask())
	first := created.DispatchAt
	claimed := a.claim(created, "w1")
	if !claimed.DispatchAt.Equal(first) {
		t.Fatalf("Claim moved the sweep entry from %s to %s", first, claimed.DispatchAt)
	}
	// Keep the lease live past the entry's time.
	renewed := claimed
	for !a.now().After(first) {
		a.clock.Advance(leaseFor / 2)
		var err error
		if renewed, err = a.store.Renew(a.ctx, renewed.LeaseOf()); err != nil {
			t.Fatalf("Renew: %v", err)
		}
		if !renewed.DispatchAt.Equal(first) {
			t.Fatalf("Renew moved the sweep entry from %s to %s", first, renewed.DispatchAt)
		}
	}
	sameDue(t, "under a live lease", a.dueAll(a.now()), map[string]time.Time{created.ID: first})
	_, err := a.admin.MarkDispatched(a.ctx, created.ID, first, a.now().Add(grace))
	wantErr(t, "MarkDispatched under a live lease", err, query.ErrDispatchRaced)
	want := renewed
	want.DispatchAt = renewed.LeaseUntil.Add(skew + grace)
	a.stored(want)
	sameDue(t, "after the re-arm", a.dueAll(a.now()), nil)

	// The holder stops renewing: at the re-armed time the lease has
	// expired and the entry is dispatched.
	a.clock.Advance(want.DispatchAt.Sub(a.now()))
	next := a.now().Add(grace)
	if _, err := a.admin.MarkDispatched(a.ctx, created.ID, want.DispatchAt, next); err != nil {
		t.Fatalf("MarkDispatched after the lease expired: %v", err)
	}
	want.DispatchAt = next
	a.stored(want)
}

func testMarkDispatchedConcurrent(t *testing.T, a *adminEnv) {
	task := a.create(a.newTask())
	const sweepers = 8
	errs := make([]error, sweepers)
	var wg sync.WaitGroup
	ready := make(chan struct{})
	for i := range sweepers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-ready
			_, errs[i] = a.admin.MarkDispatched(a.ctx, task.ID, task.DispatchAt, task.DispatchAt.Add(time.Duration(i+1)*time.Second))
		}()
	}
	close(ready)
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("sweepers %d and %d both marked the task", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, query.ErrDispatchRaced):
			t.Fatalf("sweeper %d: error %v, want ErrDispatchRaced", i, err)
		}
	}
	if winner < 0 {
		t.Fatalf("no sweeper marked the task: %v", errs)
	}
	want := task
	want.DispatchAt = task.DispatchAt.Add(time.Duration(winner+1) * time.Second)
	a.stored(want)
}
