package lifecycle_test

import (
	"context"
	"testing"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lifecycle"
	"github.com/leasehold/leasehold/internal/token"
)

// stored is an inline token with a create token, as the Go client sends it
// before it stores the same task.
func storedToken(t *testing.T, id, createToken string) string {
	t.Helper()
	body, err := token.Token{Kind: "echo", ID: id, Payload: []byte(`{"n":1}`), MaxAttempts: 3, CreateToken: createToken}.Encode()
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	return body
}

// The client stored the task before its token arrived (the usual order):
// the worker claims it, one write, and finishes it, one more; it never tries
// to create it.
func TestCreateTokenOfAStoredTaskIsClaimed(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.handlers["echo"] = func(_ context.Context, task lease.Task) ([]byte, error) { return task.Payload, nil }
	n := lease.NewTask{ID: "c1", Kind: "echo", Payload: []byte(`{"n":1}`), MaxAttempts: 3, Carried: true, CreateToken: "tok-c1"}
	if _, err := e.store.Create(t.Context(), n); err != nil {
		t.Fatal(err)
	}
	before := e.store.Calls()
	res := e.exec.Process(t.Context(), nil, msg("m1", storedToken(t, "c1", "tok-c1")))
	if !res.Ack || res.Outcome != lifecycle.OutcomeSucceeded {
		t.Fatalf("result = %+v, want acked success", res)
	}
	if c := e.store.Calls(); c.Writes-before.Writes != 2 {
		t.Errorf("worker writes = %d, want 2 (claim, finish)", c.Writes-before.Writes)
	}
	if got := e.get(t, "c1"); got.Status != lease.StatusSucceeded || got.Attempt != 1 || !got.DispatchAt.IsZero() {
		t.Errorf("stored %s attempt %d dispatch at %s; want SUCCEEDED on attempt 1 with no sweep entry", got.Status, got.Attempt, got.DispatchAt)
	}
}

// The token beat the client's create, or the client stopped after the send:
// the worker creates the task from the token under the same create token,
// and the client's create, landing later, finds it as its own.
func TestCreateTokenOfAMissingTaskCreatesIt(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.handlers["echo"] = func(_ context.Context, task lease.Task) ([]byte, error) { return task.Payload, nil }
	m := msg("m1", storedToken(t, "c2", "tok-c2"))
	m.Queue = "leasehold-work" // arrived by name; the token's task is on the default queue
	res := e.exec.Process(t.Context(), nil, m)
	if !res.Ack || res.Outcome != lifecycle.OutcomeSucceeded {
		t.Fatalf("result = %+v, want acked success", res)
	}
	got := e.get(t, "c2")
	if got.Status != lease.StatusSucceeded || got.Attempt != 1 || got.MaxAttempts != 3 || got.Queue != "" {
		t.Fatalf("stored %+v", got)
	}
	late := lease.NewTask{ID: "c2", Kind: "echo", Payload: []byte(`{"n":1}`), MaxAttempts: 3, Carried: true, CreateToken: "tok-c2"}
	if task, err := e.store.Create(t.Context(), late); err != nil || task.Status != lease.StatusSucceeded {
		t.Fatalf("the client's late Create = %s, %v; want its own task, SUCCEEDED, and no error", task.Status, err)
	}
	other := late
	other.CreateToken = "someone-else"
	if _, err := e.store.Create(t.Context(), other); err == nil {
		t.Fatal("a Create under another token reported success; want a duplicate")
	}
}

// A sender that waits for the worker's create (token.CreateFirst) has not
// stored the task: the worker creates it claimed in one write, as for a
// plain inline token, under the sender's create token, and finishes it: two
// writes in all, none of them a failed claim.
func TestCreateFirstTokenCreatesTheTaskClaimed(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.handlers["echo"] = func(_ context.Context, task lease.Task) ([]byte, error) { return task.Payload, nil }
	ct := token.NewCreateFirst()
	before := e.store.Calls()
	res := e.exec.Process(t.Context(), nil, msg("m1", storedToken(t, "f1", ct)))
	if !res.Ack || res.Outcome != lifecycle.OutcomeSucceeded {
		t.Fatalf("result = %+v, want acked success", res)
	}
	if c := e.store.Calls(); c.Writes-before.Writes != 2 {
		t.Errorf("worker writes = %d, want 2 (create claimed, finish)", c.Writes-before.Writes)
	}
	got, stored, err := e.store.GetWithToken(t.Context(), "f1")
	if err != nil || got.Status != lease.StatusSucceeded || got.Attempt != 1 || stored != ct || !got.DispatchAt.IsZero() {
		t.Errorf("stored %s attempt %d create token %q dispatch at %s (%v); want SUCCEEDED on attempt 1 under %q, no sweep entry",
			got.Status, got.Attempt, stored, got.DispatchAt, err, ct)
	}
}

// The sender stopped waiting and stored the task itself under the same
// create token before the token arrived: the worker's create finds it as
// the sender's, and the worker claims it and runs it once.
func TestCreateFirstTokenOfAStoredTaskIsClaimed(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ran := 0
	e.handlers["echo"] = func(_ context.Context, task lease.Task) ([]byte, error) { ran++; return task.Payload, nil }
	ct := token.NewCreateFirst()
	n := lease.NewTask{ID: "f2", Kind: "echo", Payload: []byte(`{"n":1}`), MaxAttempts: 3, Carried: true, CreateToken: ct}
	if _, err := e.store.Create(t.Context(), n); err != nil {
		t.Fatal(err)
	}
	res := e.exec.Process(t.Context(), nil, msg("m1", storedToken(t, "f2", ct)))
	if !res.Ack || res.Outcome != lifecycle.OutcomeSucceeded {
		t.Fatalf("result = %+v, want acked success", res)
	}
	if got := e.get(t, "f2"); ran != 1 || got.Status != lease.StatusSucceeded || got.Attempt != 1 {
		t.Errorf("ran %d times; stored %s attempt %d; want once, SUCCEEDED on attempt 1", ran, got.Status, got.Attempt)
	}
}

// Create-first tokens create listed tasks, so a batch of them shares one
// batch listing entry, as plain inline tokens do; tokens whose senders
// store their tasks do not.
func TestCreateFirstTokensShareABatchListingEntry(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.handlers["echo"] = func(_ context.Context, task lease.Task) ([]byte, error) { return task.Payload, nil }
	var msgs []lifecycle.Message
	for _, id := range []string{"b0", "b1", "b2"} {
		msgs = append(msgs, msg("m"+id, storedToken(t, id, token.NewCreateFirst())))
	}
	for i, r := range e.exec.ProcessBatch(t.Context(), nil, msgs) {
		if !r.Ack || r.Outcome != lifecycle.OutcomeSucceeded {
			t.Fatalf("message %d: %+v", i, r)
		}
	}
	in := e.get(t, "b0").ListedIn
	if in == "" {
		t.Fatal("b0 is listed on its own; want a batch listing entry")
	}
	for _, id := range []string{"b1", "b2"} {
		if got := e.get(t, id).ListedIn; got != in {
			t.Errorf("%s listed in %q, b0 in %q: want one entry", id, got, in)
		}
	}
}
