package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/leasehold/leasehold/internal/dispatch"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/leasemem"
	"github.com/leasehold/leasehold/internal/lifecycle"
)

func TestIntakeStoresAndDispatches(t *testing.T) {
	t.Parallel()
	e := setupUnit(t)
	fails := e.intake(t, event(
		message{"m1", `{"v":1,"kind":"resize","payload":{"w":64}}`},
		message{"m2", `{"v":1,"kind":"resize","payload":{"w":32},"id":"order-42","max_attempts":3}`},
		message{"m3", `{"v":1,"kind":"report","delay_seconds":300}`},
		message{"m4", `{"v":1,"kind":"report","run_at":"2031-03-14T15:24:26Z"}`},
	))
	if len(fails) != 0 {
		t.Fatalf("failures %v, want none", fails)
	}
	m1 := e.get(t, "m1")
	if m1.Kind != "resize" || string(m1.Payload) != `{"w":64}` || m1.MaxAttempts != lifecycle.DefaultMaxAttempts ||
		m1.Status != lease.StatusPending || !m1.RunAt.Equal(t0) || !m1.DispatchAt.Equal(t0.Add(grace)) {
		t.Fatalf("task of m1: %+v", m1)
	}
	if o := e.get(t, "order-42"); o.MaxAttempts != 3 || string(o.Payload) != `{"w":32}` {
		t.Fatalf("task order-42: %+v", o)
	}
	if _, err := e.store.Get(t.Context(), "m2"); !errors.Is(err, lease.ErrNotFound) {
		t.Fatalf("the message id named a task that has a client id: %v", err)
	}
	if m3 := e.get(t, "m3"); !m3.RunAt.Equal(t0.Add(5 * time.Minute)) {
		t.Fatalf("task m3 runs at %s, want 5 minutes on", m3.RunAt)
	}
	want := map[string]int32{"m1": 0, "order-42": 0, "m3": 300, "m4": 900}
	got := map[string]int32{}
	for _, tk := range e.sqs.take() {
		got[tk.ID] = tk.Delay
	}
	if !maps.Equal(got, want) {
		t.Fatalf("tokens %v, want %v", got, want)
	}
}

func TestIntakeDuplicatesMakeOneTask(t *testing.T) {
	t.Parallel()
	e := setupUnit(t)
	body := `{"v":1,"kind":"k","payload":{"n":1}}`
	// The same message twice in a batch, and again in a later batch.
	if fails := e.intake(t, event(message{"m1", body}, message{"m1", body})); len(fails) != 0 {
		t.Fatalf("failures %v", fails)
	}
	if fails := e.intake(t, event(message{"m1", body})); len(fails) != 0 {
		t.Fatalf("failures %v", fails)
	}
	// Two messages with one client id, kind and payload (spelt otherwise):
	// one task.
	if fails := e.intake(t, event(message{"a", `{"v":1,"kind":"k","id":"c1","payload":{"x":1,"y":2}}`}, message{"b", `{"v":1,"kind":"k","id":"c1","payload":{ "y":2, "x":1 }}`})); len(fails) != 0 {
		t.Fatalf("failures %v", fails)
	}
	// Every delivery of a PENDING task sends a token: one may be the first
	// delivery's, lost between its write and its send.
	if got := tokenIDs(e.sqs.take()); got["m1"] != 3 || got["c1"] != 2 || len(got) != 2 {
		t.Fatalf("tokens %v", got)
	}
	if dl := e.sqs.deadLetters(); len(dl) != 0 {
		t.Fatalf("duplicates were dead-lettered: %d", len(dl))
	}
	// Once claimed, a duplicate sends nothing.
	if _, err := e.store.Claim(t.Context(), "m1", "w1"); err != nil {
		t.Fatalf("Claim: %v", err)
	}
	if fails := e.intake(t, event(message{"m1", body})); len(fails) != 0 {
		t.Fatalf("failures %v", fails)
	}
	if got := e.sqs.take(); len(got) != 0 {
		t.Fatalf("a duplicate of a running task sent %v", got)
	}
	if n := e.get(t, "m1"); n.Attempt != 1 || n.Status != lease.StatusRunning {
		t.Fatalf("task m1 is %s at attempt %d", n.Status, n.Attempt)
	}
}

func TestIntakeLongDelayWaitsForTheSweep(t *testing.T) {
	t.Parallel()
	e := setupUnit(t)
	if fails := e.intake(t, event(
		message{"later", `{"v":1,"kind":"k","delay_seconds":1200}`},
		message{"at", `{"v":1,"kind":"k","run_at":"2031-03-14T16:09:26Z"}`},
	)); len(fails) != 0 {
		t.Fatalf("failures %v", fails)
	}
	if got := e.sqs.take(); len(got) != 0 {
		t.Fatalf("tokens %v sent for tasks due beyond SQS's delay cap", got)
	}
	later := e.get(t, "later")
	if due := t0.Add(20 * time.Minute); !later.RunAt.Equal(due) || !later.DispatchAt.Equal(due) {
		t.Fatalf("task runs at %s, sweep at %s; want both %s", later.RunAt, later.DispatchAt, due)
	}

	e.clock.Advance(20*time.Minute - time.Millisecond)
	if st := e.sweep(t); st.Due != 0 || len(e.sqs.take()) != 0 {
		t.Fatalf("sweep before due: %+v", st)
	}
	e.clock.Advance(time.Millisecond)
	if st := e.sweep(t); st != (dispatch.SweepStats{Due: 1, Dispatched: 1}) {
		t.Fatalf("sweep when due: %+v", st)
	}
	if got := e.sqs.take(); len(got) != 1 || got[0] != (sentToken{ID: "later", Queue: workQueue}) {
		t.Fatalf("tokens %v, want one for later with no delay", got)
	}
	if got := e.get(t, "later").DispatchAt; !got.Equal(e.clock.Now().Add(grace)) {
		t.Fatalf("after the sweep the task waits until %s, want now plus grace", got)
	}
	// Nothing more until the grace has passed without a claim.
	if st := e.sweep(t); st.Due != 0 {
		t.Fatalf("second sweep: %+v", st)
	}
	e.clock.Advance(grace)
	if st := e.sweep(t); st.Dispatched != 1 {
		t.Fatalf("sweep after the grace: %+v", st)
	}
	if got := tokenIDs(e.sqs.take()); got["later"] != 1 {
		t.Fatalf("tokens %v", got)
	}
	// The other task is due at 16:09:26.
	e.clock.Advance(time.Hour - 20*time.Minute - grace)
	e.sweep(t)
	if got := tokenIDs(e.sqs.take()); got["at"] != 1 {
		t.Fatalf("tokens %v, want one for the task due at its run_at", got)
	}
}

// The same id with another kind or payload is a conflict, never a silent
// duplicate: the submission goes to the intake DLQ saying so, and the stored
// task is left as it was.
func TestIntakeRejectsIDConflicts(t *testing.T) {
	t.Parallel()
	e := setupUnit(t)
	first := `{"v":1,"kind":"k","id":"c1","payload":{"n":1}}`
	if fails := e.intake(t, event(message{"a", first})); len(fails) != 0 {
		t.Fatalf("failures %v", fails)
	}
	e.sqs.take()
	bad := map[string]string{
		"other-payload": `{"v":1,"kind":"k","id":"c1","payload":{"n":2}}`,
		"no-payload":    `{"v":1,"kind":"k","id":"c1"}`,
		"other-kind":    `{"v":1,"kind":"j","id":"c1","payload":{"n":1}}`,
	}
	var msgs []message
	for src, body := range bad {
		msgs = append(msgs, message{src, body})
	}
	if fails := e.intake(t, event(msgs...)); len(fails) != 0 {
		t.Fatalf("failures %v, want none: conflicts are dead-lettered and acknowledged", fails)
	}
	if got := e.sqs.take(); len(got) != 0 {
		t.Fatalf("conflicting submissions sent %d tokens", len(got))
	}
	dl := e.sqs.deadLetters()
	if len(dl) != len(bad) {
		t.Fatalf("%d dead letters, want %d", len(dl), len(bad))
	}
	for _, m := range dl {
		src := aws.ToString(m.MessageAttributes[dispatch.AttrSourceMessageID].StringValue)
		reason := aws.ToString(m.MessageAttributes[dispatch.AttrReason].StringValue)
		field := "payload"
		if src == "other-kind" {
			field = "kind"
		}
		if aws.ToString(m.MessageBody) != bad[src] || !strings.Contains(reason, "id conflict") || !strings.Contains(reason, "another "+field) {
			t.Errorf("dead letter of %q: reason %q, body %s", src, reason, aws.ToString(m.MessageBody))
		}
	}
	if c1 := e.get(t, "c1"); c1.Kind != "k" || string(c1.Payload) != `{"n":1}` {
		t.Fatalf("the stored task changed: %s %s", c1.Kind, c1.Payload)
	}
}

func TestIntakeRejectsInvalidSubmissions(t *testing.T) {
	t.Parallel()
	e := setupUnit(t)
	secret := "p4yl0ad-s3cr3t"
	bad := map[string]string{
		"malformed":     `{"v":1,"kind":"k","payload":{"s":"` + secret + `"}`,
		"version":       `{"v":2,"kind":"k","payload":{"s":"` + secret + `"}}`,
		"no-kind":       `{"v":1,"payload":{"s":"` + secret + `"}}`,
		"oversize":      `{"v":1,"kind":"k","payload":"` + secret + strings.Repeat("x", lease.MaxPayloadBytes) + `"}`,
		"bad-run-at":    `{"v":1,"kind":"k","run_at":"next tuesday","payload":{"s":"` + secret + `"}}`,
		"unknown-field": `{"v":1,"kind":"k","priority":1}`,
		"bidi-id":       `{"v":1,"kind":"k","id":"a\u202eb"}`,
		"nul-id":        `{"v":1,"kind":"k","id":"a\u0000b"}`,
	}
	reasons := map[string]string{
		"malformed": "malformed", "version": "version 2", "no-kind": `"kind" is required`,
		"oversize": "payload is", "bad-run-at": "run_at", "unknown-field": `unknown field "priority"`,
		"bidi-id": `"id" contains U+202E`, "nul-id": `"id" contains U+0000`,
	}
	var msgs []message
	for id, body := range bad {
		msgs = append(msgs, message{id, body})
	}
	msgs = append(msgs, message{"good-1", `{"v":1,"kind":"k"}`}, message{"good-2", `{"v":1,"kind":"k"}`})
	if fails := e.intake(t, event(msgs...)); len(fails) != 0 {
		t.Fatalf("failures %v, want none: rejected submissions are acknowledged", fails)
	}
	if got := tokenIDs(e.sqs.take()); len(got) != 2 || got["good-1"] != 1 || got["good-2"] != 1 {
		t.Fatalf("tokens %v, want the two valid tasks", got)
	}
	dl := e.sqs.deadLetters()
	if len(dl) != len(bad) {
		t.Fatalf("%d dead letters, want %d", len(dl), len(bad))
	}
	for _, m := range dl {
		src := aws.ToString(m.MessageAttributes[dispatch.AttrSourceMessageID].StringValue)
		reason := aws.ToString(m.MessageAttributes[dispatch.AttrReason].StringValue)
		if aws.ToString(m.QueueUrl) != intakeDLQ || aws.ToString(m.MessageBody) != bad[src] {
			t.Errorf("dead letter of %q went to %s with another body", src, aws.ToString(m.QueueUrl))
		}
		if !strings.Contains(reason, reasons[src]) || strings.Contains(reason, secret) {
			t.Errorf("dead letter of %q: reason %q, want it to mention %q and not the payload", src, reason, reasons[src])
		}
		if _, err := e.store.Get(t.Context(), src); !errors.Is(err, lease.ErrNotFound) {
			t.Errorf("rejected submission %q made a task: %v", src, err)
		}
	}
	logs := e.logs.String()
	if strings.Contains(logs, secret) {
		t.Fatalf("the log holds a payload:\n%s", logs)
	}
	if strings.Count(logs, "submission rejected") != len(bad) {
		t.Fatalf("the log does not record every rejection:\n%s", logs)
	}
}

func TestIntakeRejectWithoutDeadLetterQueue(t *testing.T) {
	t.Parallel()
	e := setupUnit(t, func(c *dispatch.Config) { c.IntakeDLQURL = "" })
	fails := e.intake(t, event(message{"bad", `nope`}, message{"good", `{"v":1,"kind":"k"}`}))
	if !maps.Equal(fails, map[string]bool{"bad": true}) {
		t.Fatalf("failures %v, want the invalid one, left to the redrive policy", fails)
	}
}

func TestIntakeDeadLetterFailureRetries(t *testing.T) {
	t.Parallel()
	e := setupUnit(t)
	e.sqs.set(func(f *fakeSQS) { f.failDLQ = true })
	fails := e.intake(t, event(message{"bad", `{"v":1}`}, message{"good", `{"v":1,"kind":"k"}`}))
	if !maps.Equal(fails, map[string]bool{"bad": true}) {
		t.Fatalf("failures %v, want the one that could not be dead-lettered", fails)
	}
}

// failingStore refuses to create some ids.
type failingStore struct {
	*leasemem.Store
	fail map[string]bool
}

func (s failingStore) Create(ctx context.Context, n lease.NewTask) (lease.Task, error) {
	if s.fail[n.ID] {
		return lease.Task{}, fmt.Errorf("create %s: %w: throttled", n.ID, lease.ErrBackend)
	}
	return s.Store.Create(ctx, n)
}

func TestIntakeStoreFailureRetriesThatMessage(t *testing.T) {
	t.Parallel()
	e := setupUnit(t)
	d, err := dispatch.New(dispatch.Config{
		Store: failingStore{Store: e.store, fail: map[string]bool{"m2": true}}, SQS: e.sqs,
		WorkQueueURL: workQueue, IntakeDLQURL: intakeDLQ, Clock: e.clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := d.HandleIntake(t.Context(), event(message{"m1", `{"v":1,"kind":"k"}`}, message{"m2", `{"v":1,"kind":"k"}`}, message{"m3", `{"v":1,"kind":"k"}`}))
	if err != nil {
		t.Fatal(err)
	}
	if fails := failures(resp); !maps.Equal(fails, map[string]bool{"m2": true}) {
		t.Fatalf("failures %v, want m2", fails)
	}
	if got := tokenIDs(e.sqs.take()); len(got) != 2 || got["m2"] != 0 {
		t.Fatalf("tokens %v", got)
	}
	if len(e.sqs.deadLetters()) != 0 {
		t.Fatalf("a store failure was dead-lettered")
	}
}

func TestIntakePartialSendFailure(t *testing.T) {
	t.Parallel()
	e := setupUnit(t)
	var msgs []message
	for i := range 25 {
		msgs = append(msgs, message{fmt.Sprintf("m%02d", i), `{"v":1,"kind":"k"}`})
	}
	// Entries 3 and 7 are refused; the call carrying entry 12 (entries
	// 10..19) fails as a whole.
	e.sqs.set(func(f *fakeSQS) {
		f.failIDs["m03"], f.failIDs["m07"] = true, true
		f.failCall["m12"] = true
	})
	fails := e.intake(t, event(msgs...))
	want := map[string]bool{"m03": true, "m07": true}
	for i := 10; i < 20; i++ {
		want[fmt.Sprintf("m%02d", i)] = true
	}
	if !maps.Equal(fails, want) {
		t.Fatalf("failures %v\nwant %v", fails, want)
	}
	if got := tokenIDs(e.sqs.take()); len(got) != 25-len(want) {
		t.Fatalf("%d tokens sent, want %d", len(got), 25-len(want))
	}

	// Redelivered, the failed ones are duplicates that still get tokens.
	e.sqs.set(func(f *fakeSQS) { clear(f.failIDs); clear(f.failCall) })
	var again []message
	for _, m := range msgs {
		if want[m.id] {
			again = append(again, m)
		}
	}
	if fails := e.intake(t, event(again...)); len(fails) != 0 {
		t.Fatalf("failures on redelivery: %v", fails)
	}
	if got := tokenIDs(e.sqs.take()); len(got) != len(want) {
		t.Fatalf("%d tokens on redelivery, want %d", len(got), len(want))
	}
}

func TestIntakeCancelledContextFailsTheRest(t *testing.T) {
	t.Parallel()
	e := setupUnit(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	resp, err := e.d.HandleIntake(ctx, event(message{"m1", `{"v":1,"kind":"k"}`}, message{"m2", `{"v":1,"kind":"k"}`}))
	if err != nil {
		t.Fatal(err)
	}
	if fails := failures(resp); len(fails) != 2 {
		t.Fatalf("failures %v, want both", fails)
	}
}

// A submission with a queue goes to that queue; one naming a queue that does
// not exist is rejected to the intake DLQ with the reason, and stores
// nothing.
func TestIntakeQueue(t *testing.T) {
	t.Parallel()
	const imagesURL = "http://sqs.test/000000000000/images"
	e := setupUnit(t, func(c *dispatch.Config) { c.Queues = fakeQueues{"images": imagesURL} })
	fails := e.intake(t, event(
		message{"m1", `{"v":1,"kind":"resize","id":"to-images","queue":"images"}`},
		message{"m2", `{"v":1,"kind":"resize","id":"to-nowhere","queue":"deleted"}`},
		message{"m3", `{"v":1,"kind":"resize","id":"to-default"}`},
	))
	if len(fails) != 0 {
		t.Fatalf("failures %v, want none", fails)
	}
	if got := e.get(t, "to-images"); got.Queue != "images" {
		t.Fatalf("stored queue %q, want images", got.Queue)
	}
	if _, err := e.store.Get(t.Context(), "to-nowhere"); !errors.Is(err, lease.ErrNotFound) {
		t.Fatalf("a submission on a missing queue was stored: %v", err)
	}
	got := map[string]string{}
	for _, tk := range e.sqs.take() {
		got[tk.ID] = tk.Queue
	}
	if want := map[string]string{"to-images": imagesURL, "to-default": workQueue}; !maps.Equal(got, want) {
		t.Fatalf("tokens went to %v, want %v", got, want)
	}
	dead := e.sqs.deadLetters()
	if len(dead) != 1 || !strings.Contains(aws.ToString(dead[0].MessageAttributes["leasehold-reason"].StringValue), "queue not found") {
		t.Fatalf("dead letters %+v, want the submission on a missing queue with its reason", dead)
	}
}
