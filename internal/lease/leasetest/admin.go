package leasetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/limiter"
	"github.com/leasehold/leasehold/internal/lease/query"
)

// AdminStore is a store with its operator side.
type AdminStore interface {
	lease.Store
	query.Admin
	query.Lister
	limiter.RateLimiter
	limiter.SlotLimiter
	limiter.RedriveCounter
}

// NewAdminStoreFunc builds the store under test for one case of RunAdmin.
// Due and List see every task of the store, so each call must return a store
// that holds no task yet (for a table: a new table).
type NewAdminStoreFunc func(t *testing.T, opts lease.Options) AdminStore

// RunAdmin runs the conformance cases of lease.Admin against the stores
// newStore builds, each case on its own empty store and fake clock, in
// parallel.
func RunAdmin(t *testing.T, newStore NewAdminStoreFunc) {
	cases := []struct {
		name string
		run  func(t *testing.T, a *adminEnv)
	}{
		{"DueOldestFirstPerShard", testDueOldestFirst},
		{"DueSkipsTerminalTasks", testDueSkipsTerminal},
		{"DueRejectsBadArguments", testDueRejectsBadArguments},
		{"CreateWithDispatchAt", testCreateWithDispatchAt},
		{"MarkDispatchedMovesEntry", testMarkDispatchedMoves},
		{"MarkDispatchedReturnsQueue", testMarkDispatchedReturnsQueue},
		{"MarkDispatchedConcurrentOneWins", testMarkDispatchedConcurrent},
		{"MarkDispatchedRearmsLiveLease", testMarkDispatchedRearmsLiveLease},
		{"CancelPending", testCancelPending},
		{"CancelPendingAfterAnAttempt", testCancelPendingAfterAttempt},
		{"CancelRunningSetsFlagRenewReturns", testCancelRunning},
		{"CancelFinishedOrUnknown", testCancelFinishedOrUnknown},
		{"CancelFlagLifecycle", testCancelFlagLifecycle},
		{"CancelUnderContention", testCancelUnderContention},
		{"RetryFailed", testRetryFailed},
		{"RetryCancelled", testRetryCancelled},
		{"RetryRejects", testRetryRejects},
		{"RetryRefusesAPlaceholder", testRetryPlaceholder},
		{"ListPagesEachTaskOnce", testListPaging},
		{"ListEmptyAndBadArguments", testListBadArguments},
		{"UnlistedTasksAreNotListed", testUnlisted},
		{"DerivedTasksListedOnlyWhenTheyFail", testDerivedListing},
		{"BatchListingListsEachTaskOnce", testBatchListing},
		{"RateWindowsCountStarts", testRateWindows},
		{"RedriveCountsBoundRedrives", testRedriveCounts},
		{"SlotsBoundHoldersAtOnce", testSlots},
		{"SlotsOfLostAttemptsAreFreed", testLostSlots},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			clock := clockwork.NewFakeClockAt(start)
			opts := lease.Options{Clock: clock, LeaseDuration: leaseFor, Skew: skew, DispatchGrace: grace, Retention: retention}
			store := newStore(t, opts)
			c.run(t, &adminEnv{env: &env{t: t, ctx: t.Context(), clock: clock, store: store, opts: opts}, admin: store, newStore: newStore})
		})
	}
}

type adminEnv struct {
	*env
	admin    AdminStore
	newStore NewAdminStoreFunc
}

// dueIn returns every due entry of shard at now.
func (a *adminEnv) dueIn(shard string, now time.Time) []query.DueTask {
	a.t.Helper()
	due, err := a.admin.Due(a.ctx, shard, now, query.MaxDueLimit)
	if err != nil {
		a.t.Fatalf("Due(%s): %v", shard, err)
	}
	return due
}

// dueAll returns the due entries of every shard at now, by id, checking
// each shard's order and that every entry is in its own shard.
func (a *adminEnv) dueAll(now time.Time) map[string]time.Time {
	a.t.Helper()
	out := map[string]time.Time{}
	for _, shard := range lease.Shards() {
		due := a.dueIn(shard, now)
		for i, d := range due {
			if lease.Shard(d.ID) != shard {
				a.t.Fatalf("Due(%s) lists %s of shard %s", shard, d.ID, lease.Shard(d.ID))
			}
			if d.DispatchAt.After(now) {
				a.t.Fatalf("Due(%s, %s) lists %s due at %s", shard, now.Format(time.RFC3339Nano), d.ID, d.DispatchAt.Format(time.RFC3339Nano))
			}
			if i > 0 && d.DispatchAt.Before(due[i-1].DispatchAt) {
				a.t.Fatalf("Due(%s) is not oldest first: %v", shard, due)
			}
			out[d.ID] = d.DispatchAt
		}
	}
	return out
}

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

// cancelled is prev cancelled while PENDING at now.
func (a *adminEnv) cancelled(prev lease.Task) lease.Task {
	want := a.ended(prev, lease.StatusCancelled, query.CancelledWhilePending)
	want.CancelRequested = true
	return want
}

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

// retried is prev put back to PENDING at now with extra attempts.
func (a *adminEnv) retried(prev lease.Task, extra int) lease.Task {
	now := a.now()
	want := prev
	want.Status = lease.StatusPending
	want.RunAt = now
	want.MaxAttempts = prev.Attempt + extra
	want.Result = nil
	want.FinishedAt = time.Time{}
	want.ExpiresAt = time.Time{}
	want.CancelRequested = false
	want.UpdatedAt = now
	want.DispatchAt = now.Add(grace)
	return want
}

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

// listAll pages through status limit at a time and checks each page.
func (a *adminEnv) listAll(status lease.Status, limit int) []lease.Task {
	a.t.Helper()
	var all []lease.Task
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 1000 {
			a.t.Fatalf("List(%s) did not end after %d pages", status, pages)
		}
		page, next, err := a.admin.List(a.ctx, status, limit, cursor)
		if err != nil {
			a.t.Fatalf("List(%s, page %d): %v", status, pages, err)
		}
		if len(page) > limit {
			a.t.Fatalf("List(%s) returned %d tasks, limit %d", status, len(page), limit)
		}
		if next != "" && len(page) < limit {
			a.t.Fatalf("List(%s) returned a short page of %d and a cursor", status, len(page))
		}
		all = append(all, page...)
		if next == "" {
			return all
		}
		cursor = next
	}
}

func testListPaging(t *testing.T, a *adminEnv) {
	const pending, succeeded = 250, 30
	want := map[string]lease.Task{}
	var mu sync.Mutex
	// Create in parallel; the clock moves a millisecond every few tasks,
	// so many share a creation time.
	for round := range pending / 10 {
		var wg sync.WaitGroup
		for i := range 10 {
			n := a.newTask()
			if i%3 == 0 {
				n.Queue = "listed-queue" // List shows each task's queue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				got, err := a.store.Create(a.ctx, n)
				if err != nil {
					t.Errorf("Create: %v", err)
					return
				}
				mu.Lock()
				want[got.ID] = got
				mu.Unlock()
			}()
		}
		wg.Wait()
		if round%3 == 0 {
			a.clock.Advance(time.Millisecond)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	var done []string
	for range succeeded {
		done = append(done, a.finish(a.createClaimed(a.newTask(), "w1"), []byte(`{}`)).ID)
	}

	got := a.listAll(lease.StatusPending, 40)
	seen := map[string]bool{}
	for i, task := range got {
		if seen[task.ID] {
			t.Fatalf("List returned %s twice", task.ID)
		}
		seen[task.ID] = true
		w, ok := want[task.ID]
		if !ok {
			t.Fatalf("List(PENDING) returned %s (%s), not one of the pending tasks", task.ID, task.Status)
		}
		a.same("List", task, query.ListView(w))
		if i > 0 && task.CreatedAt.After(got[i-1].CreatedAt) {
			t.Fatalf("List is not newest first at %d: %s after %s", i, task.CreatedAt, got[i-1].CreatedAt)
		}
	}
	if len(seen) != pending {
		t.Fatalf("List(PENDING) returned %d tasks, want %d", len(seen), pending)
	}

	gotDone := a.listAll(lease.StatusSucceeded, 7)
	var ids []string
	for _, task := range gotDone {
		ids = append(ids, task.ID)
		if task.Payload != nil || task.Result != nil || task.History != nil {
			t.Fatalf("List returned payload, result or history of %s", task.ID)
		}
	}
	slices.Sort(ids)
	slices.Sort(done)
	if !slices.Equal(ids, done) {
		t.Fatalf("List(SUCCEEDED) = %d tasks, want the %d finished ones", len(ids), len(done))
	}

	// A page as large as the rest ends the listing.
	page, next, err := a.admin.List(a.ctx, lease.StatusSucceeded, succeeded, "")
	if err != nil || len(page) != succeeded {
		t.Fatalf("List(SUCCEEDED, %d) = %d tasks, %v", succeeded, len(page), err)
	}
	if next != "" {
		if rest, _, err := a.admin.List(a.ctx, lease.StatusSucceeded, 1, next); err != nil || len(rest) != 0 {
			t.Fatalf("after a full last page: %d more tasks, %v", len(rest), err)
		}
	}
}

func testListBadArguments(t *testing.T, a *adminEnv) {
	page, next, err := a.admin.List(a.ctx, lease.StatusFailed, 10, "")
	if err != nil || len(page) != 0 || next != "" {
		t.Fatalf("List of no tasks = %v, %q, %v; want nothing", page, next, err)
	}
	for range 3 {
		a.create(a.newTask())
	}
	_, cursor, err := a.admin.List(a.ctx, lease.StatusPending, 1, "")
	if err != nil || cursor == "" {
		t.Fatalf("List(PENDING, 1) = cursor %q, %v; want a cursor", cursor, err)
	}
	_, _, err = a.admin.List(a.ctx, lease.StatusRunning, 1, cursor)
	wantErr(t, "List with another status's cursor", err, query.ErrBadCursor)
	for _, bad := range []string{"not a cursor!", "e30", cursor[:len(cursor)/2]} {
		_, _, err = a.admin.List(a.ctx, lease.StatusPending, 1, bad)
		wantErr(t, fmt.Sprintf("List with cursor %q", bad), err, query.ErrBadCursor)
	}
	for _, limit := range []int{0, -1, query.MaxListLimit + 1} {
		_, _, err = a.admin.List(a.ctx, lease.StatusPending, limit, "")
		wantErr(t, fmt.Sprintf("List with limit %d", limit), err, lease.ErrInvalid)
	}
	_, _, err = a.admin.List(a.ctx, lease.Status("DONE"), 1, "")
	wantErr(t, "List of an unknown status", err, lease.ErrInvalid)

	ctx, cancel := context.WithCancel(a.ctx)
	cancel()
	_, _, err = a.admin.List(ctx, lease.StatusPending, 1, "")
	wantErr(t, "List with a cancelled context", err, lease.ErrBackend)
}

// A store with Options.Unlisted creates tasks that List does not see; Get
// and every other operation still do.
func testUnlisted(t *testing.T, a *adminEnv) {
	opts := a.opts
	opts.Unlisted = true
	unlisted := a.newStore(t, opts)
	n := a.newTask()
	if _, err := unlisted.Create(a.ctx, n); err != nil {
		t.Fatalf("Create: %v", err)
	}
	m := a.newTask()
	if _, err := unlisted.CreateClaimed(a.ctx, m, "w1"); err != nil {
		t.Fatalf("CreateClaimed: %v", err)
	}
	for _, st := range []lease.Status{lease.StatusPending, lease.StatusRunning} {
		page, _, err := unlisted.List(a.ctx, st, 100, "")
		if err != nil {
			t.Fatalf("List %s: %v", st, err)
		}
		for _, task := range page {
			if task.ID == n.ID || task.ID == m.ID {
				t.Fatalf("List %s shows %s, created unlisted", st, task.ID)
			}
		}
	}
	if got, err := unlisted.Get(a.ctx, n.ID); err != nil || got.ID != n.ID {
		t.Fatalf("Get of an unlisted task = %+v, %v", got, err)
	}
	if _, err := unlisted.Claim(a.ctx, n.ID, "w2"); err != nil {
		t.Fatalf("Claim of an unlisted task: %v", err)
	}
}

// listed says whether List(status) shows task id.
func (a *adminEnv) listed(status lease.Status, id string) bool {
	a.t.Helper()
	for _, task := range a.listAll(status, 100) {
		if task.ID == id {
			return true
		}
	}
	return false
}

// A derived task (a child or a chain's link) gets no listing entry of its
// own while it runs or when it succeeds: its parent or the chain's head is
// listed. One that fails or is cancelled is listed from then on, retried
// or not; a store whose tasks are unlisted lists none of them.
func testDerivedListing(t *testing.T, a *adminEnv) {
	parent := a.createClaimed(a.newTask(), "p")
	if !a.listed(lease.StatusRunning, parent.ID) {
		t.Fatal("a root task is not listed")
	}
	derive := func(i int, link bool) lease.NewTask {
		n := a.newTask()
		n.ID = fmt.Sprintf("%s/kids/%d", parent.ID, i)
		if link {
			n.ID, n.Prev = fmt.Sprintf("%s#%d", parent.ID, i), parent.ID
		} else {
			n.Parent = parent.ID
		}
		return n
	}
	ok, failing, link := derive(0, false), derive(1, false), derive(2, true)
	var held []lease.Task
	for _, n := range []lease.NewTask{ok, failing, link} {
		got, err := a.admin.CreateClaimed(a.ctx, n, "w")
		if err != nil {
			t.Fatalf("CreateClaimed(%s): %v", n.ID, err)
		}
		if a.listed(lease.StatusRunning, n.ID) {
			t.Fatalf("derived task %s is listed while it runs", n.ID)
		}
		held = append(held, got)
	}
	a.finish(held[0], nil)
	if a.listed(lease.StatusSucceeded, ok.ID) {
		t.Fatal("a derived task that succeeded is listed")
	}
	a.release(held[1], lease.Release{Status: lease.StatusFailed, Error: "boom"})
	if !a.listed(lease.StatusFailed, failing.ID) {
		t.Fatal("a derived task that failed is not listed")
	}
	if _, err := a.admin.Retry(a.ctx, failing.ID, 1); err != nil {
		t.Fatalf("Retry: %v", err)
	}
	if !a.listed(lease.StatusPending, failing.ID) {
		t.Fatal("a retried derived task is not listed any more")
	}
	// A link released to run again, then cancelled while PENDING.
	pending := a.release(held[2], lease.Release{Status: lease.StatusPending, Error: "later", RunAt: a.now().Add(time.Hour)})
	if a.listed(lease.StatusPending, link.ID) {
		t.Fatal("a derived task released to retry is listed")
	}
	if _, err := a.admin.RequestCancel(a.ctx, pending.ID); err != nil {
		t.Fatalf("RequestCancel: %v", err)
	}
	if !a.listed(lease.StatusCancelled, link.ID) {
		t.Fatal("a derived task cancelled while pending is not listed")
	}

	opts := a.opts
	opts.Unlisted = true
	unlisted := a.newStore(t, opts)
	n := derive(3, false)
	got, err := unlisted.CreateClaimed(a.ctx, n, "w")
	if err != nil {
		t.Fatalf("CreateClaimed on an unlisted store: %v", err)
	}
	if _, err := unlisted.Release(a.ctx, got.LeaseOf(), lease.Release{Status: lease.StatusFailed, Error: "boom"}); err != nil {
		t.Fatalf("Release on an unlisted store: %v", err)
	}
	if page, _, err := unlisted.List(a.ctx, lease.StatusFailed, 100, ""); err != nil || slices.ContainsFunc(page, func(x lease.Task) bool { return x.ID == n.ID }) {
		t.Fatalf("an unlisted store lists a failed derived task (or List: %v)", err)
	}
}

// Tasks created with a batch listing entry (lease.Lister) are listed
// through it, once, at the entry's time (not their own creation), newest
// first among the rest and across pages of any size; an entry takes later
// tasks (AppendListing) until it is full. A task that the entry does not
// name, or whose entry was never written, is not listed; an id taken
// before its entry was written stays listed where it was. A task listed by
// an entry is listed on its own from its first retry or wait, still once.
func testBatchListing(t *testing.T, a *adminEnv) {
	if _, err := a.admin.WriteListing(a.ctx, []string{a.id(), a.id()}); !errors.Is(err, lease.ErrInvalid) {
		t.Fatalf("WriteListing of %d ids = %v, want ErrInvalid", query.MinListing-1, err)
	}
	same := a.id()
	if _, err := a.admin.WriteListing(a.ctx, []string{same, a.id(), same}); !errors.Is(err, lease.ErrInvalid) {
		t.Fatalf("WriteListing naming an id twice = %v, want ErrInvalid", err)
	}
	if err := a.admin.AppendListing(a.ctx, lease.Listing{ID: query.NewListingID(), At: a.now()}, []string{a.id()}); !errors.Is(err, lease.ErrNotFound) {
		t.Fatalf("AppendListing to an entry never written = %v, want ErrNotFound", err)
	}

	at := map[string]time.Time{} // each listed task's listing time
	var batched []string         // the tasks listed by an entry
	created := func(n lease.NewTask, l lease.Listing) {
		t.Helper()
		n.Listing = l
		got, err := a.admin.CreateClaimed(a.ctx, n, "w")
		if err != nil {
			t.Fatalf("CreateClaimed(%s): %v", n.ID, err)
		}
		if got.ListedIn != l.ID {
			t.Fatalf("a task created with entry %q has ListedIn %q", l.ID, got.ListedIn)
		}
		at[got.ID] = ms(l.At)
		batched = append(batched, got.ID)
	}
	own := func() {
		got := a.createClaimed(a.newTask(), "w")
		at[got.ID] = got.CreatedAt
	}
	var firstEntry lease.Listing
	for round := range 4 {
		var ns []lease.NewTask
		var ids []string
		for range query.MinListing + round {
			n := a.newTask()
			ns, ids = append(ns, n), append(ids, n.ID)
		}
		l, err := a.admin.WriteListing(a.ctx, append(slices.Clone(ids), a.id())) // and an id never created
		if err != nil || l.ID == "" || !query.IsListingID(l.ID) {
			t.Fatalf("WriteListing = %+v, %v", l, err)
		}
		if round == 0 {
			firstEntry = l
		}
		a.clock.Advance(time.Millisecond) // the creates come later than the entry
		for _, n := range ns {
			created(n, l)
		}
		own() // newer than the entry's tasks so far
		a.clock.Advance(time.Millisecond)
		// A later batch appended to the entry: listed at the entry's time,
		// before the task created in between.
		later := []lease.NewTask{a.newTask(), a.newTask()}
		if err := a.admin.AppendListing(a.ctx, l, []string{later[0].ID, later[1].ID}); err != nil {
			t.Fatalf("AppendListing: %v", err)
		}
		for _, n := range later {
			created(n, l)
		}
		a.clock.Advance(time.Millisecond)
	}
	// Not listed: a task its entry does not name, one whose entry was
	// never written. Listed once: a task whose id a later entry names again.
	l, err := a.admin.WriteListing(a.ctx, []string{a.id(), a.id(), batched[0]})
	if err != nil {
		t.Fatalf("WriteListing: %v", err)
	}
	stray := a.newTask()
	stray.Listing = l
	if _, err := a.admin.CreateClaimed(a.ctx, stray, "w"); err != nil {
		t.Fatalf("CreateClaimed: %v", err)
	}
	again := a.newTask()
	again.ID, again.Listing = batched[0], l
	if _, err := a.admin.CreateClaimed(a.ctx, again, "w2"); !errors.Is(err, lease.ErrAlreadyExists) {
		t.Fatalf("CreateClaimed of a taken id = %v, want ErrAlreadyExists", err)
	}
	// An entry that names a task twice (its token delivered again while
	// the entry was open) lists it once.
	if err := a.admin.AppendListing(a.ctx, firstEntry, []string{batched[0], batched[1]}); err != nil {
		t.Fatalf("AppendListing of ids the entry names: %v", err)
	}
	lost := a.newTask()
	lost.Listing = lease.Listing{ID: query.NewListingID(), At: a.now()}
	if _, err := a.admin.CreateClaimed(a.ctx, lost, "w"); err != nil {
		t.Fatalf("CreateClaimed: %v", err)
	}
	// An entry takes at most MaxListingIDs.
	var fill []string // short ids: the entry's bytes are the caller's to bound
	for i := range query.MaxListingIDs - 3 {
		fill = append(fill, fmt.Sprintf("fill-%d", i))
	}
	if err := a.admin.AppendListing(a.ctx, l, fill); err != nil {
		t.Fatalf("AppendListing up to %d ids: %v", query.MaxListingIDs, err)
	}
	if err := a.admin.AppendListing(a.ctx, l, []string{a.id()}); !errors.Is(err, query.ErrListingFull) {
		t.Fatalf("AppendListing to a full entry = %v, want ErrListingFull", err)
	}

	check := func(status lease.Status, want []string) {
		t.Helper()
		for _, limit := range []int{1, 4, 100} {
			got := a.listAll(status, limit)
			var ids []string
			for i, task := range got {
				ids = append(ids, task.ID)
				if i > 0 && at[task.ID].After(at[got[i-1].ID]) {
					t.Fatalf("List(%s, %d) is not newest first at %d: %s listed at %s after %s at %s",
						status, limit, i, task.ID, at[task.ID], got[i-1].ID, at[got[i-1].ID])
				}
				if task.ListedIn != "" {
					t.Fatalf("List(%s) shows ListedIn %q", status, task.ListedIn)
				}
			}
			slices.Sort(ids)
			if !slices.Equal(ids, slices.Sorted(slices.Values(want))) {
				t.Fatalf("List(%s, %d a page) = %d tasks %v,\nwant %d %v", status, limit, len(ids), ids, len(want), want)
			}
		}
	}
	check(lease.StatusRunning, slices.Collect(maps.Keys(at)))

	// A retry and a finish, from the first entry.
	retried, err := a.admin.Get(a.ctx, batched[1])
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	a.release(retried, lease.Release{Status: lease.StatusPending, RunAt: a.now().Add(time.Hour), Error: "later"})
	done, err := a.admin.Get(a.ctx, batched[2])
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	a.finish(done, nil)
	at[batched[1]] = retried.CreatedAt // listed on its own now
	var running []string
	for id := range at {
		if id != batched[1] && id != batched[2] {
			running = append(running, id)
		}
	}
	check(lease.StatusRunning, running)
	check(lease.StatusPending, []string{batched[1]})
	check(lease.StatusSucceeded, []string{batched[2]})
	if got, err := a.admin.Get(a.ctx, batched[1]); err != nil || got.ListedIn != "" {
		t.Fatalf("a task released to retry still has ListedIn %q (%v)", got.ListedIn, err)
	}

	opts := a.opts
	opts.Unlisted = true
	unlisted := a.newStore(t, opts)
	if l, err := unlisted.WriteListing(a.ctx, []string{a.id(), a.id(), a.id()}); err != nil || l != (lease.Listing{}) {
		t.Fatalf("WriteListing on an unlisted store = %+v, %v; want nothing written", l, err)
	}
}

// A rate window allows limit starts and refuses the rest, also when many
// take at once; another window, or another key, counts on its own; bad
// arguments are refused; and a window is no task: List and Due see none.
func testRateWindows(t *testing.T, a *adminEnv) {
	key := a.id()
	window := a.now().Truncate(time.Second)
	for _, bad := range []struct {
		key   string
		per   time.Duration
		limit int
	}{{"", time.Second, 1}, {key, 0, 1}, {key, 1500 * time.Millisecond, 1}, {key, time.Second, 0}} {
		if _, err := a.admin.TakeStart(a.ctx, bad.key, window, bad.per, bad.limit); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("TakeStart(%q, %s, %d) = %v, want ErrInvalid", bad.key, bad.per, bad.limit, err)
		}
	}

	const limit, takers = 5, 16
	if got := allowedAtOnce(t, "TakeStart", takers, func() (bool, error) {
		return a.admin.TakeStart(a.ctx, key, window, time.Second, limit)
	}); got != limit {
		t.Fatalf("%d takers at once allowed %d starts, want the limit %d", takers, got, limit)
	}
	if ok, err := a.admin.TakeStart(a.ctx, key, window, time.Second, limit); err != nil || ok {
		t.Fatalf("a start over the limit = %t, %v; want refused", ok, err)
	}
	if ok, err := a.admin.TakeStart(a.ctx, key, window, time.Second, limit+1); err != nil || !ok {
		t.Fatalf("a start under a raised limit = %t, %v; want allowed", ok, err)
	}
	for name, take := range map[string]func() (bool, error){
		"the next window": func() (bool, error) { return a.admin.TakeStart(a.ctx, key, window.Add(time.Second), time.Second, 1) },
		"another key":     func() (bool, error) { return a.admin.TakeStart(a.ctx, key+"-other", window, time.Second, 1) },
	} {
		if ok, err := take(); err != nil || !ok {
			t.Errorf("%s's first start = %t, %v; want allowed", name, ok, err)
		}
	}

	for _, st := range []lease.Status{lease.StatusPending, lease.StatusRunning, lease.StatusSucceeded, lease.StatusFailed} {
		if got := a.listAll(st, 10); len(got) != 0 {
			t.Errorf("List(%s) of a table with rate windows and no task = %d items", st, len(got))
		}
	}
	for _, shard := range lease.Shards() {
		due, err := a.admin.Due(a.ctx, shard, a.now().Add(24*time.Hour), query.MaxDueLimit)
		if err != nil {
			t.Fatal(err)
		}
		if len(due) != 0 {
			t.Errorf("Due(%s) of a table with rate windows and no task = %v", shard, due)
		}
	}
}

// A redrive count allows limit redrives of its dead letter and refuses the
// rest, also when many take at once; a raised limit allows one more;
// another key counts on its own; bad arguments are refused; and a count is
// no task: List and Due see none.
func testRedriveCounts(t *testing.T, a *adminEnv) {
	key := a.id()
	for _, bad := range []struct {
		key   string
		limit int
	}{{"", 1}, {key, 0}} {
		if _, err := a.admin.TakeRedrive(a.ctx, bad.key, bad.limit); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("TakeRedrive(%q, %d) = %v, want ErrInvalid", bad.key, bad.limit, err)
		}
	}

	const limit, takers = 3, 8
	if got := allowedAtOnce(t, "TakeRedrive", takers, func() (bool, error) {
		return a.admin.TakeRedrive(a.ctx, key, limit)
	}); got != limit {
		t.Fatalf("%d takers at once allowed %d redrives, want the limit %d", takers, got, limit)
	}
	// A day later the count is still there (it is kept for days).
	a.clock.Advance(24 * time.Hour)
	if ok, err := a.admin.TakeRedrive(a.ctx, key, limit); err != nil || ok {
		t.Fatalf("a redrive over the limit = %t, %v; want refused", ok, err)
	}
	if ok, err := a.admin.TakeRedrive(a.ctx, key, limit+1); err != nil || !ok {
		t.Fatalf("a redrive under a raised limit = %t, %v; want allowed", ok, err)
	}
	if ok, err := a.admin.TakeRedrive(a.ctx, key+"-other", 1); err != nil || !ok {
		t.Errorf("another key's first redrive = %t, %v; want allowed", ok, err)
	}

	for _, st := range []lease.Status{lease.StatusPending, lease.StatusRunning, lease.StatusSucceeded, lease.StatusFailed} {
		if got := a.listAll(st, 10); len(got) != 0 {
			t.Errorf("List(%s) of a table with redrive counts and no task = %d items", st, len(got))
		}
	}
	for _, shard := range lease.Shards() {
		due, err := a.admin.Due(a.ctx, shard, a.now().Add(24*time.Hour), query.MaxDueLimit)
		if err != nil {
			t.Fatal(err)
		}
		if len(due) != 0 {
			t.Errorf("Due(%s) of a table with redrive counts and no task = %v", shard, due)
		}
	}
}

// A slot set gives max holders a slot each, also when many take at once,
// and refuses the rest; a holder taking again keeps its slot; a release
// frees one; a holder whose time passed by more than the skew loses its
// slot to a new one, but not before; sets of other keys are apart; bad
// arguments are refused; and a set is no task: List and Due see none.
func testSlots(t *testing.T, a *adminEnv) {
	key := a.id()
	until := a.now().Add(time.Minute)
	for _, bad := range []struct {
		key, holder string
		max         int
		until       time.Time
	}{{"", "h", 1, until}, {key, "", 1, until}, {key, "h", 0, until}, {key, "h", limiter.MaxSlots + 1, until}, {key, "h", 1, time.Time{}}} {
		if _, err := a.admin.AcquireSlot(a.ctx, bad.key, bad.holder, bad.max, bad.until); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("AcquireSlot(%q, %q, %d, %v) = %v, want ErrInvalid", bad.key, bad.holder, bad.max, bad.until, err)
		}
	}

	const max, takers = 3, 12
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		holder []string
		errs   = make(chan error, takers)
	)
	for i := range takers {
		wg.Go(func() {
			h := limiter.SlotHolder(fmt.Sprintf("task-%d", i), 1)
			ok, err := a.admin.AcquireSlot(a.ctx, key, h, max, until)
			if err != nil {
				errs <- err
				return
			}
			if ok {
				mu.Lock()
				holder = append(holder, h)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("AcquireSlot: %v", err)
	}
	if len(holder) != max {
		t.Fatalf("%d takers at once got %d slots, want %d", takers, len(holder), max)
	}
	take := func(h string, want bool) {
		t.Helper()
		if ok, err := a.admin.AcquireSlot(a.ctx, key, h, max, a.now().Add(time.Minute)); err != nil || ok != want {
			t.Fatalf("AcquireSlot(%s) = %t, %v; want %t", h, ok, err, want)
		}
	}
	take("late@1", false)
	take(holder[0], true) // a holder taking again keeps its slot (until a minute from now)
	if err := a.admin.ReleaseSlot(a.ctx, key, holder[0]); err != nil {
		t.Fatal(err)
	}
	if err := a.admin.ReleaseSlot(a.ctx, key, "never@1"); err != nil {
		t.Fatalf("releasing a slot never held: %v", err)
	}
	take("late@1", true)
	take("later@1", false)
	if ok, err := a.admin.AcquireSlot(a.ctx, key+"-other", "later@1", 1, until); err != nil || !ok {
		t.Fatalf("another key's first slot = %t, %v", ok, err)
	}

	// The holders' time passes; within the skew they keep their slots,
	// past it a new holder takes one. (holder[0] was released; holder[1],
	// holder[2] and late@1 hold until a minute from the first takes.)
	a.clock.Advance(time.Minute + a.opts.Skew/2)
	take("later@1", false)
	a.clock.Advance(a.opts.Skew)
	take("later@1", true)
	take("latest@1", true) // the other expired ones made room too
	take("last@1", true)
	take("over@1", false)

	if err := a.admin.ReleaseSlot(a.ctx, a.id(), "h@1"); err != nil {
		t.Fatalf("releasing a slot of a key never used: %v", err)
	}
	for _, st := range []lease.Status{lease.StatusPending, lease.StatusRunning, lease.StatusSucceeded, lease.StatusFailed} {
		if got := a.listAll(st, 10); len(got) != 0 {
			t.Errorf("List(%s) of a table with slot sets and no task = %d items", st, len(got))
		}
	}
	for _, shard := range lease.Shards() {
		due, err := a.admin.Due(a.ctx, shard, a.now().Add(24*time.Hour), query.MaxDueLimit)
		if err != nil {
			t.Fatal(err)
		}
		if len(due) != 0 {
			t.Errorf("Due(%s) of a table with slot sets and no task = %v", shard, due)
		}
	}
}

// testLostSlots: FreeLostSlots gives back the slots of attempts that are
// over or lost, among the oldest holders it checks (earliest time first),
// and keeps those of attempts that still hold their task's lease, whatever
// the slots' own times.
func testLostSlots(t *testing.T, a *adminEnv) {
	key := a.id()
	far := a.now().Add(time.Hour) // no slot's time passes here
	take := func(h string, until time.Time, want bool) {
		t.Helper()
		if ok, err := a.admin.AcquireSlot(a.ctx, key, h, 3, until); err != nil || ok != want {
			t.Fatalf("AcquireSlot(%s) = %t, %v; want %t", h, ok, err, want)
		}
	}
	free := func(checks, want int) {
		t.Helper()
		if n, err := a.admin.FreeLostSlots(a.ctx, key, checks); err != nil || n != want {
			t.Fatalf("FreeLostSlots(%d) = %d, %v; want %d", checks, n, err, want)
		}
	}
	if _, err := a.admin.FreeLostSlots(a.ctx, key, 0); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("FreeLostSlots with no check: %v, want ErrInvalid", err)
	}
	free(2, 0) // no set yet

	live := a.createClaimed(a.newTask(), "w1")
	done := a.createClaimed(a.newTask(), "w2")
	take(limiter.SlotHolder(done.ID, done.Fence), far, true)
	take(limiter.SlotHolder(a.id(), 1), far.Add(time.Minute), true) // a task that is not there
	take(limiter.SlotHolder(live.ID, live.Fence), far.Add(2*time.Minute), true)
	take(limiter.SlotHolder(a.id(), 1), far, false) // full
	free(4, 1)                                      // the missing task's
	a.finish(done, nil)
	take(limiter.SlotHolder(a.id(), 1), far.Add(time.Minute), true)
	free(1, 1) // the finished attempt's, the oldest
	free(1, 1) // the missing task's, the next
	free(4, 0) // the live one's stays
	take(limiter.SlotHolder(a.id(), 1), far, true)

	// The live attempt's lease runs out: within the skew it keeps its
	// slot, past it the slot is given back.
	a.clock.Advance(leaseFor + a.opts.Skew/2)
	free(4, 1) // the missing task's, not the live one's yet
	a.clock.Advance(a.opts.Skew)
	free(4, 1)
	free(4, 0)

	// A task claimed again: the old attempt's slot is lost, the new one's
	// is not.
	again, err := a.store.Claim(a.ctx, live.ID, "w3")
	if err != nil || again.Fence != live.Fence+1 {
		t.Fatalf("claim after the lease ran out: fence %d, %v", again.Fence, err)
	}
	take(limiter.SlotHolder(live.ID, live.Fence), far, true) // a late taker of the old attempt
	take(limiter.SlotHolder(again.ID, again.Fence), far, true)
	free(4, 1)
	free(4, 0)
}

// allowedAtOnce runs take from takers goroutines at once and returns how
// many it allowed; an error fails the test, named by op.
func allowedAtOnce(t *testing.T, op string, takers int, take func() (bool, error)) int {
	t.Helper()
	var (
		wg      sync.WaitGroup
		allowed atomic.Int32
		errs    = make(chan error, takers)
	)
	for range takers {
		wg.Go(func() {
			ok, err := take()
			if err != nil {
				errs <- err
				return
			}
			if ok {
				allowed.Add(1)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("%s: %v", op, err)
	}
	return int(allowed.Load())
}
