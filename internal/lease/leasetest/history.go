package leasetest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
)

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
