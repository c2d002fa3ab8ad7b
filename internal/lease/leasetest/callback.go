package leasetest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
)

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
	if _, err := e.store.Checkpoint(e.ctx, held.LeaseOf(), lease.Step{Name: "before", Result: []byte(`1`)}); err != nil {
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
	if _, err := e.store.Checkpoint(e.ctx, again.LeaseOf(), lease.Step{Name: "callback:approval", Result: []byte(`2`)}); err != nil {
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
