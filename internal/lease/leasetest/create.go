package leasetest

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/metadata"
)

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
		{"metadata key with a space", func(n *lease.NewTask) { n.Metadata = map[string]string{"a b": "v"} }, lease.ErrInvalid},
		{"metadata value too long", func(n *lease.NewTask) {
			n.Metadata = map[string]string{"k": strings.Repeat("v", metadata.MaxValueBytes+1)}
		}, lease.ErrInvalid},
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

// A task's metadata is stored by Create and CreateClaimed and kept by
// every later write: claims, releases, the finish.
func testMetadataStays(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	md := map[string]string{"tenant": "acme", "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	n := e.newTask()
	n.Metadata = md
	held := e.createClaimed(n, "w1")
	if !maps.Equal(held.Metadata, md) {
		t.Fatalf("claimed task's metadata %v, want %v", held.Metadata, md)
	}
	done := e.finish(held, []byte(`1`))
	if !maps.Equal(done.Metadata, md) {
		t.Fatalf("finished task's metadata %v, want %v", done.Metadata, md)
	}
	e.stored(done)

	n = e.newTask()
	n.Metadata = md
	got, err := e.store.CreateClaimed(e.ctx, n, "w1")
	if err != nil || !maps.Equal(got.Metadata, md) {
		t.Fatalf("CreateClaimed with metadata: %v, %v", got.Metadata, err)
	}
	if stored, err := e.store.Get(e.ctx, n.ID); err != nil || !maps.Equal(stored.Metadata, md) {
		t.Fatalf("Get after CreateClaimed: metadata %v, %v", stored.Metadata, err)
	}
	// A task without metadata reads back without it.
	plain := e.create(e.newTask())
	if plain.Metadata != nil {
		t.Fatalf("a task without metadata reads back with %v", plain.Metadata)
	}
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

	// A read names the create that stored the task, whoever wrote first:
	// a sender that left the create to its token's receiver tells its own
	// task from another call's by it.
	r, ok := e.store.(tokenReader)
	if !ok {
		t.Fatalf("%T has no GetWithToken", e.store)
	}
	for _, c := range []struct{ id, want string }{{n.ID, n.CreateToken}, {m.ID, m.CreateToken}} {
		read, got, err := r.GetWithToken(e.ctx, c.id)
		if err != nil || got != c.want || read.ID != c.id {
			t.Errorf("GetWithToken %s: %s, create token %q (%v), want %q", c.id, read.ID, got, err, c.want)
		}
	}
	if _, _, err := r.GetWithToken(e.ctx, "missing-"+runID); !errors.Is(err, lease.ErrNotFound) {
		t.Errorf("GetWithToken of a missing task: %v, want ErrNotFound", err)
	}
}

// tokenReader is the read both stores offer besides lease.Store: a task
// with the create token it was stored under.
type tokenReader interface {
	GetWithToken(ctx context.Context, id string) (lease.Task, string, error)
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
