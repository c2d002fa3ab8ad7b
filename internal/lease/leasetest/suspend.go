package leasetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
)

// testChainLinksKept: a task keeps the chain's later links it was created
// with, through its claim and finish; a link created with its predecessor
// records it as a dependency that ended already, and is not WAITING.
func testChainLinksKept(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	head := e.newTask()
	then := []lease.Link{
		{ID: head.ID + "#2", Kind: "b", Payload: []byte(`{"n":2}`), MaxAttempts: 2},
		{ID: head.ID + "#3", Kind: "c", Queue: "other"},
	}
	head.Then = then
	got, err := e.store.Create(e.ctx, head)
	if err != nil {
		t.Fatal(err)
	}
	want := e.pending(head)
	want.Then = then
	e.same("Create", got, want)
	e.same("Get", mustGet(e, head.ID), want)
	done := e.finish(e.claim(got, "w1"), []byte(`1`))
	if fmt.Sprintf("%+v", done.Then) != fmt.Sprintf("%+v", then) {
		t.Fatalf("finished head: links %+v, want %+v", done.Then, then)
	}
	next := lease.NewTask{ID: then[0].ID, Kind: then[0].Kind, Payload: then[0].Payload, MaxAttempts: 2, Then: then[1:], Prev: head.ID}
	link, err := e.store.CreateClaimed(e.ctx, next, "w2")
	if err != nil {
		t.Fatal(err)
	}
	if link.Status != lease.StatusRunning || link.Wait != lease.WaitAfter || !slices.Equal(link.WaitFor, []string{head.ID}) ||
		len(link.Then) != 1 || link.Then[0].ID != then[1].ID || link.DispatchAt != (time.Time{}) {
		t.Fatalf("second link: %+v", link)
	}
	for name, bad := range map[string]lease.NewTask{
		"a link twice":        {ID: e.id(), Kind: "a", MaxAttempts: 1, Then: []lease.Link{{ID: "x", Kind: "b"}, {ID: "x", Kind: "c"}}},
		"a link with no kind": {ID: e.id(), Kind: "a", MaxAttempts: 1, Then: []lease.Link{{ID: "y"}}},
		"bad payload":         {ID: e.id(), Kind: "a", MaxAttempts: 1, Then: []lease.Link{{ID: "z", Kind: "b", Payload: []byte(`{`)}}},
		"prev and after":      {ID: e.id(), Kind: "a", MaxAttempts: 1, Prev: "p", After: []string{"q"}},
	} {
		if _, err := e.store.Create(e.ctx, bad); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

// testWaitNoteKept: a suspension's note stays on the task through its
// resume, for the resumed run, and the next suspension replaces it (none
// removes it); a note over the limit is refused.
func testWaitNoteKept(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	parent := e.createClaimed(e.newTask(), "p1")
	a := e.child(parent, "w1")
	if _, err := e.store.Suspend(e.ctx, parent.LeaseOf(), lease.Wait{Mode: lease.WaitChildren, For: []string{a.ID}, Note: strings.Repeat("x", lease.MaxWaitNoteBytes+1)}); !errors.Is(err, lease.ErrTooLarge) {
		t.Fatalf("an over-long note: %v, want ErrTooLarge", err)
	}
	waiting := e.suspend(parent, lease.Wait{Mode: lease.WaitChildren, For: []string{a.ID}, Note: `{"done":3}`})
	e.notify(lease.Waiter{ID: parent.ID, Mode: lease.WaitChildren}, e.finish(a, nil))
	got, err := e.store.Resume(e.ctx, parent.ID, waiting.Fence, "p2")
	if err != nil || got.WaitNote != `{"done":3}` {
		t.Fatalf("resumed: %v, note %q", err, got.WaitNote)
	}
	b := e.child(got, "w2")
	if again := e.suspend(got, lease.Wait{Mode: lease.WaitChildren, For: []string{b.ID}}); again.WaitNote != "" {
		t.Fatalf("a suspension without a note kept %q", again.WaitNote)
	}
}

func testResumeClaims(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	parent := e.createClaimed(e.newTask(), "p1")
	a := e.child(parent, "w1")
	waiting := e.suspend(parent, lease.Wait{Mode: lease.WaitChildren, For: []string{a.ID}})
	e.notify(lease.Waiter{ID: parent.ID, Mode: lease.WaitChildren}, e.finish(a, nil))
	got, err := e.store.Resume(e.ctx, parent.ID, waiting.Fence, "p2")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != lease.StatusRunning || got.LeaseOwner != "p2" || got.Attempt != 1 || got.Fence != 2 {
		t.Fatalf("resume-claim: status %s owner %s attempt %d fence %d", got.Status, got.LeaseOwner, got.Attempt, got.Fence)
	}
	if _, err := e.store.Resume(e.ctx, parent.ID, waiting.Fence, "p3"); !errors.Is(err, lease.ErrNotWaiting) {
		t.Fatalf("second resume: %v, want ErrNotWaiting", err)
	}
	e.finish(got, []byte(`"joined"`))
}

// testSuspensionStartsTheCountAgain: a task of two attempts loses its first
// lease, suspends in its second, and is resumed: the resumed run is attempt
// 1, and losing its lease too still leaves it an attempt, because the
// attempts before the suspension (progress) no longer count.
func testSuspensionStartsTheCountAgain(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	n := e.newTask()
	n.MaxAttempts = 2
	first := e.createClaimed(n, "w1")
	e.clock.Advance(leaseFor + skew + time.Millisecond)
	second := e.claim(first, "w2") // the first lease was lost
	if second.Attempt != 2 {
		t.Fatalf("takeover attempt %d, want 2", second.Attempt)
	}
	a := e.child(second, "c1")
	waiting := e.suspend(second, lease.Wait{Mode: lease.WaitChildren, For: []string{a.ID}})
	if waiting.Attempt != 0 {
		t.Fatalf("suspended with attempt %d, want 0: a suspension starts the count again", waiting.Attempt)
	}
	e.notify(lease.Waiter{ID: second.ID, Mode: lease.WaitChildren}, e.finish(a, nil))
	resumed, err := e.store.Resume(e.ctx, second.ID, waiting.Fence, "w3")
	if err != nil || resumed.Attempt != 1 {
		t.Fatalf("resume-claim: attempt %d, error %v; want attempt 1", resumed.Attempt, err)
	}
	e.clock.Advance(leaseFor + skew + time.Millisecond)
	last, err := e.store.Claim(e.ctx, second.ID, "w4") // the resumed run's lease was lost
	if err != nil || last.Attempt != 2 {
		t.Fatalf("takeover of the resumed run: attempt %d, error %v; want attempt 2 of 2", last.Attempt, err)
	}
	e.finish(last, []byte(`"done"`))
}

// Every wait has a deadline, and a sweep entry at it (the one thing that
// ends a wait whose tasks never end): set by the suspension or the create,
// removed when the wait ends.
func testWaitsHaveDeadlines(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	// Children, with a deadline of the caller's and a sweep time of its own.
	parent := e.createClaimed(e.newTask(), "p1")
	a := e.child(parent, "w1")
	until := e.now().Add(time.Hour)
	waiting := e.suspend(parent, lease.Wait{Mode: lease.WaitChildren, For: []string{a.ID}, Until: until, DispatchAt: until.Add(time.Minute)})
	got := e.notify(lease.Waiter{ID: parent.ID, Mode: lease.WaitChildren}, e.finish(a, nil))
	if !got.DispatchAt.Equal(until.Add(time.Minute)) {
		t.Fatalf("a notify moved the sweep entry: %v", got.DispatchAt)
	}
	resumed, err := e.store.Resume(e.ctx, parent.ID, waiting.Fence, "p2")
	if err != nil {
		t.Fatal(err)
	}
	if !resumed.DispatchAt.IsZero() || !resumed.WaitUntil.IsZero() {
		t.Fatalf("resumed: sweep entry %v, deadline %v; want neither", resumed.DispatchAt, resumed.WaitUntil)
	}
	// Dependencies, with a deadline of the creator's.
	n := e.newTask()
	n.After = []string{e.create(e.newTask()).ID}
	n.WaitUntil = e.now().Add(2 * time.Hour)
	dep, err := e.store.Create(e.ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	// Its sweep entry is its registration check, the dispatch grace after
	// its creation (lease.ArmRegistrationCheck), before the deadline.
	if !dep.WaitUntil.Equal(ms(n.WaitUntil)) || !dep.DispatchAt.Equal(e.now().Add(grace)) {
		t.Fatalf("dependent: deadline %v sweep entry %v, want %v and %v", dep.WaitUntil, dep.DispatchAt, ms(n.WaitUntil), e.now().Add(grace))
	}
	// A deadline before the check is the sweep entry itself.
	soon := e.newTask()
	soon.After = n.After
	soon.WaitUntil = e.now().Add(grace / 2)
	if got, err := e.store.Create(e.ctx, soon); err != nil || !got.DispatchAt.Equal(ms(soon.WaitUntil)) {
		t.Fatalf("dependent due before its check: sweep entry %v, error %v; want %v", got.DispatchAt, err, ms(soon.WaitUntil))
	}
	if again := mustGet(e, dep.ID); !again.WaitUntil.Equal(dep.WaitUntil) || !again.DispatchAt.Equal(dep.DispatchAt) {
		t.Fatalf("read back: deadline %v sweep entry %v", again.WaitUntil, again.DispatchAt)
	}
	bad := e.newTask()
	bad.WaitUntil = e.now().Add(time.Hour)
	if _, err := e.store.Create(e.ctx, bad); !errors.Is(err, lease.ErrInvalid) {
		t.Fatalf("a wait deadline without dependencies: %v, want ErrInvalid", err)
	}
}

// AbandonWait ends a wait for children or dependencies that is not over,
// once, under the fence it was read at; never a callback wait.
func testAbandonWait(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	parent := e.createClaimed(e.newTask(), "p1")
	a := e.child(parent, "w1")
	waiting := e.suspend(parent, lease.Wait{Mode: lease.WaitChildren, For: []string{a.ID}})
	ab := lease.WaitAbandon{ID: parent.ID, Fence: waiting.Fence, Status: lease.StatusFailed, Error: "deadline passed"}
	for _, bad := range []lease.WaitAbandon{{ID: parent.ID, Fence: waiting.Fence, Status: lease.StatusSucceeded, Error: "x"}, {ID: parent.ID, Fence: waiting.Fence, Status: lease.StatusFailed}} {
		if _, err := e.store.AbandonWait(e.ctx, bad); !errors.Is(err, lease.ErrInvalid) {
			t.Fatalf("AbandonWait(%+v): %v, want ErrInvalid", bad, err)
		}
	}
	stale := ab
	stale.Fence++
	var we *lease.WaitError
	if _, err := e.store.AbandonWait(e.ctx, stale); !errors.As(err, &we) || !errors.Is(err, lease.ErrNotWaiting) || we.Task.Status != lease.StatusWaiting {
		t.Fatalf("AbandonWait under another fence: %v, want ErrNotWaiting with the task", err)
	}
	e.clock.Advance(time.Second)
	got, err := e.store.AbandonWait(e.ctx, ab)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != lease.StatusFailed || got.Error != "deadline passed" || !got.FinishedAt.Equal(e.now()) ||
		!got.DispatchAt.IsZero() || !got.WaitUntil.IsZero() || got.ExpiresAt.IsZero() {
		t.Fatalf("abandoned: %+v", got)
	}
	var fin *lease.FinishedError
	if _, err := e.store.AbandonWait(e.ctx, ab); !errors.As(err, &fin) || fin.Task.Status != lease.StatusFailed {
		t.Fatalf("second AbandonWait: %v, want *FinishedError with the task", err)
	}
	// A dependent, created WAITING at fence 0, cancelled.
	n := e.newTask()
	n.After = []string{e.create(e.newTask()).ID}
	dep, err := e.store.Create(e.ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	got, err = e.store.AbandonWait(e.ctx, lease.WaitAbandon{ID: dep.ID, Fence: dep.Fence, Status: lease.StatusCancelled, Error: "dependency cycle"})
	if err != nil || got.Status != lease.StatusCancelled || got.Error != "dependency cycle" {
		t.Fatalf("abandoned dependent: %v %+v", err, got)
	}
	// A callback wait ends only by its token or its timeout.
	held := e.createClaimed(e.newTask(), "w1")
	cb := e.suspend(held, lease.Wait{Mode: lease.WaitCallback, Until: e.now().Add(time.Hour), Nonce: "n"})
	if cb.DispatchAt.IsZero() {
		t.Fatal("a callback wait that is not carried has no sweep entry")
	}
	if _, err := e.store.AbandonWait(e.ctx, lease.WaitAbandon{ID: cb.ID, Fence: cb.Fence, Status: lease.StatusFailed, Error: "x"}); !errors.Is(err, lease.ErrNotWaiting) {
		t.Fatalf("AbandonWait of a callback wait: %v, want ErrNotWaiting", err)
	}
	// A carried callback wait (its timeout's token is on the queue) has
	// none.
	held = e.createClaimed(e.newTask(), "w1")
	e.suspend(held, lease.Wait{Mode: lease.WaitCallback, Until: e.now().Add(time.Minute), Nonce: "n", Carried: true})
	if _, err := e.store.AbandonWait(e.ctx, lease.WaitAbandon{ID: e.id(), Status: lease.StatusFailed, Error: "x"}); !errors.Is(err, lease.ErrNotFound) {
		t.Fatalf("AbandonWait of a missing task: %v, want ErrNotFound", err)
	}
}

// testSuspendClearsTheLastError: the error of an earlier attempt does not
// stay on a task that has since suspended (a WAITING task shows none); its
// history keeps it. Both kinds of wait.
func testSuspendClearsTheLastError(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	for _, w := range []lease.Wait{
		{Mode: lease.WaitCallback, Until: e.clock.Now().Add(time.Minute), Nonce: "n0nce"},
		{Mode: lease.WaitChildren},
	} {
		first := e.createClaimed(e.newTask(), "w1")
		retry := e.release(first, lease.Release{Status: lease.StatusPending, RunAt: e.clock.Now(), Error: "boom"})
		again := e.claim(retry, "w2")
		if again.Error != "boom" {
			t.Fatalf("%s: the retried attempt shows error %q, want the last one's, boom", w.Mode, again.Error)
		}
		if w.Mode == lease.WaitChildren {
			w.For = []string{e.child(again, "w3").ID}
		}
		waiting := e.suspend(again, w) // checks Error == ""
		if len(waiting.History) != 2 || waiting.History[0].Error != "boom" {
			t.Fatalf("%s: history %+v, want the failed attempt's error kept", w.Mode, waiting.History)
		}
	}
}
