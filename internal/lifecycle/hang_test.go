package lifecycle_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/leasehold/leasehold/internal/durable"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/leasemem"
	"github.com/leasehold/leasehold/internal/lease/query"
	"github.com/leasehold/leasehold/internal/lifecycle"
	"github.com/leasehold/leasehold/internal/token"
)

// maxFollowed bounds how many messages a chain test follows: enough to
// show a chain, far fewer than the thousands a re-sending chain makes.
const maxFollowed = 20

// follow delivers every message sent to the work queue from mark on, each
// once its delay has passed (the fake clock advances by it), and every
// message those cause, up to maxFollowed of them. It returns how many
// messages were sent from mark on.
func (e *env) follow(t *testing.T, mark int) int {
	t.Helper()
	start := mark
	for mark-start < maxFollowed {
		sent := e.sqs.sentTo(workURL)
		if mark >= len(sent) {
			break
		}
		m := sent[mark]
		mark++
		e.clock.Advance(time.Duration(m.DelaySeconds) * time.Second)
		e.exec.Process(t.Context(), nil, msg(fmt.Sprintf("f%d", mark), aws.ToString(m.MessageBody)))
	}
	return len(e.sqs.sentTo(workURL)) - start
}

// due reports whether the sweep index lists id as due at the fake clock's
// now: what the sweep would dispatch.
func (e *env) due(t *testing.T, id string) bool {
	t.Helper()
	due, err := e.store.Due(t.Context(), lease.Shard(id), e.clock.Now(), 1000)
	if err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(due, func(d query.DueTask) bool { return d.ID == id })
}

func awaitCallbackFor(e *env, timeout time.Duration) {
	e.handlers["approve"] = func(ctx context.Context, _ lease.Task) ([]byte, error) {
		if _, err := durable.CallbackTokenOf(ctx); err != nil {
			return nil, err
		}
		return nil, &durable.AwaitCallbackError{Timeout: timeout}
	}
}

// Issue 18, item 8: a forged wake or reference token for a task waiting
// 30 days for a callback re-sent itself every 15 minutes until the
// deadline (2,880 messages). Each must cause at most one further message.
func TestForgedTokenOnALongCallbackWaitCausesAtMostOneMessage(t *testing.T) {
	t.Parallel()
	for name, forged := range map[string]string{"wake": token.Wake("x"), "ref": token.Ref("x")} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, nil)
			awaitCallbackFor(e, 30*24*time.Hour)
			if res := e.exec.Process(t.Context(), nil, msg("x", inline(t, "approve", "x", "", 1))); res.Outcome != lifecycle.OutcomeSuspended {
				t.Fatalf("%+v", res)
			}
			mark := len(e.sqs.sentTo(workURL))
			e.clock.Advance(time.Hour)
			e.exec.Process(t.Context(), nil, msg("forged", forged))
			if n := e.follow(t, mark); n > 1 {
				t.Fatalf("one forged %s token on a 30-day callback wait caused %d messages (followed up to %d), want at most 1", name, n, maxFollowed)
			}
			if got := e.get(t, "x"); got.Status != lease.StatusWaiting {
				t.Fatalf("x after a forged token: %s, want still WAITING", got.Status)
			}
		})
	}
}

// Every message of a 30-day callback wait delivered twice (SQS delivers
// at least once): the duplicates start no chains, and the wait still ends
// at its deadline, through the sweep index.
func TestDuplicateTimerTokensOfALongCallbackWaitStartNoChain(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	awaitCallbackFor(e, 30*24*time.Hour)
	e.exec.Process(t.Context(), nil, msg("x", inline(t, "approve", "x", "", 1)))
	deadline := e.clock.Now().Add(30 * 24 * time.Hour)
	timers := e.sqs.sentTo(workURL)
	mark := len(timers)
	for i, m := range timers {
		e.clock.Advance(time.Duration(m.DelaySeconds) * time.Second)
		for d := range 2 {
			e.exec.Process(t.Context(), nil, msg(fmt.Sprintf("t%d-%d", i, d), aws.ToString(m.MessageBody)))
		}
	}
	if n := e.follow(t, mark); n > len(timers) {
		t.Fatalf("%d timer tokens each delivered twice caused %d messages (followed up to %d), want at most one each", len(timers), n, maxFollowed)
	}
	if got := e.get(t, "x"); got.Status != lease.StatusWaiting {
		t.Fatalf("x: %s before its deadline, want WAITING", got.Status)
	}
	e.clock.Advance(deadline.Sub(e.clock.Now()) - time.Minute)
	if e.due(t, "x") {
		t.Fatal("x is due for the sweep a minute before its deadline")
	}
	e.clock.Advance(time.Minute)
	if !e.due(t, "x") {
		t.Fatal("x is not due for the sweep at its deadline: nothing would end the wait")
	}
	mark = len(e.sqs.sentTo(workURL))
	for d := range 2 { // the sweep's token, delivered twice
		e.exec.Process(t.Context(), nil, msg(fmt.Sprintf("sweep%d", d), token.Ref("x")))
	}
	if got := e.get(t, "x"); got.Status != lease.StatusFailed || !strings.Contains(got.Error, "callback not received") {
		t.Fatalf("x at its deadline: %s %q, want FAILED: callback not received", got.Status, got.Error)
	}
	if n := len(e.sqs.sentTo(workURL)) - mark; n > 0 {
		t.Fatalf("the deadline's token, twice, sent %d messages", n)
	}
}

// A task waiting for children that never end fails at the wait's deadline
// (the worker's default, 7 days), with a reason naming them.
func TestChildrenWaitEndsAtItsDeadline(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.handlers["parent"] = func(context.Context, lease.Task) ([]byte, error) {
		return nil, &durable.AwaitChildrenError{Children: []durable.Child{{Kind: "child"}, {Kind: "child"}}}
	}
	e.exec.Process(t.Context(), nil, msg("p", inline(t, "parent", "p", "", 0)))
	if got := e.get(t, "p"); got.Status != lease.StatusWaiting || !got.WaitUntil.Equal(epoch.Add(lifecycle.DefaultWaitTimeout)) {
		t.Fatalf("p: %s until %s, want WAITING until %s", got.Status, got.WaitUntil, epoch.Add(lifecycle.DefaultWaitTimeout))
	}
	e.clock.Advance(lifecycle.DefaultWaitTimeout - time.Minute)
	if e.due(t, "p") {
		t.Fatal("p is due for the sweep before its deadline")
	}
	e.exec.Process(t.Context(), nil, msg("early", token.Ref("p")))
	if got := e.get(t, "p"); got.Status != lease.StatusWaiting {
		t.Fatalf("p before its deadline: %s", got.Status)
	}
	e.clock.Advance(time.Minute)
	if !e.due(t, "p") {
		t.Fatal("p is not due for the sweep at its deadline: nothing would end the wait")
	}
	e.exec.Process(t.Context(), nil, msg("sweep", token.Ref("p")))
	got := e.get(t, "p")
	if got.Status != lease.StatusFailed || got.Error != "waited 168h0m0s for children p/0, p/1 (2 not ended); the wait's deadline passed" {
		t.Fatalf("p at its deadline: %s %q", got.Status, got.Error)
	}
	if e.due(t, "p") {
		t.Fatal("p, FAILED, is still in the sweep index")
	}
}

// childTokens returns the bodies of the tokens sent to the work queue for
// parent's children, by child id.
func childTokens(t *testing.T, e *env, parent string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, m := range e.sqs.sentTo(workURL) {
		tok, err := token.Decode(aws.ToString(m.MessageBody))
		if err == nil && tok.Parent == parent {
			out[tok.ID] = aws.ToString(m.MessageBody)
		}
	}
	return out
}

// deadlineParent suspends p awaiting three kids, then ends p/0 SUCCEEDED
// and creates p/1 (PENDING: its token's worker stopped before claiming
// it); p/2's token is not taken yet. It returns the kids' tokens, p/0 as
// it ended, and the kids' run count.
func deadlineParent(t *testing.T, e *env) (map[string]string, lease.Task, *atomic.Int32) {
	t.Helper()
	runs := kidHandlers(e, 3, nil)
	e.exec.Process(t.Context(), nil, msg("p", inline(t, "fan", "p", "", 0)))
	kids := childTokens(t, e, "p")
	if len(kids) != 3 {
		t.Fatalf("kids' tokens: %v, want 3", kids)
	}
	if res := e.exec.Process(t.Context(), nil, msg("k0", kids["p/0"])); !res.Ack {
		t.Fatalf("p/0's token: %+v", res)
	}
	done := e.get(t, "p/0")
	if done.Status != lease.StatusSucceeded {
		t.Fatalf("p/0: %s, want SUCCEEDED", done.Status)
	}
	if _, err := e.store.Create(t.Context(), lease.NewTask{ID: "p/1", Kind: "kid", Payload: []byte(`1`), MaxAttempts: 1, Parent: "p"}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(lifecycle.DefaultWaitTimeout)
	return kids, done, runs
}

const deadlineReason = "waited 168h0m0s for children p/0, p/1, p/2 (2 not ended); the wait's deadline passed"

// wantDeadlineEnd checks that p FAILED at its deadline after its unended
// children were cancelled, p/0 untouched, and that the kids' queued tokens
// then run nothing.
func wantDeadlineEnd(t *testing.T, e *env, kids map[string]string, done lease.Task, runs *atomic.Int32) {
	t.Helper()
	if got := e.get(t, "p"); got.Status != lease.StatusFailed || got.Error != deadlineReason {
		t.Fatalf("p at its deadline: %s %q, want FAILED %q", got.Status, got.Error, deadlineReason)
	}
	// Cancelled outright (Store.RequestCancel, which records its own reason).
	if k := e.get(t, "p/1"); k.Status != lease.StatusCancelled || k.Parent != "p" {
		t.Fatalf("p/1: %s parent %q %q, want CANCELLED, child of p", k.Status, k.Parent, k.Error)
	}
	want := lease.ParentEndedReason("p", lease.StatusFailed, deadlineReason)
	if k := e.get(t, "p/2"); k.Status != lease.StatusCancelled || !lease.IsPlaceholder(k) || k.Error != want {
		t.Fatalf("p/2: %s placeholder %v %q, want a CANCELLED placeholder %q", k.Status, lease.IsPlaceholder(k), k.Error, want)
	}
	if !strings.Contains(want, "parent p ended FAILED") || !strings.Contains(want, "deadline passed") {
		t.Fatalf("children's reason %q names neither the parent's end nor its deadline", want)
	}
	if got := e.get(t, "p/0"); !reflect.DeepEqual(got, done) {
		t.Fatalf("p/0 changed:\n%+v\nwas\n%+v", got, done)
	}
	for _, id := range []string{"p/1", "p/2"} {
		if res := e.exec.Process(t.Context(), nil, msg("late-"+id, kids[id])); !res.Ack {
			t.Fatalf("%s's late token: %+v", id, res)
		}
		if k := e.get(t, id); k.Status != lease.StatusCancelled {
			t.Fatalf("%s after its token: %s", id, k.Status)
		}
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("kids ran %d times, want once (p/0): a child ran after its parent failed", n)
	}
}

// A parent whose wait for its children reaches its deadline cancels every
// child that has not ended before it fails (issue 18): a PENDING child
// outright, one with no item yet by a placeholder, so its queued token
// runs nothing; an ended child is left alone.
func TestChildrenWaitDeadlineCancelsUnendedChildren(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	kids, done, runs := deadlineParent(t, e)
	if res := e.exec.Process(t.Context(), nil, msg("sweep", token.Ref("p"))); !res.Ack || res.Outcome != lifecycle.OutcomeFailed {
		t.Fatalf("p's token at its deadline: %+v, want acknowledged and failed", res)
	}
	wantDeadlineEnd(t, e, kids, done, runs)
}

// failOncePlaceholder fails the first CreateCancelled, as a throttled table
// would; it keeps leasemem's RequestCancel.
type failOncePlaceholder struct {
	*leasemem.Store
	failed atomic.Bool
}

func (f *failOncePlaceholder) CreateCancelled(ctx context.Context, id, parent, reason string) (lease.Task, error) {
	if !f.failed.Swap(true) {
		return lease.Task{}, fmt.Errorf("cancel child %s: %w: throttled", id, lease.ErrBackend)
	}
	return f.Store.CreateCancelled(ctx, id, parent, reason)
}

// A child cancel that fails at the deadline does not fail the parent: its
// message is kept, and its redelivery cancels every child, then fails it.
func TestChildrenWaitDeadlineWaitsForEveryChildCancel(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *lifecycle.Config) { c.Store = &failOncePlaceholder{Store: c.Store.(*leasemem.Store)} })
	kids, done, runs := deadlineParent(t, e)
	if res := e.exec.Process(t.Context(), nil, msg("sweep", token.Ref("p"))); res.Ack {
		t.Fatalf("p's token after a failed child cancel: %+v, want it kept", res)
	}
	if got := e.get(t, "p"); got.Status != lease.StatusWaiting {
		t.Fatalf("p after a failed child cancel: %s %q, want still WAITING", got.Status, got.Error)
	}
	if res := e.exec.Process(t.Context(), nil, msg("sweep", token.Ref("p"))); !res.Ack || res.Outcome != lifecycle.OutcomeFailed {
		t.Fatalf("p's redelivered token: %+v, want acknowledged and failed", res)
	}
	wantDeadlineEnd(t, e, kids, done, runs)
}

// The deadline is configurable per worker (Config.WaitTimeout) and per
// await (AwaitChildrenError.Timeout).
func TestWaitDeadlineIsConfigurable(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *lifecycle.Config) { c.WaitTimeout = time.Hour })
	e.handlers["parent"] = func(context.Context, lease.Task) ([]byte, error) {
		return nil, &durable.AwaitChildrenError{Children: []durable.Child{{Kind: "child"}}}
	}
	e.handlers["quick"] = func(context.Context, lease.Task) ([]byte, error) {
		return nil, &durable.AwaitChildrenError{Children: []durable.Child{{Kind: "child"}}, Timeout: time.Minute}
	}
	e.exec.Process(t.Context(), nil, msg("p", inline(t, "parent", "p", "", 0)))
	e.exec.Process(t.Context(), nil, msg("q", inline(t, "quick", "q", "", 0)))
	if got := e.get(t, "p"); !got.WaitUntil.Equal(epoch.Add(time.Hour)) {
		t.Fatalf("p waits until %s, want the worker's hour", got.WaitUntil)
	}
	if got := e.get(t, "q"); !got.WaitUntil.Equal(epoch.Add(time.Minute)) {
		t.Fatalf("q waits until %s, want its await's minute", got.WaitUntil)
	}
	// A dependent's token names its own deadline (the client's WaitTimeout
	// option), used when the worker creates it.
	body, err := token.Token{ID: "d", Kind: "step", After: []string{"p"}, WaitTimeout: 2 * time.Hour}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	e.exec.Process(t.Context(), nil, msg("d", body))
	if got := e.get(t, "d"); !got.WaitUntil.Equal(epoch.Add(2*time.Hour)) || !got.DispatchAt.Equal(epoch.Add(lease.DefaultDispatchGrace)) {
		t.Fatalf("d waits until %s (sweep entry %s), want its token's 2 hours (and its registration check)", got.WaitUntil, got.DispatchAt)
	}
	e.clock.Advance(time.Minute)
	e.exec.Process(t.Context(), nil, msg("sweep", token.Ref("q")))
	if got := e.get(t, "q"); got.Status != lease.StatusFailed || !strings.Contains(got.Error, "waited 1m0s for children q/0") {
		t.Fatalf("q: %s %q", got.Status, got.Error)
	}
	if _, err := lifecycle.New(lifecycle.Config{Store: e.store, SQS: e.sqs, QueueURL: workURL, WaitTimeout: -time.Second,
		Handlers: func(string) (lifecycle.Handler, bool) { return nil, false }}); err == nil {
		t.Fatal("a negative wait timeout was accepted")
	}
}

func depToken(t *testing.T, e *env, id string, after []string, anyway bool) lifecycle.Message {
	t.Helper()
	body, err := token.Token{ID: id, Kind: "step", Payload: []byte(`"` + id + `"`), After: after, AfterAny: anyway}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	m := msg("m-"+id, body)
	m.SentAt = e.clock.Now()
	return m
}

// A dependent whose dependency never ends fails at its deadline, and its
// own dependents hear of it.
func TestDependencyWaitEndsAtItsDeadline(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.handlers["step"] = func(_ context.Context, task lease.Task) ([]byte, error) { return task.Payload, nil }
	if _, err := e.store.Create(t.Context(), lease.NewTask{ID: "a", Kind: "step", MaxAttempts: 1, RunAt: epoch.Add(365 * 24 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	e.exec.Process(t.Context(), nil, depToken(t, e, "b", []string{"a"}, false))
	e.exec.Process(t.Context(), nil, depToken(t, e, "c", []string{"b"}, false))
	if got := e.get(t, "b"); got.Status != lease.StatusWaiting || !got.WaitUntil.Equal(epoch.Add(lifecycle.DefaultWaitTimeout)) {
		t.Fatalf("b: %s until %s", got.Status, got.WaitUntil)
	}
	e.clock.Advance(lifecycle.DefaultWaitTimeout)
	if !e.due(t, "b") {
		t.Fatal("b is not due for the sweep at its deadline")
	}
	e.exec.Process(t.Context(), nil, msg("sweep", token.Ref("b")))
	if got := e.get(t, "b"); got.Status != lease.StatusFailed || got.Error != "waited 168h0m0s for dependencies a (1 not ended); the wait's deadline passed" {
		t.Fatalf("b at its deadline: %s %q", got.Status, got.Error)
	}
	if got := e.get(t, "c"); got.Status != lease.StatusCancelled || !strings.HasPrefix(got.Error, "dependency b ended FAILED: waited 168h0m0s") {
		t.Fatalf("c after b's deadline: %s %q", got.Status, got.Error)
	}
}

// lostDependents stores the tasks "ended" (SUCCEEDED) and "running"
// (PENDING, of kind "step", which it serves), and their dependents "d1"
// and "d2", waiting until waitUntil (zero: the default wait), as their
// lost tokens left them: created, never registered anywhere.
func lostDependents(t *testing.T, e *env, waitUntil time.Time) {
	t.Helper()
	e.handlers["step"] = func(_ context.Context, task lease.Task) ([]byte, error) { return task.Payload, nil }
	ctx := t.Context()
	for _, id := range []string{"ended", "running"} {
		if _, err := e.store.Create(ctx, lease.NewTask{ID: id, Kind: "step", Payload: []byte(`"` + id + `"`), MaxAttempts: 1}); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []lease.NewTask{
		{ID: "d1", Kind: "step", Payload: []byte(`"d1"`), MaxAttempts: 1, After: []string{"ended"}, Carried: true, WaitUntil: waitUntil},
		{ID: "d2", Kind: "step", Payload: []byte(`"d2"`), MaxAttempts: 1, After: []string{"running"}, Carried: true, WaitUntil: waitUntil},
	} {
		if _, err := e.store.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	ended, err := e.store.Claim(ctx, "ended", "w0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Finish(ctx, ended.LeaseOf(), []byte(`"ended"`)); err != nil {
		t.Fatal(err)
	}
}

// Chaos run m1 (stop 28): a dependent's own token, which registers it on its
// dependencies, went to the dead-letter queue after its receives ran out,
// before it registered on every dependency; nothing would have woken it
// before its deadline. Its registration check, the sweep entry a dispatch
// grace after its creation, registers it again: on a dependency that ended
// meanwhile, which wakes it at once, and on one that still runs, which
// wakes it when it ends. The entry then moves on to the deadline.
func TestLostDependentTokenIsRecoveredByTheRegistrationCheck(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := t.Context()
	lostDependents(t, e, time.Time{})
	if e.due(t, "d1") || e.due(t, "d2") {
		t.Fatal("a dependent is due for the sweep at its creation")
	}
	e.clock.Advance(lease.DefaultDispatchGrace)
	mark := len(e.sqs.sentTo(workURL))
	for _, id := range []string{"d1", "d2"} {
		if !e.due(t, id) {
			t.Fatalf("%s is not due for its registration check", id)
		}
		if res := e.exec.Process(ctx, nil, msg("sweep-"+id, token.Ref(id))); !res.Ack {
			t.Fatalf("%s's check: %+v, want acknowledged", id, res)
		}
	}
	e.drainSent(t, mark)
	if got := e.get(t, "d1"); got.Status != lease.StatusSucceeded {
		t.Fatalf("d1 after its check (its dependency had ended): %s %q, want SUCCEEDED", got.Status, got.Error)
	}
	d2 := e.get(t, "d2")
	if d2.Status != lease.StatusWaiting || !d2.DispatchAt.Equal(d2.WaitUntil) {
		t.Fatalf("d2 after its check: %s, sweep entry %s, deadline %s; want WAITING with the entry at the deadline", d2.Status, d2.DispatchAt, d2.WaitUntil)
	}
	if got := e.get(t, "running"); !slices.Contains(got.Waiters, lease.Waiter{ID: "d2", Mode: lease.WaitAfter}) {
		t.Fatalf("running's waiters after d2's check: %v", got.Waiters)
	}
	e.clock.Advance(lease.DefaultDispatchGrace)
	if e.due(t, "d2") {
		t.Fatal("d2 is due again before its deadline")
	}
	mark = len(e.sqs.sentTo(workURL))
	e.exec.Process(ctx, nil, msg("running", token.Ref("running")))
	e.drainSent(t, mark)
	if got := e.get(t, "d2"); got.Status != lease.StatusSucceeded {
		t.Fatalf("d2 after its dependency ended: %s %q, want SUCCEEDED", got.Status, got.Error)
	}
}

// A dependency wait shorter than the dispatch grace gets no registration
// check before its deadline. A dependent whose own token was lost before it
// registered is checked at its deadline instead: a dependency that ended in
// time wakes it then, and it runs, instead of failing for a wait that was
// over; one whose dependency has not ended still fails at the deadline.
func TestShortDependencyWaitIsCheckedAtItsDeadline(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := t.Context()
	// Created by the client with a 30-second wait.
	lostDependents(t, e, e.clock.Now().Add(30*time.Second))
	e.clock.Advance(30 * time.Second)
	mark := len(e.sqs.sentTo(workURL))
	for _, id := range []string{"d1", "d2"} {
		if !e.due(t, id) {
			t.Fatalf("%s is not due for the sweep at its deadline", id)
		}
		if res := e.exec.Process(ctx, nil, msg("sweep-"+id, token.Ref(id))); !res.Ack {
			t.Fatalf("%s at its deadline: %+v, want acknowledged", id, res)
		}
	}
	e.drainSent(t, mark)
	if got := e.get(t, "d1"); got.Status != lease.StatusSucceeded {
		t.Fatalf("d1, whose dependency had ended before its deadline: %s %q, want SUCCEEDED", got.Status, got.Error)
	}
	if got := e.get(t, "d2"); got.Status != lease.StatusFailed || !strings.Contains(got.Error, "the wait's deadline passed") {
		t.Fatalf("d2, whose dependency still runs: %s %q, want FAILED at its deadline", got.Status, got.Error)
	}
}

// Issue 18, item 6: a after b and b after a stayed WAITING forever. The
// cycle is found when the second registers (its dependency waits for it)
// and both end CANCELLED with a reason naming the cycle.
func TestDependencyCycleIsCancelled(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	runs := 0
	e.handlers["step"] = func(_ context.Context, task lease.Task) ([]byte, error) { runs++; return task.Payload, nil }
	a, b := depToken(t, e, "a", []string{"b"}, false), depToken(t, e, "b", []string{"a"}, true)
	e.exec.Process(t.Context(), nil, a) // b does not exist yet: kept
	e.exec.Process(t.Context(), nil, b)
	e.exec.Process(t.Context(), nil, a) // redelivered
	e.drainSent(t, 0)
	gotA, gotB := e.get(t, "a"), e.get(t, "b")
	if gotB.Status != lease.StatusCancelled || gotB.Error != "dependency cycle: b waits for a, which waits for b" {
		t.Fatalf("b: %s %q", gotB.Status, gotB.Error)
	}
	if gotA.Status != lease.StatusCancelled || !strings.Contains(gotA.Error, "dependency cycle") {
		t.Fatalf("a: %s %q", gotA.Status, gotA.Error)
	}
	if runs != 0 {
		t.Fatalf("a task of the cycle ran %d times", runs)
	}
}

// Issue 18: a cycle of three (a after b, b after c, c after a) passed the
// registration check (no dependency waited for its registering dependent)
// and ended only at the deadline, FAILED with a reason that did not name
// the cycle. At the deadline the cycle is found and its tasks end
// CANCELLED, the first with a reason naming it in order.
func TestLongerDependencyCycleIsCancelledAtTheDeadline(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	runs := 0
	e.handlers["step"] = func(_ context.Context, task lease.Task) ([]byte, error) { runs++; return task.Payload, nil }
	a, b, c := depToken(t, e, "a", []string{"b"}, false), depToken(t, e, "b", []string{"c"}, false), depToken(t, e, "c", []string{"a"}, false)
	e.exec.Process(t.Context(), nil, a) // b does not exist yet: kept
	e.exec.Process(t.Context(), nil, b) // c does not exist yet: kept
	e.exec.Process(t.Context(), nil, c)
	e.exec.Process(t.Context(), nil, a) // redelivered
	e.exec.Process(t.Context(), nil, b) // redelivered
	mark := e.drainSent(t, 0)
	for _, id := range []string{"a", "b", "c"} {
		if got := e.get(t, id); got.Status != lease.StatusWaiting {
			t.Fatalf("%s before the deadline: %s %q, want WAITING", id, got.Status, got.Error)
		}
	}
	e.clock.Advance(lifecycle.DefaultWaitTimeout)
	if !e.due(t, "a") {
		t.Fatal("a is not due for the sweep at its deadline")
	}
	e.exec.Process(t.Context(), nil, msg("sweep", token.Ref("a")))
	if got := e.get(t, "a"); got.Status != lease.StatusCancelled || got.Error != "dependency cycle: a waits for b, which waits for c, which waits for a" {
		t.Fatalf("a at its deadline: %s %q", got.Status, got.Error)
	}
	e.drainSent(t, mark)
	for _, id := range []string{"c", "b"} {
		if got := e.get(t, id); got.Status != lease.StatusCancelled || !strings.Contains(got.Error, "dependency cycle: a waits for b") {
			t.Errorf("%s after a's deadline: %s %q, want CANCELLED by the cycle", id, got.Status, got.Error)
		}
	}
	if runs != 0 {
		t.Fatalf("a task of the cycle ran %d times", runs)
	}
}

// Issue 18, item 11: the 101st dependent of one task was cancelled with
// "dependency root ended FAILED" (root had not ended), and an after-any
// 101st dependent ran. Both end CANCELLED with the true reason.
func TestDependentOverTheWaiterLimitGetsTheTrueReason(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	runs := 0
	e.handlers["step"] = func(_ context.Context, task lease.Task) ([]byte, error) { runs++; return task.Payload, nil }
	if _, err := e.store.Create(t.Context(), lease.NewTask{ID: "root", Kind: "step", MaxAttempts: 1, RunAt: epoch.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	for i := range lease.MaxWaiters {
		if _, err := e.store.Watch(t.Context(), "root", lease.Waiter{ID: fmt.Sprintf("w%d", i), Mode: lease.WaitAfter}); err != nil {
			t.Fatal(err)
		}
	}
	e.exec.Process(t.Context(), nil, depToken(t, e, "strict", []string{"root"}, false))
	e.exec.Process(t.Context(), nil, depToken(t, e, "anyway", []string{"root"}, true))
	e.drainSent(t, 0)
	want := "dependency root has 100 waiters already, the limit; this task cannot wait for it"
	for _, id := range []string{"strict", "anyway"} {
		if got := e.get(t, id); got.Status != lease.StatusCancelled || got.Error != want {
			t.Errorf("%s: %s %q, want CANCELLED %q", id, got.Status, got.Error, want)
		}
	}
	if runs != 0 {
		t.Fatalf("a dependent that could not register ran %d times", runs)
	}
}

// The search at the deadline reads at most 32 tasks: a cycle of n tasks
// takes n-1 reads, so one of 33 is found and one of 34 ends as any wait
// at its deadline.
func TestDependencyCycleSearchIsBounded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		n    int
		want lease.Status
	}{{33, lease.StatusCancelled}, {34, lease.StatusFailed}} {
		t.Run(fmt.Sprint(tc.n), func(t *testing.T) {
			t.Parallel()
			e := setup(t, nil)
			e.handlers["step"] = func(_ context.Context, task lease.Task) ([]byte, error) { return task.Payload, nil }
			ids := make([]string, tc.n)
			for i := range ids {
				ids[i] = fmt.Sprintf("t%02d", i)
			}
			for i := tc.n - 1; i >= 0; i-- { // each after the next; the last after the first, which comes later
				e.exec.Process(t.Context(), nil, depToken(t, e, ids[i], []string{ids[(i+1)%tc.n]}, false))
			}
			e.exec.Process(t.Context(), nil, depToken(t, e, ids[tc.n-1], []string{ids[0]}, false)) // redelivered
			if got := e.get(t, ids[tc.n-1]); got.Status != lease.StatusWaiting {
				t.Fatalf("%s before the deadline: %s %q", ids[tc.n-1], got.Status, got.Error)
			}
			e.clock.Advance(lifecycle.DefaultWaitTimeout)
			e.exec.Process(t.Context(), nil, msg("sweep", token.Ref(ids[0])))
			got := e.get(t, ids[0])
			want := "waited 168h0m0s for dependencies t01 (1 not ended); the wait's deadline passed"
			if tc.want == lease.StatusCancelled {
				want = "dependency cycle: " + ids[0] + " waits for " + strings.Join(slices.Concat(ids[1:], ids[:1]), ", which waits for ")
			}
			if got.Status != tc.want || got.Error != want {
				t.Fatalf("%s at its deadline: %s %q, want %s %q", ids[0], got.Status, got.Error, tc.want, want)
			}
		})
	}
}
