// Package leasetest is the conformance suite every lease.Store passes: the
// in-memory store and the DynamoDB store run the same cases, so the fake the
// other packages test against behaves like the table.
package leasetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/rules"
)

// CancelMarker is the hook the suite needs from every store it runs: set
// CancelRequested on the stored task id and change nothing else (not even
// UpdatedAt). Test code provides it; it stands for whatever operator write
// requests a cancellation.
type CancelMarker interface {
	MarkCancelRequested(ctx context.Context, id string) error
}

// The suite's timing. The start has a sub-millisecond part so the stores'
// rounding to the table's millisecond precision is exercised.
var start = time.Date(2031, time.March, 14, 15, 9, 26, 535_897_932, time.UTC)

const (
	leaseFor  = 20 * time.Second
	skew      = 2 * time.Second
	grace     = 3 * time.Minute
	retention = 48 * time.Hour
)

// runID keeps task ids unique across runs against a table that outlives one.
var runID = func() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}()

// NewStoreFunc builds the store under test for one case.
type NewStoreFunc func(t *testing.T, opts lease.Options) lease.Store

// Run runs the conformance suite against the stores newStore builds. Each
// case builds its own store on a fake clock and uses its own task ids, and
// runs in parallel with the others.
func Run(t *testing.T, newStore NewStoreFunc) {
	cases := []struct {
		name string
		run  func(t *testing.T, newStore NewStoreFunc)
	}{
		{"CreateIsIdempotent", testCreateIsIdempotent},
		{"CreateConflict", testCreateConflict},
		{"CreateAtRunAt", testCreateAtRunAt},
		{"CreateRejectsInvalid", testCreateRejectsInvalid},
		{"CreateAcceptsLimits", testCreateAcceptsLimits},
		{"CreateClaimed", testCreateClaimed},
		{"MetadataStaysWithTheTask", testMetadataStays},
		{"CreateFailed", testCreateFailed},
		{"CreateCarriedHasNoSweepEntry", testCreateCarried},
		{"SharedCreateToken", testSharedCreateToken},
		{"ClaimUnknown", testClaimUnknown},
		{"ClaimNotDue", testClaimNotDue},
		{"ClaimPending", testClaimPending},
		{"ClaimRejectsEmptyOwner", testClaimRejectsEmptyOwner},
		{"ClaimLosesToLiveLease", testClaimLosesToLiveLease},
		{"ClaimConcurrent", testClaimConcurrent},
		{"TakeoverAfterExpiryPlusSkew", testTakeover},
		{"RenewExtendsLease", testRenewExtendsLease},
		{"RenewReportsCancelRequested", testRenewReportsCancel},
		{"RenewNeedsTheLease", testRenewNeedsTheLease},
		{"FinishStoresResult", testFinishStoresResult},
		{"FinishRejectsBadResult", testFinishRejectsBadResult},
		{"FinishWithoutRetention", testFinishWithoutRetention},
		{"ReleaseToPending", testReleaseToPending},
		{"ReleaseWithDispatchAt", testReleaseWithDispatchAt},
		{"ReleaseRefundsAttempt", testReleaseRefundsAttempt},
		{"ReleaseUnknownKind", testReleaseUnknownKind},
		{"ContinueAsNew", testContinueAsNew},
		{"QueueIsStored", testQueueIsStored},
		{"ReleaseTerminal", testReleaseTerminal},
		{"ReleaseRejectsInvalid", testReleaseRejectsInvalid},
		{"ReleaseTruncatesError", testReleaseTruncatesError},
		{"HistoryPerAttempt", testHistoryPerAttempt},
		{"ExhaustedAfterLastLeaseExpires", testExhaustedAfterLastLease},
		{"ExhaustedWhenReleasedPending", testExhaustedWhenReleasedPending},
		{"GetRoundTripsEveryField", testGetRoundTrips},
		{"GetManyReadsInOrder", testGetMany},
		{"CancelledContextWritesNothing", testCancelledContext},
		{"FailedWritesCarryTheObservedTask", testFailedWritesCarryObserved},
		{"HistoryIsBounded", testHistoryIsBounded},
		{"RetriedWritesRecogniseTheirOwnLanding", testRetriedWritesRecogniseOwn},
		{"FanInResumesOnce", testFanInResumesOnce},
		{"ChildEndingBeforeSuspendCounts", testChildEndingBeforeSuspend},
		{"WavesOfNamedChildren", testWavesOfNamedChildren},
		{"DependenciesWaitThenRun", testDependenciesWaitThenRun},
		{"FailedDependencyCancels", testFailedDependencyCancels},
		{"CallbackLandsOnce", testCallbackLandsOnce},
		{"CallbackTimeoutRetries", testCallbackTimeoutRetries},
		{"ResumableCallback", testResumableCallback},
		{"CallbackHeartbeat", testCallbackHeartbeat},
		{"ChainLinksKept", testChainLinksKept},
		{"WaitNoteKept", testWaitNoteKept},
		{"SuspendClearsTheLastError", testSuspendClearsTheLastError},
		{"CallbackNonceNotStored", testCallbackNonceNotStored},
		{"ResumeClaims", testResumeClaims},
		{"SuspensionStartsTheAttemptCountAgain", testSuspensionStartsTheCountAgain},
		{"CheckpointOutlivesTheAttempt", testCheckpointOutlivesTheAttempt},
		{"CheckpointRecordsAStepOnce", testCheckpointRecordsAStepOnce},
		{"SpillFreezesTheHead", testSpillFreezesTheHead},
		{"TailKeepsTheFirstWriter", testTailKeepsTheFirstWriter},
		{"TailReadsInPages", testTailReadsInPages},
		{"CreateCancelledPlaceholder", testCreateCancelled},
		{"EndWaiting", testEndWaiting},
		{"WaitsHaveDeadlines", testWaitsHaveDeadlines},
		{"AbandonWait", testAbandonWait},
		{"WatchWaiterLimit", testWatchWaiterLimit},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, newStore)
		})
	}
}

// env is one case's store, clock and helpers.
type env struct {
	t     *testing.T
	ctx   context.Context
	clock *clockwork.FakeClock
	store lease.Store
	opts  lease.Options
	ids   atomic.Int64
}

func setup(t *testing.T, newStore NewStoreFunc, mods ...func(*lease.Options)) *env {
	t.Helper()
	clock := clockwork.NewFakeClockAt(start)
	opts := lease.Options{Clock: clock, LeaseDuration: leaseFor, Skew: skew, DispatchGrace: grace, Retention: retention}
	for _, m := range mods {
		m(&opts)
	}
	return &env{t: t, ctx: t.Context(), clock: clock, store: newStore(t, opts), opts: opts}
}

// now is the fake time at the table's precision.
func (e *env) now() time.Time { return ms(e.clock.Now()) }

func ms(t time.Time) time.Time { return time.UnixMilli(t.UnixMilli()).UTC() }

// expires is the TTL a task finished at finished gets.
func expires(finished time.Time) time.Time {
	return time.Unix(finished.Add(retention).Unix(), 0).UTC()
}

func (e *env) id() string {
	return fmt.Sprintf("%s/%s/%d", e.t.Name(), runID, e.ids.Add(1))
}

func (e *env) newTask() lease.NewTask {
	return lease.NewTask{
		ID:          e.id(),
		Kind:        "email.send",
		Payload:     []byte(`{"to":"ops@example.com","n":1}`),
		MaxAttempts: 3,
	}
}

// pending is the record Create makes of n at now.
func (e *env) pending(n lease.NewTask) lease.Task {
	now := e.now()
	runAt := now
	if !n.RunAt.IsZero() {
		runAt = ms(n.RunAt)
	}
	return lease.Task{
		ID: n.ID, Kind: n.Kind, Payload: n.Payload, Status: lease.StatusPending,
		MaxAttempts: n.MaxAttempts, RunAt: runAt, CreatedAt: now, UpdatedAt: now,
		DispatchAt: runAt.Add(grace), Queue: n.Queue, Metadata: n.Metadata,
	}
}

// held is prev after a claim by owner at now.
func (e *env) held(prev lease.Task, owner string) lease.Task {
	now := e.now()
	want := prev
	want.Status = lease.StatusRunning
	want.LeaseOwner = owner
	want.LeaseUntil = now.Add(leaseFor)
	// A claim leaves the sweep entry as it was (none for a task created
	// claimed; an entry keeps its time).
	want.Attempt++
	want.Fence++
	want.UpdatedAt = now
	return want
}

// ended is prev after its attempt ended in status at now.
func (e *env) ended(prev lease.Task, status lease.Status, errMsg string) lease.Task {
	now := e.now()
	want := prev
	var dropped int
	want.History, dropped = rules.AppendHistory(prev.History,
		lease.Attempt{Attempt: prev.Attempt, Fence: prev.Fence, Status: status, Error: errMsg, At: now})
	want.HistoryDropped += dropped
	want.Status = status
	want.LeaseOwner = ""
	want.LeaseUntil = time.Time{}
	want.UpdatedAt = now
	want.Error = errMsg
	if status.Terminal() {
		want.FinishedAt = now
		want.DispatchAt = time.Time{}
		if e.opts.Retention > 0 {
			want.ExpiresAt = expires(now)
		}
	}
	return want
}

func (e *env) cancelMarker() CancelMarker {
	e.t.Helper()
	m, ok := e.store.(CancelMarker)
	if !ok {
		e.t.Fatalf("%T does not implement leasetest.CancelMarker", e.store)
	}
	return m
}

func (e *env) create(n lease.NewTask) lease.Task {
	e.t.Helper()
	got, err := e.store.Create(e.ctx, n)
	if err != nil {
		e.t.Fatalf("Create(%s): %v", n.ID, err)
	}
	e.same("Create", got, e.pending(n))
	return got
}

func (e *env) claim(prev lease.Task, owner string) lease.Task {
	e.t.Helper()
	got, err := e.store.Claim(e.ctx, prev.ID, owner)
	if seen, ok := lease.Observed(err); ok && lease.ClaimedBy(owner, seen) && seen.Fence == prev.Fence+1 {
		// A backend's retried write met its own landing (its first
		// response was lost): the claim did land, as the worker reads it.
		got, err = seen, nil
	}
	if err != nil {
		e.t.Fatalf("Claim(%s, %s): %v", prev.ID, owner, err)
	}
	e.same("Claim", got, e.held(prev, owner))
	return got
}

// createClaimed creates a task and claims it for owner.
func (e *env) createClaimed(n lease.NewTask, owner string) lease.Task {
	e.t.Helper()
	return e.claim(e.create(n), owner)
}

func (e *env) release(prev lease.Task, r lease.Release) lease.Task {
	e.t.Helper()
	got, err := e.store.Release(e.ctx, prev.LeaseOf(), r)
	if seen, ok := lease.Observed(err); ok && lease.Landed(prev.LeaseOf(), r.Status, seen) {
		got, err = seen, nil // a retried write met its own landing
	}
	if err != nil {
		e.t.Fatalf("Release(%s, %s): %v", prev.ID, r.Status, err)
	}
	want := e.ended(prev, r.Status, lease.Truncate(r.Error, lease.MaxErrorBytes))
	if r.Status == lease.StatusPending {
		want.RunAt = ms(r.RunAt)
		want.DispatchAt = want.RunAt.Add(grace)
		if !r.DispatchAt.IsZero() {
			want.DispatchAt = ms(r.DispatchAt)
		}
		switch {
		case r.UnknownKind:
			want.Attempt--
			if want.UnknownKindSince.IsZero() {
				want.UnknownKindSince = e.now()
			}
		case r.RefundAttempt:
			want.Attempt--
			want.Snoozes++
		}
	}
	if !r.UnknownKind {
		want.UnknownKindSince = time.Time{}
	}
	if r.Continue != nil {
		want.Payload, want.Steps, want.Spilled, want.Run, want.Attempt = r.Continue, nil, false, want.Run+1, 0
		want.Wait, want.WaitFor, want.Ended, want.WaitUntil, want.WaitNote = "", nil, nil, time.Time{}, ""
		want.CallbackHash, want.CallbackStep = "", ""
	}
	e.same("Release", got, want)
	return got
}

func (e *env) finish(prev lease.Task, result []byte) lease.Task {
	e.t.Helper()
	got, err := e.store.Finish(e.ctx, prev.LeaseOf(), result)
	if seen, ok := lease.Observed(err); ok && lease.Landed(prev.LeaseOf(), lease.StatusSucceeded, seen) {
		got, err = seen, nil // a retried write met its own landing
	}
	if err != nil {
		e.t.Fatalf("Finish(%s): %v", prev.ID, err)
	}
	want := e.ended(prev, lease.StatusSucceeded, "")
	want.Result = result
	want.UnknownKindSince = time.Time{}
	e.same("Finish", got, want)
	return got
}

// stored checks that the stored record of want.ID is want.
func (e *env) stored(want lease.Task) {
	e.t.Helper()
	got, err := e.store.Get(e.ctx, want.ID)
	if err != nil {
		e.t.Fatalf("Get(%s): %v", want.ID, err)
	}
	e.same("Get", got, want)
}

// absent checks that no task id was stored.
func (e *env) absent(id string) {
	e.t.Helper()
	if got, err := e.store.Get(e.ctx, id); !errors.Is(err, lease.ErrNotFound) {
		e.t.Fatalf("Get(%s) = %+v, %v; want ErrNotFound", id, got, err)
	}
}

// same fails the test with every field in which got differs from want.
func (e *env) same(what string, got, want lease.Task) {
	e.t.Helper()
	if d := diffTask(got, want); len(d) > 0 {
		e.t.Fatalf("%s of %s:\n\t%s", what, want.ID, strings.Join(d, "\n\t"))
	}
}

func diffTask(got, want lease.Task) []string {
	var d []string
	add := func(field string, g, w any) { d = append(d, fmt.Sprintf("%s = %v, want %v", field, g, w)) }
	text := func(field, g, w string) {
		if g != w {
			add(field, fmt.Sprintf("%q", g), fmt.Sprintf("%q", w))
		}
	}
	num := func(field string, g, w int64) {
		if g != w {
			add(field, g, w)
		}
	}
	at := func(field string, g, w time.Time) {
		switch {
		case !g.Equal(w):
			add(field, g.Format(time.RFC3339Nano), w.Format(time.RFC3339Nano))
		case g.Nanosecond()%int(time.Millisecond) != 0:
			add(field, g.Format(time.RFC3339Nano), "millisecond precision")
		}
	}
	text("ID", got.ID, want.ID)
	text("Kind", got.Kind, want.Kind)
	if !bytes.Equal(got.Payload, want.Payload) {
		add("Payload", fmt.Sprintf("%d bytes %.40q", len(got.Payload), got.Payload), fmt.Sprintf("%d bytes %.40q", len(want.Payload), want.Payload))
	}
	text("Status", string(got.Status), string(want.Status))
	num("Attempt", int64(got.Attempt), int64(want.Attempt))
	num("MaxAttempts", int64(got.MaxAttempts), int64(want.MaxAttempts))
	text("LeaseOwner", got.LeaseOwner, want.LeaseOwner)
	at("LeaseUntil", got.LeaseUntil, want.LeaseUntil)
	num("Fence", got.Fence, want.Fence)
	at("RunAt", got.RunAt, want.RunAt)
	if !bytes.Equal(got.Result, want.Result) {
		add("Result", fmt.Sprintf("%d bytes %.40q", len(got.Result), got.Result), fmt.Sprintf("%d bytes %.40q", len(want.Result), want.Result))
	}
	text("Error", got.Error, want.Error)
	if got.CancelRequested != want.CancelRequested {
		add("CancelRequested", got.CancelRequested, want.CancelRequested)
	}
	at("CreatedAt", got.CreatedAt, want.CreatedAt)
	at("UpdatedAt", got.UpdatedAt, want.UpdatedAt)
	at("FinishedAt", got.FinishedAt, want.FinishedAt)
	at("ExpiresAt", got.ExpiresAt, want.ExpiresAt)
	at("DispatchAt", got.DispatchAt, want.DispatchAt)
	num("HistoryDropped", int64(got.HistoryDropped), int64(want.HistoryDropped))
	num("Snoozes", int64(got.Snoozes), int64(want.Snoozes))
	text("Queue", got.Queue, want.Queue)
	at("UnknownKindSince", got.UnknownKindSince, want.UnknownKindSince)
	text("Parent", got.Parent, want.Parent)
	text("Waiters", fmt.Sprint(got.Waiters), fmt.Sprint(want.Waiters))
	text("Wait", string(got.Wait), string(want.Wait))
	text("WaitFor", strings.Join(got.WaitFor, ","), strings.Join(want.WaitFor, ","))
	text("Ended", strings.Join(got.Ended, ","), strings.Join(want.Ended, ","))
	at("WaitUntil", got.WaitUntil, want.WaitUntil)
	text("CallbackHash", got.CallbackHash, want.CallbackHash)
	text("CallbackStep", got.CallbackStep, want.CallbackStep)
	text("WaitNote", got.WaitNote, want.WaitNote)
	text("Then", fmt.Sprintf("%+v", got.Then), fmt.Sprintf("%+v", want.Then))
	text("Metadata", fmt.Sprint(got.Metadata), fmt.Sprint(want.Metadata)) // (fmt sorts a map's keys)
	if len(got.History) != len(want.History) {
		add("len(History)", len(got.History), len(want.History))
		return d
	}
	for i, g := range got.History {
		w := want.History[i]
		f := fmt.Sprintf("History[%d].", i)
		num(f+"Attempt", int64(g.Attempt), int64(w.Attempt))
		num(f+"Fence", g.Fence, w.Fence)
		text(f+"Status", string(g.Status), string(w.Status))
		text(f+"Error", g.Error, w.Error)
		at(f+"At", g.At, w.At)
	}
	return d
}

// wantErr fails unless err matches target (errors.Is).
func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: error %v, want %v", what, err, target)
	}
}

// wantLeased checks a claim that lost to owner's lease until until, at a
// moment remaining before it may be taken over.
func wantLeased(t *testing.T, err error, owner string, until time.Time, remaining time.Duration) {
	t.Helper()
	var le *lease.LeasedError
	if !errors.As(err, &le) {
		t.Fatalf("claim: error %v, want *LeasedError", err)
	}
	if !errors.Is(err, lease.ErrLeased) {
		t.Fatalf("claim: %v does not match ErrLeased", err)
	}
	if le.Owner != owner || !le.Until.Equal(until) || le.Remaining != remaining {
		t.Fatalf("claim: leased by %q until %s, %s remaining; want %q until %s, %s remaining",
			le.Owner, le.Until.Format(time.RFC3339Nano), le.Remaining, owner, until.Format(time.RFC3339Nano), remaining)
	}
}

func wantNotDue(t *testing.T, err error, runAt time.Time) {
	t.Helper()
	var nd *lease.NotDueError
	if !errors.As(err, &nd) || !errors.Is(err, lease.ErrNotDue) {
		t.Fatalf("claim: error %v, want *NotDueError", err)
	}
	if !nd.RunAt.Equal(runAt) {
		t.Fatalf("claim: not due until %s, want %s", nd.RunAt.Format(time.RFC3339Nano), runAt.Format(time.RFC3339Nano))
	}
}

func wantFinished(t *testing.T, err error, status lease.Status) {
	t.Helper()
	var fe *lease.FinishedError
	if !errors.As(err, &fe) || !errors.Is(err, lease.ErrFinished) {
		t.Fatalf("error %v, want *FinishedError", err)
	}
	if fe.Status != status {
		t.Fatalf("finished as %s, want %s", fe.Status, status)
	}
}

// wantLeaseLost checks that every write under l fails with ErrLeaseLost.
func (e *env) wantLeaseLost(l lease.Lease) {
	e.t.Helper()
	_, err := e.store.Renew(e.ctx, l)
	wantErr(e.t, "Renew", err, lease.ErrLeaseLost)
	_, err = e.store.Finish(e.ctx, l, []byte(`"stale"`))
	wantErr(e.t, "Finish", err, lease.ErrLeaseLost)
	_, err = e.store.Release(e.ctx, l, lease.Release{Status: lease.StatusPending, RunAt: e.now(), Error: "stale"})
	wantErr(e.t, "Release PENDING", err, lease.ErrLeaseLost)
	_, err = e.store.Release(e.ctx, l, lease.Release{Status: lease.StatusFailed, Error: "stale"})
	wantErr(e.t, "Release FAILED", err, lease.ErrLeaseLost)
}

// observed checks that err carries the stored task want, as seen by the
// write that failed, and returns it.
func (e *env) observed(what string, err error, want lease.Task) lease.Task {
	e.t.Helper()
	got, ok := lease.Observed(err)
	if !ok {
		e.t.Fatalf("%s: error %v carries no observed task", what, err)
	}
	e.same(what+" (observed)", got, want)
	return got
}
