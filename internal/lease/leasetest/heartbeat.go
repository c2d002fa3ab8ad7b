package leasetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
)

// beater is a store's heartbeat of a callback wait: both stores have it.
type beater interface {
	BeatCallback(ctx context.Context, e lease.WaitEnd) (lease.Task, error)
}

// testCallbackHeartbeat: a callback wait with a heartbeat timeout gets its
// sweep entry at the first heartbeat deadline; a beat with the token moves
// the heartbeat deadline (not the entry) to the beat plus the timeout; a
// forged, stale or late beat, a beat on a wait without heartbeats, and a
// beat after the wait ended are refused with the errors that say which.
func testCallbackHeartbeat(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	b, ok := e.store.(beater)
	if !ok {
		t.Fatalf("%T has no BeatCallback", e.store)
	}
	const nonce = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	held := e.createClaimed(e.newTask(), "w1")
	waiting := e.suspend(held, lease.Wait{Mode: lease.WaitCallback, Until: e.clock.Now().Add(time.Hour), Nonce: nonce, Heartbeat: 10 * time.Minute})
	first := e.now().Add(10 * time.Minute)
	if !waiting.DispatchAt.Equal(first) || !waiting.BeatUntil.Equal(first) {
		t.Fatalf("suspended with a heartbeat: sweep entry %v, heartbeat deadline %v; want both %v", waiting.DispatchAt, waiting.BeatUntil, first)
	}
	if at, hb := waiting.CallbackDeadline(); !at.Equal(first) || !hb {
		t.Fatalf("CallbackDeadline = %v, %v; want %v, true", at, hb, first)
	}
	beat := lease.WaitEnd{ID: held.ID, Fence: waiting.Fence, Attempt: waiting.Attempt, Nonce: nonce, Status: lease.StatusSucceeded}
	forged, stale := beat, beat
	forged.Nonce = "guessguessguessguess"
	stale.Fence++
	if _, err := b.BeatCallback(e.ctx, forged); !errors.Is(err, lease.ErrBadCallback) {
		t.Fatalf("forged beat: %v, want ErrBadCallback", err)
	}
	if _, err := b.BeatCallback(e.ctx, stale); !errors.Is(err, lease.ErrNotWaiting) {
		t.Fatalf("stale beat: %v, want ErrNotWaiting", err)
	}
	e.clock.Advance(5 * time.Minute)
	got, err := b.BeatCallback(e.ctx, beat)
	if err != nil {
		t.Fatal(err)
	}
	if want := e.now().Add(10 * time.Minute); !got.BeatUntil.Equal(want) || !got.DispatchAt.Equal(first) || got.Status != lease.StatusWaiting {
		t.Fatalf("after a beat: heartbeat deadline %v (want %v), sweep entry %v (want it left at %v), status %s", got.BeatUntil, want, got.DispatchAt, first, got.Status)
	}
	if again := mustGet(e, held.ID); !again.BeatUntil.Equal(got.BeatUntil) || again.HeartbeatTimeout != 10*time.Minute {
		t.Fatalf("read after a beat: %v, %v", again.BeatUntil, again.HeartbeatTimeout)
	}
	e.clock.Advance(11 * time.Minute) // past the heartbeat deadline
	if _, err := b.BeatCallback(e.ctx, beat); !errors.Is(err, lease.ErrNotWaiting) {
		t.Fatalf("beat after the heartbeat deadline: %v, want ErrNotWaiting", err)
	}
	ended, err := e.store.EndWait(e.ctx, lease.WaitEnd{ID: held.ID, Fence: waiting.Fence, Attempt: waiting.Attempt, Hash: waiting.CallbackHash,
		Status: lease.StatusFailed, Error: "callback heartbeat timed out after 10m0s", TimedOut: true})
	if err != nil {
		t.Fatal(err)
	}
	if ended.HeartbeatTimeout != 0 || !ended.BeatUntil.IsZero() {
		t.Fatalf("an ended wait keeps its heartbeat: %v, %v", ended.HeartbeatTimeout, ended.BeatUntil)
	}
	if _, err := b.BeatCallback(e.ctx, beat); !errors.Is(err, lease.ErrFinished) {
		t.Fatalf("beat after the wait ended: %v, want ErrFinished", err)
	}

	// A wait without a heartbeat timeout takes no beat.
	plain := e.createClaimed(e.newTask(), "w1")
	pw := e.suspend(plain, lease.Wait{Mode: lease.WaitCallback, Until: e.clock.Now().Add(time.Hour), Nonce: nonce})
	if _, err := b.BeatCallback(e.ctx, lease.WaitEnd{ID: plain.ID, Fence: pw.Fence, Attempt: pw.Attempt, Nonce: nonce, Status: lease.StatusSucceeded}); !errors.Is(err, lease.ErrInvalid) {
		t.Fatalf("beat on a wait without heartbeats: %v, want ErrInvalid", err)
	}
}
