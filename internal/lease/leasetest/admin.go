package leasetest

import (
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/inbox"
	"github.com/leasehold/leasehold/internal/lease/limiter"
	"github.com/leasehold/leasehold/internal/lease/mapstate"
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
	mapstate.Store
	inbox.Store
}

// NewAdminStoreFunc builds the store under test for one case of RunAdmin.
// Due and List see every task of the store, so each call must return a store
// that holds no task yet (for a table: a new table).
type NewAdminStoreFunc func(t *testing.T, opts lease.Options) AdminStore

// RunAdmin runs the conformance cases of query.Admin against the stores
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
		{"ListByKindReadsOnlyItsTasks", testListByKind},
		{"RateWindowsCountStarts", testRateWindows},
		{"RedriveCountsBoundRedrives", testRedriveCounts},
		{"SlotsBoundHoldersAtOnce", testSlots},
		{"SlotsOfLostAttemptsAreFreed", testLostSlots},
		{"MapGroupCreate", testMapGroupCreate},
		{"MapReportCountsOnce", testMapReportCountsOnce},
		{"MapReportsAtOnce", testMapReportsAtOnce},
		{"MapIdleAndStop", testMapIdleAndStop},
		{"MapPages", testMapPages},
		{"MapStopChildren", testMapStopChildren},
		{"InboxNumbersPerTopicOnce", testInboxNumbersPerTopicOnce},
		{"InboxConcurrentSenders", testInboxConcurrentSenders},
		{"InboxWaitTakeWake", testInboxWaitTakeWake},
		{"InboxWaitOnTopics", testInboxWaitOnTopics},
		{"InboxRefusals", testInboxRefusals},
		{"Events", testEvents},
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

// cancelled is prev cancelled while PENDING at now.
func (a *adminEnv) cancelled(prev lease.Task) lease.Task {
	want := a.ended(prev, lease.StatusCancelled, query.CancelledWhilePending)
	want.CancelRequested = true
	return want
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
