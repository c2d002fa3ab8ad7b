package leasetest

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/leasehold/leasehold/internal/lease"
)

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
