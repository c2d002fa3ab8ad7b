package leasetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

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

func testFanInResumesOnce(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	parent := e.createClaimed(e.newTask(), "p1")
	a, b := e.child(parent, "w1"), e.child(parent, "w2")
	waiting := e.suspend(parent, lease.Wait{Mode: lease.WaitChildren, For: []string{a.ID, b.ID}})
	if lease.Complete(waiting) {
		t.Fatal("Complete before any child ended")
	}
	if _, err := e.store.Claim(e.ctx, parent.ID, "p2"); !errors.Is(err, lease.ErrWaiting) {
		t.Fatalf("Claim of a waiting task: %v, want ErrWaiting", err)
	}
	w := lease.Waiter{ID: parent.ID, Mode: lease.WaitChildren}
	aDone := e.finish(a, []byte(`1`))
	got := e.notify(w, aDone)
	if lease.Complete(got) || got.Status != lease.StatusWaiting {
		t.Fatalf("after one of two children: complete %v status %s", lease.Complete(got), got.Status)
	}
	// A duplicate notification (a redelivered message) changes nothing.
	_, err := e.store.Notify(e.ctx, w, aDone)
	var we *lease.WaitError
	if !errors.As(err, &we) || !errors.Is(err, lease.ErrNotified) || !slices.Equal(we.Task.Ended, []string{a.ID}) {
		t.Fatalf("second Notify: %v, want ErrNotified with the task", err)
	}
	// A failed child counts as ended for a fan-in.
	bDone := e.release(b, lease.Release{Status: lease.StatusFailed, Error: "boom"})
	got = e.notify(w, bDone)
	if !lease.Complete(got) {
		t.Fatalf("after both children: not complete: %+v", got.Ended)
	}
	// Two resumers race (the last notifier and a redelivered token): one
	// wins.
	var wins, lost int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			_, err := e.store.Resume(e.ctx, parent.ID, waiting.Fence, "")
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case errors.Is(err, lease.ErrNotWaiting):
				lost++
			default:
				t.Errorf("Resume: %v", err)
			}
		})
	}
	wg.Wait()
	if wins != 1 || lost != 3 {
		t.Fatalf("resume race: %d wins, %d lost; want 1 and 3", wins, lost)
	}
	resumed, err := e.store.Get(e.ctx, parent.ID)
	if err != nil {
		t.Fatal(err)
	}
	if resumed.Status != lease.StatusPending || len(resumed.Ended) != 0 || !slices.Equal(resumed.WaitFor, []string{a.ID, b.ID}) ||
		!resumed.DispatchAt.IsZero() || resumed.Attempt != 0 {
		t.Fatalf("resumed: status %s ended %v wait_for %v dispatch %v attempt %d", resumed.Status, resumed.Ended, resumed.WaitFor, resumed.DispatchAt, resumed.Attempt)
	}
	again := e.claim(resumed, "p3")
	if again.Attempt != 1 || again.Fence != 2 {
		t.Fatalf("resumed claim: attempt %d fence %d, want 1 and 2", again.Attempt, again.Fence)
	}
}

func testChildEndingBeforeSuspend(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	parent := e.createClaimed(e.newTask(), "p1")
	a := e.child(parent, "w1")
	got := e.notify(lease.Waiter{ID: parent.ID, Mode: lease.WaitChildren}, e.finish(a, nil))
	if got.Status != lease.StatusRunning {
		t.Fatalf("notify of a running parent: status %s", got.Status)
	}
	parent.Ended = got.Ended
	waiting := e.suspend(parent, lease.Wait{Mode: lease.WaitChildren, For: []string{a.ID}})
	if !lease.Complete(waiting) {
		t.Fatalf("suspended after its only child ended: not complete (ended %v)", waiting.Ended)
	}
}

// testWavesOfNamedChildren waits, in one attempt, for three waves of
// children named as a map names them (parent/NAME/i), as a map does: each
// wave's ids, whatever form the store keeps them in, read back whole; a
// repeated notify is refused; and the attempt keeps one WAITING history
// entry, its latest, however many times it suspends.
func testWavesOfNamedChildren(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	parent := e.createClaimed(e.newTask(), "p1")
	w := lease.Waiter{ID: parent.ID, Mode: lease.WaitChildren}
	const size = 4
	for wave := range 3 {
		ids := make([]string, size)
		kids := make([]lease.Task, size)
		for i := range ids {
			n := e.newTask()
			n.ID = fmt.Sprintf("%s/m/%d", parent.ID, wave*size+i)
			n.Parent = parent.ID
			k, err := e.store.CreateClaimed(e.ctx, n, "w")
			if err != nil {
				t.Fatalf("wave %d: CreateClaimed(%s): %v", wave, n.ID, err)
			}
			ids[i], kids[i] = n.ID, k
		}
		// One child ends before the suspension; the rest after it.
		got := e.notify(w, e.finish(kids[0], nil))
		parent.Ended = got.Ended
		waiting := e.suspend(parent, lease.Wait{Mode: lease.WaitChildren, For: ids})
		if !slices.Equal(waiting.WaitFor, ids) || !slices.Equal(waiting.Ended, ids[:1]) {
			t.Fatalf("wave %d: waiting for %v, ended %v; want %v and %v", wave, waiting.WaitFor, waiting.Ended, ids, ids[:1])
		}
		for i, k := range kids[1:] {
			done := e.finish(k, nil)
			got = e.notify(w, done)
			if lease.Complete(got) != (i == size-2) {
				t.Fatalf("wave %d: after %d children: complete %v (ended %v)", wave, i+2, lease.Complete(got), got.Ended)
			}
			_, err := e.store.Notify(e.ctx, w, done)
			var we *lease.WaitError
			if !errors.As(err, &we) || !errors.Is(err, lease.ErrNotified) || !slices.Contains(we.Task.Ended, done.ID) {
				t.Fatalf("wave %d: repeated Notify of %s: %v, want ErrNotified with the task", wave, done.ID, err)
			}
		}
		if !slices.Equal(got.Ended, slices.Sorted(slices.Values(ids))) {
			t.Fatalf("wave %d: ended %v, want %v (a set, sorted)", wave, got.Ended, ids)
		}
		resumed, err := e.store.Resume(e.ctx, parent.ID, waiting.Fence, "p1")
		if err != nil {
			t.Fatalf("wave %d: Resume: %v", wave, err)
		}
		if len(resumed.Ended) != 0 || resumed.Attempt != 1 {
			t.Fatalf("wave %d: resumed with ended %v, attempt %d; want none and 1", wave, resumed.Ended, resumed.Attempt)
		}
		parent = resumed
	}
	var waits int
	for _, a := range parent.History {
		if a.Status == lease.StatusWaiting {
			waits++
		}
	}
	if waits != 1 || len(parent.History) != 1 || parent.History[0].Fence != parent.Fence-1 {
		t.Fatalf("history after three suspensions of one attempt: %+v, want the last one only (fence %d)", parent.History, parent.Fence-1)
	}
}

func testDependenciesWaitThenRun(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	a, b := e.create(e.newTask()), e.create(e.newTask())
	n := e.newTask()
	n.After = []string{a.ID, b.ID}
	n.Carried = true
	dep, err := e.store.Create(e.ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	// A carried dependent still gets a sweep entry: its registration
	// check, the dispatch grace after its creation; its deadline is
	// DefaultWaitTimeout after its creation.
	deadline := e.now().Add(lease.DefaultWaitTimeout)
	if dep.Status != lease.StatusWaiting || dep.Wait != lease.WaitAfter || !slices.Equal(dep.WaitFor, n.After) ||
		!dep.WaitUntil.Equal(deadline) || !dep.DispatchAt.Equal(e.now().Add(grace)) {
		t.Fatalf("created with dependencies: %+v", dep)
	}
	w := lease.Waiter{ID: dep.ID, Mode: lease.WaitAfter}
	for _, id := range n.After {
		got, err := e.store.Watch(e.ctx, id, w)
		if err != nil || !slices.Contains(got.Waiters, w) {
			t.Fatalf("Watch(%s): %v, waiters %v", id, err, got.Waiters)
		}
		if _, err := e.store.Watch(e.ctx, id, w); err != nil { // idempotent
			t.Fatalf("second Watch(%s): %v", id, err)
		}
	}
	aDone := e.finish(e.claim(mustGet(e, a.ID), "w1"), []byte(`"a"`))
	if !slices.Contains(aDone.Waiters, w) {
		t.Fatalf("finished dependency lost its waiters: %v", aDone.Waiters)
	}
	if _, err := e.store.Watch(e.ctx, a.ID, w); !errors.Is(err, lease.ErrFinished) {
		t.Fatalf("Watch of a finished task: %v, want ErrFinished", err)
	}
	if _, err := e.store.Watch(e.ctx, e.id(), w); !errors.Is(err, lease.ErrNotFound) {
		t.Fatalf("Watch of a missing task: %v, want ErrNotFound", err)
	}
	e.notify(w, aDone)
	got := e.notify(w, e.finish(e.claim(mustGet(e, b.ID), "w2"), nil))
	if !lease.Complete(got) {
		t.Fatalf("both dependencies succeeded; not complete: %v", got.Ended)
	}
	if _, err := e.store.Resume(e.ctx, dep.ID, 0, ""); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	e.claim(mustGet(e, dep.ID), "w3")
}

func mustGet(e *env, id string) lease.Task {
	e.t.Helper()
	got, err := e.store.Get(e.ctx, id)
	if err != nil {
		e.t.Fatalf("Get(%s): %v", id, err)
	}
	return got
}

func testFailedDependencyCancels(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	a := e.create(e.newTask())
	strict, anyway := e.newTask(), e.newTask()
	strict.After, anyway.After, anyway.AfterAny = []string{a.ID}, []string{a.ID}, true
	for _, n := range []lease.NewTask{strict, anyway} {
		if _, err := e.store.Create(e.ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	failed := e.release(e.claim(a, "w1"), lease.Release{Status: lease.StatusFailed, Error: "disk full"})
	got, err := e.store.Notify(e.ctx, lease.Waiter{ID: strict.ID, Mode: lease.WaitAfter}, failed)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != lease.StatusCancelled || got.Error != "dependency "+a.ID+" ended FAILED: disk full" || got.FinishedAt.IsZero() {
		t.Fatalf("strict dependent: status %s error %q", got.Status, got.Error)
	}
	_, err = e.store.Notify(e.ctx, lease.Waiter{ID: strict.ID, Mode: lease.WaitAfter}, failed)
	if !errors.Is(err, lease.ErrFinished) {
		t.Fatalf("notify of a cancelled dependent: %v, want ErrFinished", err)
	}
	got = e.notify(lease.Waiter{ID: anyway.ID, Mode: lease.WaitAfterAny}, failed)
	if got.Status != lease.StatusWaiting || !lease.Complete(got) {
		t.Fatalf("after-any dependent: status %s complete %v", got.Status, lease.Complete(got))
	}
}

func testCallbackLandsOnce(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	held := e.createClaimed(e.newTask(), "w1")
	until := e.clock.Now().Add(time.Hour)
	waiting := e.suspend(held, lease.Wait{Mode: lease.WaitCallback, Until: until, Nonce: "n0nce"})
	if waiting.Attempt != 1 {
		t.Fatalf("a callback wait keeps its attempt: %d", waiting.Attempt)
	}
	end := lease.WaitEnd{ID: held.ID, Fence: held.Fence, Attempt: held.Attempt, Nonce: "n0nce", Status: lease.StatusSucceeded, Result: []byte(`{"ok":true}`)}
	forged := end
	forged.Nonce = "guess"
	if _, err := e.store.EndWait(e.ctx, forged); !errors.Is(err, lease.ErrBadCallback) {
		t.Fatalf("forged callback: %v, want ErrBadCallback", err)
	}
	stale := end
	stale.Fence += 5 // the token of another attempt
	if _, err := e.store.EndWait(e.ctx, stale); !errors.Is(err, lease.ErrNotWaiting) {
		t.Fatalf("stale callback: %v, want ErrNotWaiting", err)
	}
	e.clock.Advance(time.Second)
	got, err := e.store.EndWait(e.ctx, end)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != lease.StatusSucceeded || string(got.Result) != `{"ok":true}` || got.CallbackHash != "" || got.FinishedAt.IsZero() ||
		got.History[len(got.History)-1].Status != lease.StatusSucceeded {
		t.Fatalf("completed: %+v", got)
	}
	if _, err := e.store.EndWait(e.ctx, end); !errors.Is(err, lease.ErrFinished) {
		t.Fatalf("second callback: %v, want ErrFinished", err)
	}
}

// testCallbackNonceNotStored: the store keeps only a hash of a callback's
// nonce, so a reader of the store cannot answer the wait: the stored value
// used as a token's nonce is rejected; the token's own nonce lands.
func testCallbackNonceNotStored(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	held := e.createClaimed(e.newTask(), "w1")
	const nonce = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	e.suspend(held, lease.Wait{Mode: lease.WaitCallback, Until: e.clock.Now().Add(time.Hour), Nonce: nonce})
	stored := mustGet(e, held.ID)
	if stored.CallbackHash != lease.CallbackHash(nonce) || strings.Contains(stored.CallbackHash, nonce) {
		t.Fatalf("the store keeps %q for the nonce %q: want a hash of it", stored.CallbackHash, nonce)
	}
	end := lease.WaitEnd{ID: held.ID, Fence: held.Fence, Attempt: held.Attempt, Status: lease.StatusSucceeded, Result: []byte(`1`)}
	read := end
	read.Nonce = stored.CallbackHash // what a reader of the table sees
	if _, err := e.store.EndWait(e.ctx, read); !errors.Is(err, lease.ErrBadCallback) {
		t.Fatalf("callback with the stored value as its nonce: %v, want ErrBadCallback", err)
	}
	end.Nonce = nonce
	if got, err := e.store.EndWait(e.ctx, end); err != nil || got.Status != lease.StatusSucceeded {
		t.Fatalf("callback with the nonce: %v, %+v", err, got)
	}
}

func testCallbackTimeoutRetries(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	held := e.createClaimed(e.newTask(), "w1")
	waiting := e.suspend(held, lease.Wait{Mode: lease.WaitCallback, Until: e.clock.Now().Add(time.Minute), Nonce: "n"})
	e.clock.Advance(2 * time.Minute)
	runAt := e.clock.Now().Add(10 * time.Second)
	got, err := e.store.EndWait(e.ctx, lease.WaitEnd{ID: held.ID, Fence: waiting.Fence, Attempt: waiting.Attempt, Hash: waiting.CallbackHash,
		Status: lease.StatusPending, RunAt: runAt, Error: "callback timed out"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != lease.StatusPending || !got.RunAt.Equal(ms(runAt)) || !got.DispatchAt.Equal(ms(runAt).Add(grace)) || got.Error != "callback timed out" {
		t.Fatalf("timed out: %+v", got)
	}
	e.clock.Advance(10 * time.Second)
	if again := e.claim(got, "w2"); again.Attempt != 2 {
		t.Fatalf("retry attempt %d, want 2", again.Attempt)
	}
}

// testResumableCallback: a resumable callback wait records the answer as
// its step and makes the task PENDING at once, its count of attempts started again; a
// token whose step part was changed, or a plain token, does not land; the
// operator's form (the kept hash and the step) lands; a failure is
// recorded as the step's error, not the task's.
func testResumableCallback(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	held := e.createClaimed(e.newTask(), "w1")
	if _, err := e.store.Checkpoint(e.ctx, held.LeaseOf(), "before", []byte(`1`)); err != nil {
		t.Fatal(err)
	}
	nonce := lease.ResumableNonce("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "callback:approval")
	if err := (lease.Wait{Mode: lease.WaitCallback, Until: e.clock.Now().Add(time.Hour), Nonce: nonce, Step: "callback:other"}).Validate(); !errors.Is(err, lease.ErrInvalid) {
		t.Fatalf("a wait whose nonce names another step: %v, want ErrInvalid", err)
	}
	waiting := e.suspend(held, lease.Wait{Mode: lease.WaitCallback, Until: e.clock.Now().Add(time.Hour), Nonce: nonce, Step: "callback:approval"})
	end := lease.WaitEnd{ID: held.ID, Fence: waiting.Fence, Attempt: waiting.Attempt, Nonce: nonce, Status: lease.StatusSucceeded, Result: []byte(`{"ok":true}`)}
	for name, bad := range map[string]lease.WaitEnd{
		"another step": func() lease.WaitEnd {
			b := end
			b.Nonce = lease.ResumableNonce("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "callback:x")
			return b
		}(),
		"no step": func() lease.WaitEnd { b := end; b.Nonce = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"; return b }(),
		"hash, no step": func() lease.WaitEnd {
			b := end
			b.Nonce, b.Hash = "", waiting.CallbackHash
			return b
		}(),
	} {
		if _, err := e.store.EndWait(e.ctx, bad); !errors.Is(err, lease.ErrBadCallback) {
			t.Fatalf("%s: %v, want ErrBadCallback", name, err)
		}
	}
	big := end
	big.Result = []byte(`"` + strings.Repeat("x", lease.MaxCallbackAnswerBytes) + `"`)
	if _, err := e.store.EndWait(e.ctx, big); !errors.Is(err, lease.ErrTooLarge) {
		t.Fatalf("an answer over %d bytes: %v, want ErrTooLarge", lease.MaxCallbackAnswerBytes, err)
	}
	e.clock.Advance(time.Second)
	got, err := e.store.EndWait(e.ctx, end)
	if err != nil {
		t.Fatal(err)
	}
	r, ok := got.StepResult("callback:approval")
	if got.Status != lease.StatusPending || !ok || string(r) != `{"result":{"ok":true}}` || got.Attempt != 0 ||
		!got.RunAt.Equal(e.now()) || got.CallbackHash != "" || got.CallbackStep != "" || got.Error != "" || len(got.History) != len(waiting.History) ||
		!got.DispatchAt.Equal(e.now().Add(grace)) || !got.FinishedAt.IsZero() {
		t.Fatalf("answered: %+v", got)
	}
	if _, err := e.store.EndWait(e.ctx, end); !errors.Is(err, lease.ErrNotWaiting) {
		t.Fatalf("second answer: %v, want ErrNotWaiting", err)
	}
	again := e.claim(got, "w2")
	if again.Attempt != waiting.Attempt {
		t.Fatalf("the run after the answer is attempt %d, want the same attempt %d", again.Attempt, waiting.Attempt)
	}
	if _, err := e.store.Checkpoint(e.ctx, again.LeaseOf(), "callback:approval", []byte(`2`)); err != nil {
		t.Fatalf("checkpoint of the recorded answer's step: %v", err)
	}
	if again, _ = e.store.Get(e.ctx, again.ID); len(again.Steps) != 2 {
		t.Fatalf("the answer's step was recorded twice: %+v", again.Steps)
	}

	// The operator's token, and a failed answer.
	nonce2 := lease.ResumableNonce("BCDEFGHIJKLMNOPQRSTUVWXYZA", "callback:second")
	waiting = e.suspend(again, lease.Wait{Mode: lease.WaitCallback, Until: e.clock.Now().Add(time.Hour), Nonce: nonce2, Step: "callback:second"})
	op := lease.WaitEnd{ID: held.ID, Fence: waiting.Fence, Attempt: waiting.Attempt, Hash: lease.OperatorNonce(waiting), Status: lease.StatusFailed, Error: "declined"}
	got, err = e.store.EndWait(e.ctx, op)
	if err != nil {
		t.Fatalf("the operator's answer: %v", err)
	}
	if r, ok := got.StepResult("callback:second"); got.Status != lease.StatusPending || !ok || string(r) != `{"error":"declined"}` || got.Error != "" {
		t.Fatalf("failed answer: %s %q %s", got.Status, got.Error, r)
	}

	// A resumable wait that times out is retried as any callback's.
	again = e.claim(got, "w3")
	nonce3 := lease.ResumableNonce("CDEFGHIJKLMNOPQRSTUVWXYZAB", "callback:third")
	waiting = e.suspend(again, lease.Wait{Mode: lease.WaitCallback, Until: e.clock.Now().Add(time.Minute), Nonce: nonce3, Step: "callback:third"})
	e.clock.Advance(2 * time.Minute)
	got, err = e.store.EndWait(e.ctx, lease.WaitEnd{ID: held.ID, Fence: waiting.Fence, Attempt: waiting.Attempt, Hash: lease.OperatorNonce(waiting),
		Status: lease.StatusPending, RunAt: e.clock.Now().Add(time.Second), Error: "callback timed out"})
	if _, ok := got.StepResult("callback:third"); err != nil || got.Status != lease.StatusPending || ok || got.Error != "callback timed out" || got.CallbackStep != "" {
		t.Fatalf("timed out: %v %+v", err, got)
	}

	// On the last attempt the timeout fails the task: not an answer.
	e.clock.Advance(2 * time.Second)
	again = e.claim(got, "w4")
	nonce4 := lease.ResumableNonce("DEFGHIJKLMNOPQRSTUVWXYZABC", "callback:fourth")
	waiting, err = e.store.Suspend(e.ctx, again.LeaseOf(), lease.Wait{Mode: lease.WaitCallback, Until: e.clock.Now().Add(time.Minute), Nonce: nonce4, Step: "callback:fourth"})
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(2 * time.Minute)
	got, err = e.store.EndWait(e.ctx, lease.WaitEnd{ID: held.ID, Fence: waiting.Fence, Attempt: waiting.Attempt, Hash: lease.OperatorNonce(waiting),
		Status: lease.StatusFailed, Error: "callback not received", TimedOut: true})
	if _, ok := got.StepResult("callback:fourth"); err != nil || got.Status != lease.StatusFailed || ok || got.Error != "callback not received" {
		t.Fatalf("timed out on the last attempt: %v %s %q, step recorded %v", err, got.Status, got.Error, ok)
	}
}

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

func testCheckpointOutlivesTheAttempt(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	held := e.createClaimed(e.newTask(), "w1")
	got, err := e.store.Checkpoint(e.ctx, held.LeaseOf(), "fetch", []byte(`{"n":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := got.StepResult("fetch"); !ok || string(r) != `{"n":1}` {
		t.Fatalf("after Checkpoint: steps %+v", got.Steps)
	}
	if _, err := e.store.Checkpoint(e.ctx, held.LeaseOf(), "parse", []byte(`2`)); err != nil {
		t.Fatal(err)
	}
	released := e.release(held, lease.Release{Status: lease.StatusPending, RunAt: e.now(), Error: "boom"})
	again, err := e.store.Claim(e.ctx, released.ID, "w2")
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Steps) != 2 || again.Steps[0].Name != "fetch" || again.Steps[1].Name != "parse" || string(again.Steps[1].Result) != "2" {
		t.Fatalf("the next attempt sees steps %+v", again.Steps)
	}
	if _, err := e.store.Checkpoint(e.ctx, held.LeaseOf(), "late", nil); !errors.Is(err, lease.ErrLeaseLost) {
		t.Fatalf("checkpoint under an old lease: %v, want ErrLeaseLost", err)
	}
}

// A step is recorded at most once: a second checkpoint of it, under the
// same lease or a later one, succeeds, keeps the first result and adds no
// entry (the DynamoDB store's SDK retries a checkpoint whose answer was
// lost, so it must be idempotent per step name).
func testCheckpointRecordsAStepOnce(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	held := e.createClaimed(e.newTask(), "w1")
	for i, result := range []string{`1`, `1`, `2`} {
		got, err := e.store.Checkpoint(e.ctx, held.LeaseOf(), "s", []byte(result))
		if err != nil {
			t.Fatalf("checkpoint %d: %v", i, err)
		}
		if len(got.Steps) != 1 || string(got.Steps[0].Result) != `1` {
			t.Fatalf("checkpoint %d: steps %+v, want s recorded once with the first result", i, got.Steps)
		}
	}
	released := e.release(held, lease.Release{Status: lease.StatusPending, RunAt: e.now(), Error: "boom"})
	again, err := e.store.Claim(e.ctx, released.ID, "w2")
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.store.Checkpoint(e.ctx, again.LeaseOf(), "s", []byte(`3`))
	if err != nil || len(got.Steps) != 1 || string(got.Steps[0].Result) != `1` {
		t.Fatalf("checkpoint under the next lease: steps %+v, %v; want s once with the first result", got.Steps, err)
	}
	got, err = e.store.Checkpoint(e.ctx, again.LeaseOf(), "t", []byte(`4`))
	if err != nil || len(got.Steps) != 2 {
		t.Fatalf("a new step under the next lease: steps %+v, %v", got.Steps, err)
	}
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

// The waiter limit has an error of its own (it also matches ErrInvalid), so
// a dependent refused by it can say why.
func testWatchWaiterLimit(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	root := e.create(e.newTask())
	for i := range lease.MaxWaiters {
		if _, err := e.store.Watch(e.ctx, root.ID, lease.Waiter{ID: fmt.Sprintf("w%d", i), Mode: lease.WaitAfter}); err != nil {
			t.Fatalf("Watch %d: %v", i, err)
		}
	}
	_, err := e.store.Watch(e.ctx, root.ID, lease.Waiter{ID: "one-too-many", Mode: lease.WaitAfter})
	if !errors.Is(err, lease.ErrWaiterLimit) || !errors.Is(err, lease.ErrInvalid) {
		t.Fatalf("Watch %d: %v, want ErrWaiterLimit", lease.MaxWaiters+1, err)
	}
	if _, err := e.store.Watch(e.ctx, root.ID, lease.Waiter{ID: "w0", Mode: lease.WaitAfter}); err != nil {
		t.Fatalf("a registered waiter's Watch again: %v", err)
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
