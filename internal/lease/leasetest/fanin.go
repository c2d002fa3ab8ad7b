package leasetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/leasehold/leasehold/internal/lease"
)

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
