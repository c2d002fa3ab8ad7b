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
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jonboulle/clockwork"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/query"
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
		{"ChainLinksKept", testChainLinksKept},
		{"WaitNoteKept", testWaitNoteKept},
		{"SuspendClearsTheLastError", testSuspendClearsTheLastError},
		{"CallbackNonceNotStored", testCallbackNonceNotStored},
		{"ResumeClaims", testResumeClaims},
		{"SuspensionStartsTheAttemptCountAgain", testSuspensionStartsTheCountAgain},
		{"CheckpointOutlivesTheAttempt", testCheckpointOutlivesTheAttempt},
		{"CheckpointRecordsAStepOnce", testCheckpointRecordsAStepOnce},
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
		DispatchAt: runAt.Add(grace), Queue: n.Queue,
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

func testCreateIsIdempotent(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	n := e.newTask()
	first := e.create(n)
	e.stored(first)

	// The same id, kind and payload is a duplicate, however the payload is
	// spelt and whatever else differs: the stored task stands.
	e.clock.Advance(time.Second)
	again := n
	again.Payload = []byte(" {\"n\": 1,\n \"to\":\"ops@example.com\"} ")
	again.MaxAttempts = 7
	got, err := e.store.Create(e.ctx, again)
	wantErr(t, "second Create", err, lease.ErrAlreadyExists)
	if errors.Is(err, lease.ErrConflict) {
		t.Fatalf("second Create: %v matches ErrConflict too", err)
	}
	e.same("second Create", got, first)
	got, err = e.store.CreateClaimed(e.ctx, again, "w1")
	wantErr(t, "CreateClaimed of an existing id", err, lease.ErrAlreadyExists)
	e.same("CreateClaimed of an existing id", got, first)
	e.stored(first)
}

func testCreateConflict(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	n := e.newTask()
	first := e.create(n)
	noPayload := e.newTask()
	noPayload.Payload = nil
	bare := e.create(noPayload)
	cases := []struct {
		name   string
		base   lease.Task
		modify func(*lease.NewTask)
		field  string
	}{
		{"another kind", first, func(c *lease.NewTask) { c.Kind = "other.kind" }, "kind"},
		{"another kind and payload", first, func(c *lease.NewTask) { c.Kind, c.Payload = "other.kind", []byte(`{}`) }, "kind"},
		{"another payload", first, func(c *lease.NewTask) { c.Payload = []byte(`{"to":"ops@example.com","n":2}`) }, "payload"},
		{"a number spelt otherwise", first, func(c *lease.NewTask) { c.Payload = []byte(`{"to":"ops@example.com","n":1.0}`) }, "payload"},
		{"no payload", first, func(c *lease.NewTask) { c.Payload = nil }, "payload"},
		{"a payload where there was none", bare, func(c *lease.NewTask) { c.Payload = []byte(`0`) }, "payload"},
	}
	for _, c := range cases {
		sub := lease.NewTask{ID: c.base.ID, Kind: c.base.Kind, Payload: c.base.Payload, MaxAttempts: 3}
		c.modify(&sub)
		for _, op := range []string{"Create", "CreateClaimed"} {
			var (
				got lease.Task
				err error
			)
			if op == "Create" {
				got, err = e.store.Create(e.ctx, sub)
			} else {
				got, err = e.store.CreateClaimed(e.ctx, sub, "w1")
			}
			var ce *lease.ConflictError
			switch {
			case !errors.As(err, &ce) || !errors.Is(err, lease.ErrConflict):
				t.Fatalf("%s with %s: error %v, want *ConflictError", op, c.name, err)
			case errors.Is(err, lease.ErrAlreadyExists):
				t.Fatalf("%s with %s: %v also matches ErrAlreadyExists", op, c.name, err)
			case ce.TaskID != c.base.ID || ce.Field != c.field || ce.Status != lease.StatusPending:
				t.Fatalf("%s with %s: %+v, want field %s of %s", op, c.name, ce, c.field, c.base.ID)
			case !strings.Contains(err.Error(), "conflict"):
				t.Fatalf("%s with %s: %q does not say conflict", op, c.name, err)
			}
			e.same(op+" with "+c.name, got, c.base)
		}
	}
	e.stored(first)
	e.stored(bare)
}

func testCreateAtRunAt(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	n := e.newTask()
	n.RunAt = e.clock.Now().Add(90*time.Minute + 700*time.Microsecond)
	got := e.create(n)
	if !got.RunAt.Equal(ms(n.RunAt)) || !got.DispatchAt.Equal(ms(n.RunAt).Add(grace)) {
		t.Fatalf("run at %s, dispatch at %s", got.RunAt, got.DispatchAt)
	}
	e.stored(got)
}

func testCreateRejectsInvalid(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	valid := e.newTask
	cases := []struct {
		name   string
		modify func(*lease.NewTask)
		target error
	}{
		{"no id", func(n *lease.NewTask) { n.ID = "" }, lease.ErrInvalid},
		{"long id", func(n *lease.NewTask) { n.ID += strings.Repeat("x", lease.MaxIDBytes) }, lease.ErrInvalid},
		{"id with NUL", func(n *lease.NewTask) { n.ID += "\x00" }, lease.ErrInvalid},
		{"id with newline", func(n *lease.NewTask) { n.ID += "\nFAILED fake" }, lease.ErrInvalid},
		{"id with ESC", func(n *lease.NewTask) { n.ID += "\x1b[2J" }, lease.ErrInvalid},
		{"id with DEL", func(n *lease.NewTask) { n.ID += "\x7f" }, lease.ErrInvalid},
		{"id with C1 control", func(n *lease.NewTask) { n.ID += "\u0085" }, lease.ErrInvalid},
		{"id with RLO", func(n *lease.NewTask) { n.ID += "\u202egpj.exe" }, lease.ErrInvalid},
		{"id with LRI", func(n *lease.NewTask) { n.ID += "\u2066" }, lease.ErrInvalid},
		{"id with zero-width space", func(n *lease.NewTask) { n.ID += "\u200b" }, lease.ErrInvalid},
		{"id with line separator", func(n *lease.NewTask) { n.ID += "\u2028" }, lease.ErrInvalid},
		{"id not UTF-8", func(n *lease.NewTask) { n.ID += "\xff" }, lease.ErrInvalid},
		{"id with U+FFFD", func(n *lease.NewTask) { n.ID += "\ufffd" }, lease.ErrInvalid},
		{"no kind", func(n *lease.NewTask) { n.Kind = "" }, lease.ErrInvalid},
		{"long kind", func(n *lease.NewTask) { n.Kind = strings.Repeat("k", lease.MaxKindBytes+1) }, lease.ErrInvalid},
		{"no attempts", func(n *lease.NewTask) { n.MaxAttempts = 0 }, lease.ErrInvalid},
		{"too many attempts", func(n *lease.NewTask) { n.MaxAttempts = lease.MaxAttemptsLimit + 1 }, lease.ErrInvalid},
		{"payload not UTF-8", func(n *lease.NewTask) { n.Payload = []byte("\"\xff\xfe\"") }, lease.ErrInvalid},
		{"payload too large", func(n *lease.NewTask) { n.Payload = jsonText(lease.MaxPayloadBytes + 1) }, lease.ErrTooLarge},
	}
	for _, c := range cases {
		n := valid()
		c.modify(&n)
		_, err := e.store.Create(e.ctx, n)
		wantErr(t, "Create with "+c.name, err, c.target)
		_, err = e.store.CreateClaimed(e.ctx, n, "w1")
		wantErr(t, "CreateClaimed with "+c.name, err, c.target)
		e.absent(n.ID)
		if n.ID != "" {
			_, err = e.store.Claim(e.ctx, n.ID, "w1")
			wantErr(t, "Claim with "+c.name, err, lease.ErrNotFound)
		}
	}

	n := valid()
	n.Payload = jsonText(lease.MaxPayloadBytes + 1)
	_, err := e.store.Create(e.ctx, n)
	var tl *lease.TooLargeError
	if !errors.As(err, &tl) || tl.What != "payload" || tl.Size != lease.MaxPayloadBytes+1 || tl.Limit != lease.MaxPayloadBytes {
		t.Fatalf("Create with a large payload: error %v, want *TooLargeError for the payload", err)
	}

	n = valid()
	_, err = e.store.CreateClaimed(e.ctx, n, "")
	wantErr(t, "CreateClaimed without owner", err, lease.ErrInvalid)
	e.absent(n.ID)
}

// jsonText returns a JSON string document of exactly size bytes.
func jsonText(size int) []byte {
	return []byte(`"` + strings.Repeat("a", size-2) + `"`)
}

func testCreateAcceptsLimits(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	n := e.newTask()
	n.ID += strings.Repeat("i", lease.MaxIDBytes-len(n.ID))
	n.Kind = strings.Repeat("k", lease.MaxKindBytes)
	n.Payload = jsonText(lease.MaxPayloadBytes)
	n.MaxAttempts = lease.MaxAttemptsLimit
	e.stored(e.create(n))

	n = e.newTask()
	n.Payload = nil
	n.MaxAttempts = 1
	e.stored(e.create(n))

	// Any visible character and a plain space are fine, in any script.
	n = e.newTask()
	n.ID += " naïve/café:Ünïcödé 東京 🚀 \U000f0000"
	e.stored(e.create(n))
}

func testCreateClaimed(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	n := e.newTask()
	got, err := e.store.CreateClaimed(e.ctx, n, "w1")
	if err != nil {
		t.Fatalf("CreateClaimed: %v", err)
	}
	pending := e.pending(n)
	pending.DispatchAt = time.Time{} // never in the sweep index: its message brings it back
	want := e.held(pending, "w1")
	e.same("CreateClaimed", got, want)
	if got.Attempt != 1 || got.Fence != 1 {
		t.Fatalf("attempt %d, fence %d; want 1, 1", got.Attempt, got.Fence)
	}
	e.stored(want)

	e.clock.Advance(time.Second)
	again, err := e.store.CreateClaimed(e.ctx, n, "w2")
	wantErr(t, "second CreateClaimed", err, lease.ErrAlreadyExists)
	e.same("second CreateClaimed", again, want)
	_, err = e.store.Claim(e.ctx, n.ID, "w2")
	wantLeased(t, err, "w1", want.LeaseUntil, leaseFor+skew-time.Second)
	e.stored(want)
}

// A carried task (its token was sent before the create) gets no sweep
// entry; a carried task with a dispatch time is invalid.
func testCreateCarried(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	n := e.newTask()
	n.Carried = true
	got, err := e.store.Create(e.ctx, n)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	want := e.pending(n)
	want.DispatchAt = time.Time{}
	e.same("Create", got, want)
	e.stored(want)
	// The claim leaves it without one.
	claimed, err := e.store.Claim(e.ctx, n.ID, "w1")
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	if !claimed.DispatchAt.IsZero() {
		t.Fatalf("Claim gave a carried task a sweep entry at %s", claimed.DispatchAt)
	}

	bad := e.newTask()
	bad.Carried, bad.DispatchAt = true, e.now().Add(time.Hour)
	_, err = e.store.Create(e.ctx, bad)
	wantErr(t, "Create of a carried task with a dispatch time", err, lease.ErrInvalid)
	e.absent(bad.ID)
}

// Two writers of one task share a create token: a client that sends the
// task's token before storing it, and the worker that receives the token
// first and creates the task itself. Whichever lands second learns the task
// is its own: a plain create succeeds with the stored task; a CreateClaimed
// gets ErrAlreadyExists with the stored task, so that it claims instead of
// believing it holds a lease it does not. Another token is a duplicate.
func testSharedCreateToken(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)

	// The worker first, then the client.
	n := e.newTask()
	n.CreateToken = "tok-" + runID
	held, err := e.store.CreateClaimed(e.ctx, n, "w1")
	if err != nil {
		t.Fatalf("CreateClaimed: %v", err)
	}
	client := n
	client.Carried = true
	got, err := e.store.Create(e.ctx, client)
	if err != nil {
		t.Fatalf("Create after the worker's CreateClaimed with the same token: %v", err)
	}
	e.same("Create after CreateClaimed", got, held)
	e.stored(held)

	// The client first, then the worker.
	m := e.newTask()
	m.CreateToken = "tok2-" + runID
	m.Carried = true
	pending, err := e.store.Create(e.ctx, m)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	worker := m
	worker.Carried = false
	got, err = e.store.CreateClaimed(e.ctx, worker, "w1")
	wantErr(t, "CreateClaimed after the client's Create with the same token", err, lease.ErrAlreadyExists)
	e.same("CreateClaimed after Create", got, pending)
	e.stored(pending)

	// Another token is someone else's create of the same task.
	other := m
	other.CreateToken = "other-" + runID
	got, err = e.store.Create(e.ctx, other)
	wantErr(t, "Create with another token", err, lease.ErrAlreadyExists)
	e.same("Create with another token", got, pending)
}

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

func testReleaseToPending(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	claimed := e.createClaimed(e.newTask(), "w1")
	e.clock.Advance(2 * time.Second)
	runAt := e.clock.Now().Add(30*time.Second + 400*time.Microsecond)
	released := e.release(claimed, lease.Release{Status: lease.StatusPending, RunAt: runAt, Error: "boom"})
	if !released.DispatchAt.Equal(ms(runAt).Add(grace)) || released.Attempt != 1 || !released.FinishedAt.IsZero() {
		t.Fatalf("released task %+v", released)
	}
	e.stored(released)
	e.wantLeaseLost(claimed.LeaseOf())

	_, err := e.store.Claim(e.ctx, claimed.ID, "w2")
	wantNotDue(t, err, ms(runAt))
	e.clock.Advance(ms(runAt).Sub(e.now()) - time.Millisecond)
	_, err = e.store.Claim(e.ctx, claimed.ID, "w2")
	wantNotDue(t, err, ms(runAt))
	e.clock.Advance(time.Millisecond)
	again := e.claim(released, "w2")
	if again.Fence != 2 || again.Attempt != 2 || again.Error != "boom" {
		t.Fatalf("claimed again: fence %d attempt %d error %q", again.Fence, again.Attempt, again.Error)
	}
	e.stored(again)
}

func testReleaseWithDispatchAt(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	claimed := e.createClaimed(e.newTask(), "w1")
	dispatchAt := e.clock.Now().Add(20*time.Minute + 250*time.Microsecond)
	released := e.release(claimed, lease.Release{
		Status: lease.StatusPending, RunAt: e.clock.Now().Add(20 * time.Minute), DispatchAt: dispatchAt, Error: "later",
	})
	if !released.DispatchAt.Equal(ms(dispatchAt)) {
		t.Fatalf("dispatch at %s, want %s", released.DispatchAt, ms(dispatchAt))
	}
	e.stored(released)
}

func testReleaseRefundsAttempt(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	n := e.newTask()
	n.MaxAttempts = 1
	claimed := e.createClaimed(n, "w1")
	snoozed := e.release(claimed, lease.Release{Status: lease.StatusPending, RunAt: e.now(), RefundAttempt: true, Error: "snoozed"})
	if snoozed.Attempt != 0 || snoozed.History[0].Attempt != 1 {
		t.Fatalf("after refund: attempt %d, history %+v", snoozed.Attempt, snoozed.History)
	}
	e.stored(snoozed)
	again := e.claim(snoozed, "w2") // the only attempt was handed back
	if again.Attempt != 1 || again.Fence != 2 {
		t.Fatalf("claimed after refund: attempt %d fence %d; want 1, 2", again.Attempt, again.Fence)
	}
	e.stored(again)
	failed := e.release(again, lease.Release{Status: lease.StatusFailed, Error: "bad"})
	if h := failed.History[1]; h.Attempt != 1 || h.Fence != 2 {
		t.Fatalf("history of the attempt after the refund: %+v, want attempt 1, fence 2", h)
	}
	e.stored(failed)
}

func testReleaseUnknownKind(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	n := e.newTask()
	n.MaxAttempts = 1
	claimed := e.createClaimed(n, "w1")
	first := e.now()
	released := e.release(claimed, lease.Release{Status: lease.StatusPending, RunAt: e.now().Add(time.Minute), UnknownKind: true, Error: "unknown task kind"})
	if released.Attempt != 0 || released.Snoozes != 0 || !released.UnknownKindSince.Equal(first) {
		t.Fatalf("after an unknown-kind release: attempt %d, snoozes %d, unknown since %s; want 0, 0, %s",
			released.Attempt, released.Snoozes, released.UnknownKindSince, first)
	}
	e.stored(released)

	// A second finding keeps the first time.
	e.clock.Advance(time.Minute)
	again := e.claim(released, "w2")
	released = e.release(again, lease.Release{Status: lease.StatusPending, RunAt: e.now().Add(time.Minute), UnknownKind: true, Error: "unknown task kind"})
	if !released.UnknownKindSince.Equal(first) || released.Attempt != 0 {
		t.Fatalf("after a second unknown-kind release: unknown since %s, attempt %d; want %s, 0", released.UnknownKindSince, released.Attempt, first)
	}
	e.stored(released)

	// A worker that knows the kind ends the run of findings.
	e.clock.Advance(time.Minute)
	known := e.claim(released, "w3")
	retried := e.release(known, lease.Release{Status: lease.StatusPending, RunAt: e.now(), Error: "boom"})
	if !retried.UnknownKindSince.IsZero() {
		t.Fatalf("unknown since %s after a known-kind release, want zero", retried.UnknownKindSince)
	}
	e.stored(retried)

	_, err := e.store.Release(e.ctx, known.LeaseOf(), lease.Release{Status: lease.StatusFailed, UnknownKind: true})
	wantErr(t, "an unknown-kind release to FAILED", err, lease.ErrInvalid)
}

func testQueueIsStored(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	n := e.newTask()
	n.Queue = "images-work_2"
	task := e.create(n)
	e.stored(task)
	claimed := e.claim(task, "w1")
	released := e.release(claimed, lease.Release{Status: lease.StatusPending, RunAt: e.now(), Error: "again"})
	if released.Queue != n.Queue {
		t.Fatalf("queue after release = %q, want %q", released.Queue, n.Queue)
	}
	done := e.finish(e.claim(released, "w2"), nil)
	e.stored(done)

	c := e.newTask()
	c.Queue = "other"
	claimedAtOnce, err := e.store.CreateClaimed(e.ctx, c, "w1")
	if err != nil || claimedAtOnce.Queue != "other" {
		t.Fatalf("CreateClaimed with a queue = %+v, %v", claimedAtOnce, err)
	}
	e.stored(claimedAtOnce)

	for _, bad := range []string{"jobs.fifo", "has space", strings.Repeat("q", 81)} {
		b := e.newTask()
		b.Queue = bad
		_, err := e.store.Create(e.ctx, b)
		wantErr(t, "Create with queue "+bad, err, lease.ErrInvalid)
		e.absent(b.ID)
	}
}

func testReleaseTerminal(t *testing.T, newStore NewStoreFunc) {
	for _, status := range []lease.Status{lease.StatusFailed, lease.StatusCancelled} {
		t.Run(string(status), func(t *testing.T) {
			t.Parallel()
			e := setup(t, newStore)
			claimed := e.createClaimed(e.newTask(), "w1")
			e.clock.Advance(3 * time.Second)
			ended := e.release(claimed, lease.Release{Status: status, Error: "gave up", RunAt: e.now().Add(time.Hour)})
			if !ended.RunAt.Equal(claimed.RunAt) || !ended.DispatchAt.IsZero() || !ended.FinishedAt.Equal(e.now()) {
				t.Fatalf("ended task %+v", ended)
			}
			e.stored(ended)
			_, err := e.store.Claim(e.ctx, ended.ID, "w2")
			wantFinished(t, err, status)
			e.wantLeaseLost(claimed.LeaseOf())
			e.stored(ended)
		})
	}
}

func testReleaseRejectsInvalid(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	claimed := e.createClaimed(e.newTask(), "w1")
	for _, r := range []lease.Release{
		{Status: lease.StatusPending},
		{Status: lease.StatusRunning, RunAt: e.now()},
		{Status: lease.StatusSucceeded},
		{Status: "", RunAt: e.now()},
	} {
		_, err := e.store.Release(e.ctx, claimed.LeaseOf(), r)
		wantErr(t, fmt.Sprintf("Release to %q", r.Status), err, lease.ErrInvalid)
	}
	e.stored(claimed)
}

func testReleaseTruncatesError(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	// A two-byte rune straddles the limit, so the cut must step back.
	msg := "x" + strings.Repeat("é", lease.MaxErrorBytes)
	claimed := e.createClaimed(e.newTask(), "w1")
	released := e.release(claimed, lease.Release{Status: lease.StatusPending, RunAt: e.now(), Error: msg})
	// The history entry keeps a shorter cut (MaxHistoryErrorBytes), so
	// that every limit at once fits DynamoDB's 400 KB item.
	if len(released.Error) != lease.MaxErrorBytes-1 || !utf8.ValidString(released.Error) ||
		len(released.History[0].Error) != lease.MaxHistoryErrorBytes-1 || !utf8.ValidString(released.History[0].Error) ||
		!strings.HasPrefix(msg, released.History[0].Error) || !strings.HasPrefix(msg, released.Error) {
		t.Fatalf("stored error of %d bytes (valid UTF-8 %v), history error of %d bytes",
			len(released.Error), utf8.ValidString(released.Error), len(released.History[0].Error))
	}
	e.stored(released)
}

func testHistoryPerAttempt(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	task := e.create(e.newTask())
	ends := []lease.Release{
		{Status: lease.StatusPending, Error: "first"},
		{Status: lease.StatusPending, Error: ""},
		{Status: lease.StatusFailed, Error: "third"},
	}
	for i, r := range ends {
		e.clock.Advance(time.Second)
		task = e.claim(task, fmt.Sprintf("w%d", i))
		if task.Fence != int64(i+1) || task.Attempt != i+1 {
			t.Fatalf("claim %d: fence %d attempt %d", i+1, task.Fence, task.Attempt)
		}
		e.clock.Advance(time.Second)
		r.RunAt = e.now()
		task = e.release(task, r)
	}
	if len(task.History) != len(ends) {
		t.Fatalf("history has %d entries, want %d", len(task.History), len(ends))
	}
	for i, a := range task.History {
		if a.Attempt != i+1 || a.Fence != int64(i+1) || a.Status != ends[i].Status || a.Error != ends[i].Error {
			t.Fatalf("history[%d] = %+v", i, a)
		}
	}
	e.stored(task)
}

// testGetMany: GetMany returns what Get returns, in the order asked, a
// missing or malformed id as a task with only its id, a repeated id at each
// place; more ids than one batch call takes are read too.
func testGetMany(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	mg, ok := e.store.(query.ManyGetter)
	if !ok {
		t.Fatalf("%T does not implement lease.ManyGetter", e.store)
	}
	var ids []string
	want := map[string]lease.Task{}
	for i := range 120 {
		n := e.newTask()
		var got lease.Task
		if i%2 == 0 {
			got = e.finish(e.createClaimed(n, "w1"), []byte(`"ok"`))
		} else {
			got = e.create(n)
		}
		ids, want[n.ID] = append(ids, n.ID), got
	}
	ask := append([]string{"missing-" + e.id(), ids[3], ""}, ids...)
	ask = append(ask, ids[3])
	got, err := mg.GetMany(e.ctx, ask)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(ask) {
		t.Fatalf("GetMany of %d ids gave %d tasks", len(ask), len(got))
	}
	for i, id := range ask {
		w, ok := want[id]
		if !ok {
			w = lease.Task{ID: id}
		}
		e.same(fmt.Sprintf("GetMany[%d] (%q)", i, id), got[i], w)
	}
}

func testExhaustedAfterLastLease(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	n := e.newTask()
	n.MaxAttempts = 2
	first := e.createClaimed(n, "w1")
	retry := e.release(first, lease.Release{Status: lease.StatusPending, RunAt: e.now(), Error: "first"})
	last := e.claim(retry, "w2")

	e.clock.Advance(leaseFor + skew) // not yet expired beyond the skew bound
	_, err := e.store.Claim(e.ctx, n.ID, "w3")
	wantLeased(t, err, "w2", last.LeaseUntil, 0)

	e.clock.Advance(time.Millisecond)
	_, err = e.store.Claim(e.ctx, n.ID, "w3")
	var ex *lease.ExhaustedError
	if !errors.As(err, &ex) || !errors.Is(err, lease.ErrAttemptsExhausted) {
		t.Fatalf("claim after the last lease expired: error %v, want *ExhaustedError", err)
	}
	e.same("ExhaustedError.Task", ex.Task, last)
	e.stored(last)

	failed := e.release(ex.Task, lease.Release{Status: lease.StatusFailed, Error: "attempts exhausted"})
	e.stored(failed)
	_, err = e.store.Claim(e.ctx, n.ID, "w3")
	wantFinished(t, err, lease.StatusFailed)
}

func testExhaustedWhenReleasedPending(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	n := e.newTask()
	n.MaxAttempts = 1
	released := e.release(e.createClaimed(n, "w1"), lease.Release{Status: lease.StatusPending, RunAt: e.now()})
	_, err := e.store.Claim(e.ctx, n.ID, "w2")
	wantErr(t, "claim with no attempt left", err, lease.ErrAttemptsExhausted)
	e.stored(released)
}

func testGetRoundTrips(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	marker := e.cancelMarker()
	n := e.newTask()
	n.Payload = []byte("{\"msg\":\"h\u00e9llo \\\"w\\\"\\n\\u0000\",\"emoji\":\"\U0001F600\",\"n\":[1,2.5e-3,null,true]}")
	n.MaxAttempts = 4
	_, err := e.store.Get(e.ctx, n.ID)
	wantErr(t, "Get before Create", err, lease.ErrNotFound)

	task, err := e.store.CreateClaimed(e.ctx, n, "worker-\u00e9")
	if err != nil {
		t.Fatalf("CreateClaimed: %v", err)
	}
	e.stored(task)
	e.clock.Advance(1500 * time.Microsecond)
	task, err = e.store.Renew(e.ctx, task.LeaseOf())
	if err != nil {
		t.Fatalf("Renew: %v", err)
	}
	e.stored(task)
	e.clock.Advance(time.Second)
	if err := marker.MarkCancelRequested(e.ctx, task.ID); err != nil {
		t.Fatalf("MarkCancelRequested: %v", err)
	}
	task.CancelRequested = true
	e.stored(task)
	e.clock.Advance(time.Second)
	task = e.release(task, lease.Release{
		Status: lease.StatusPending, RunAt: e.clock.Now().Add(time.Minute), DispatchAt: e.clock.Now().Add(time.Hour), Error: "err\u00e9\n1",
	})
	e.stored(task)
	e.clock.Advance(time.Minute)
	task = e.claim(task, "w2")
	e.stored(task)
	e.clock.Advance(time.Second)
	task = e.finish(task, []byte(`{"ok":"\u00e9"}`))
	e.stored(task)
	if len(task.History) != 2 || !task.CancelRequested || task.Fence != 2 {
		t.Fatalf("final task %+v", task)
	}
}

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

// A task that keeps snoozing keeps the newest MaxHistory entries and counts
// the rest, so its item stays far below DynamoDB's 400 KB.
func testHistoryIsBounded(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	n := e.newTask()
	n.MaxAttempts = 1
	task := e.create(n)
	// A long error on every entry: unbounded, 60 of them would pass 120 KB.
	reason := strings.Repeat("s", lease.MaxErrorBytes)
	const snoozes = lease.MaxHistory + 10
	for i := range snoozes {
		task = e.claim(task, fmt.Sprintf("w%d", i))
		e.clock.Advance(time.Second)
		task = e.release(task, lease.Release{Status: lease.StatusPending, RunAt: e.now(), RefundAttempt: true, Error: reason})
	}
	if len(task.History) != lease.MaxHistory || task.HistoryDropped != snoozes-lease.MaxHistory || task.Snoozes != snoozes {
		t.Fatalf("after %d snoozes: %d history entries, %d dropped, %d snoozes; want %d, %d, %d",
			snoozes, len(task.History), task.HistoryDropped, task.Snoozes, lease.MaxHistory, snoozes-lease.MaxHistory, snoozes)
	}
	if first, last := task.History[0], task.History[len(task.History)-1]; first.Fence != snoozes-lease.MaxHistory+1 || last.Fence != snoozes {
		t.Fatalf("kept fences %d..%d, want the newest %d..%d", first.Fence, last.Fence, snoozes-lease.MaxHistory+1, snoozes)
	}
	e.stored(task)
	// The attempt after the snoozes still ends normally, at the bound.
	task = e.claim(task, "last")
	done := e.finish(task, []byte(`1`))
	if len(done.History) != lease.MaxHistory || done.HistoryDropped != snoozes-lease.MaxHistory+1 {
		t.Fatalf("after the finish: %d entries, %d dropped", len(done.History), done.HistoryDropped)
	}
	e.stored(done)
}

// A submission that cannot run is recorded FAILED in one write: no lease, no
// attempt, not in the sweep index, and no claim can ever run it.
func testCreateFailed(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	n := e.newTask()
	n.Payload = nil
	reason := "payload too large: " + strings.Repeat("p", lease.MaxErrorBytes)
	got, err := e.store.CreateFailed(e.ctx, n, reason)
	if err != nil {
		t.Fatalf("CreateFailed: %v", err)
	}
	want := e.pending(n)
	want.Status = lease.StatusFailed
	want.Error = lease.Truncate(reason, lease.MaxErrorBytes)
	want.DispatchAt = time.Time{}
	want.FinishedAt = e.now()
	want.ExpiresAt = expires(e.now())
	e.same("CreateFailed", got, want)
	e.stored(want)

	e.clock.Advance(time.Second)
	again, err := e.store.CreateFailed(e.ctx, n, "again")
	wantErr(t, "CreateFailed of an existing id", err, lease.ErrAlreadyExists)
	e.same("CreateFailed of an existing id", again, want)
	_, err = e.store.CreateClaimed(e.ctx, n, "w1")
	wantErr(t, "CreateClaimed of a failed id", err, lease.ErrAlreadyExists)
	_, err = e.store.Claim(e.ctx, n.ID, "w1")
	wantFinished(t, err, lease.StatusFailed)
	e.stored(want)
}
