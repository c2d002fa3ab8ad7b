package leasetest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/inbox"
)

// send sends payload on topic to task under the message id msg and
// returns the message as placed.
func (a *adminEnv) send(task, topic, msg, payload string) (inbox.Message, bool) {
	a.t.Helper()
	got, waiting, err := a.admin.Send(a.ctx, inbox.Message{Task: task, Topic: topic, ID: msg, Payload: []byte(payload)})
	if err != nil {
		a.t.Fatalf("Send(%s, %s, %s): %v", task, topic, msg, err)
	}
	return got, waiting
}

// Messages of a topic are numbered from 1 in send order, per topic; a
// message id sent again places nothing and returns the first placement;
// each message reads back by its number.
func testInboxNumbersPerTopicOnce(t *testing.T, a *adminEnv) {
	task := a.create(a.newTask())
	for i, topic := range []string{"orders", "orders", "notes", "orders"} {
		m, waiting := a.send(task.ID, topic, fmt.Sprintf("m%d", i), fmt.Sprintf(`{"i":%d}`, i))
		want := map[int]int64{0: 1, 1: 2, 2: 1, 3: 3}[i]
		if m.Seq != want || waiting || !m.SentAt.Equal(a.now()) {
			t.Fatalf("message %d on %s = seq %d (waiting %v, at %v), want seq %d at %v, nobody waiting", i, topic, m.Seq, waiting, m.SentAt, want, a.now())
		}
	}
	dup, _, err := a.admin.Send(a.ctx, inbox.Message{Task: task.ID, Topic: "orders", ID: "m1", Payload: []byte(`{"i":99}`)})
	if !errors.Is(err, inbox.ErrDuplicate) || dup.Seq != 2 || string(dup.Payload) != `{"i":1}` {
		t.Fatalf("Send of m1 again = %+v, %v; want the first placement (seq 2) and ErrDuplicate", dup, err)
	}
	for seq, want := range map[int64]string{1: `{"i":0}`, 2: `{"i":1}`, 3: `{"i":3}`} {
		m, err := a.admin.GetMessage(a.ctx, task.ID, "orders", seq)
		if err != nil || string(m.Payload) != want || m.Seq != seq || m.Topic != "orders" {
			t.Fatalf("GetMessage(orders, %d) = %+v, %v; want %s", seq, m, err, want)
		}
	}
	if _, err := a.admin.GetMessage(a.ctx, task.ID, "orders", 4); !errors.Is(err, lease.ErrNotFound) {
		t.Fatalf("GetMessage(orders, 4) = %v, want ErrNotFound", err)
	}
	st, err := a.admin.GetState(a.ctx, task.ID)
	if err != nil || st.Last["orders"] != 3 || st.Last["notes"] != 1 || st.Unread() != 4 {
		t.Fatalf("GetState = %+v, %v; want orders at 3, notes at 1, 4 unread", st, err)
	}
	if got := a.listAll(lease.StatusPending, 10); len(got) != 1 {
		t.Errorf("List of a table with one task and its inbox = %d items, want 1", len(got))
	}
}

// Concurrent senders to one topic take every number once, with no gap.
func testInboxConcurrentSenders(t *testing.T, a *adminEnv) {
	task := a.create(a.newTask())
	const n = 8
	seqs := make([]int64, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			m, _, err := a.admin.Send(a.ctx, inbox.Message{Task: task.ID, Topic: "t", ID: fmt.Sprintf("c%d", i), Payload: []byte(`1`)})
			if err != nil {
				t.Errorf("Send %d: %v", i, err)
			}
			seqs[i] = m.Seq
		})
	}
	wg.Wait()
	seen := map[int64]bool{}
	for _, s := range seqs {
		if s < 1 || s > n || seen[s] {
			t.Fatalf("concurrent sends took %v, want each of 1..%d once", seqs, n)
		}
		seen[s] = true
	}
}

// A receiver's wait is seen by the next send on its topic; a take clears
// it and counts the messages received; Wake makes a PENDING task due now,
// once.
func testInboxWaitTakeWake(t *testing.T, a *adminEnv) {
	n := a.newTask()
	n.RunAt = a.now().Add(time.Hour)
	task := a.create(n)
	if err := a.admin.Await(a.ctx, task.ID, "t"); err != nil {
		t.Fatalf("Await: %v", err)
	}
	if _, waiting := a.send(task.ID, "other", "o1", `1`); waiting {
		t.Fatalf("a send on another topic saw a receiver waiting")
	}
	m, waiting := a.send(task.ID, "t", "t1", `1`)
	if !waiting {
		t.Fatalf("a send on the awaited topic saw nobody waiting")
	}
	if _, again, err := a.admin.Send(a.ctx, inbox.Message{Task: task.ID, Topic: "t", ID: "t1", Payload: []byte(`1`)}); !errors.Is(err, inbox.ErrDuplicate) || !again {
		t.Fatalf("a duplicate send = waiting %v, %v; want the receiver still seen and ErrDuplicate", again, err)
	}
	woke, status, err := a.admin.Wake(a.ctx, task.ID)
	if err != nil || !woke || status != lease.StatusPending {
		t.Fatalf("Wake = %v, %s, %v; want true", woke, status, err)
	}
	got, err := a.store.Get(a.ctx, task.ID)
	if err != nil || !got.RunAt.Equal(a.now()) || got.Status != lease.StatusPending {
		t.Fatalf("after Wake the task is %+v, %v; want PENDING due now", got, err)
	}
	a.clock.Advance(time.Second) // (within its millisecond, a wake is taken for its own retried write)
	if woke, status, err := a.admin.Wake(a.ctx, task.ID); err != nil || woke || status != lease.StatusPending {
		t.Fatalf("second Wake = %v, %s, %v; want false (due already), PENDING", woke, status, err)
	}
	running := a.claim(got, "w1")
	if woke, status, err := a.admin.Wake(a.ctx, running.ID); err != nil || woke || status != lease.StatusRunning {
		t.Fatalf("Wake of a running task = %v, %s, %v; want false, RUNNING (the caller tries again)", woke, status, err)
	}
	if err := a.admin.Take(a.ctx, task.ID, "t", m.Seq); err != nil {
		t.Fatalf("Take: %v", err)
	}
	if err := a.admin.Take(a.ctx, task.ID, "t", 0); err != nil {
		t.Fatalf("Take of an earlier seq: %v", err)
	}
	st, err := a.admin.GetState(a.ctx, task.ID)
	if err != nil || st.Waiting != "" || st.Taken["t"] != 1 || st.Unread() != 1 {
		t.Fatalf("GetState after Take = %+v, %v; want nobody waiting, t taken to 1, 1 unread", st, err)
	}
	if woke, status, err := a.admin.Wake(a.ctx, a.id()); err != nil || woke || status != "" {
		t.Fatalf("Wake of no task = %v, %q, %v; want false, no status", woke, status, err)
	}
}

// A receiver racing receives waits on several topics at once (joined by
// commas): a send on any of them sees it waiting, a send on another
// topic does not (nor on a topic that a listed one merely starts with);
// a wait on the topics left replaces it; a take clears it.
func testInboxWaitOnTopics(t *testing.T, a *adminEnv) {
	task := a.create(a.newTask())
	if err := a.admin.Await(a.ctx, task.ID, "orders,notes"); err != nil {
		t.Fatalf("Await: %v", err)
	}
	for _, c := range []struct {
		topic string
		want  bool
	}{{"other", false}, {"order", false}, {"notes", true}, {"orders", true}} {
		if _, waiting := a.send(task.ID, c.topic, "m-"+c.topic, `1`); waiting != c.want {
			t.Fatalf("a send on %q saw a receiver waiting: %v, want %v", c.topic, waiting, c.want)
		}
	}
	if _, again, err := a.admin.Send(a.ctx, inbox.Message{Task: task.ID, Topic: "notes", ID: "m-notes", Payload: []byte(`1`)}); !errors.Is(err, inbox.ErrDuplicate) || !again {
		t.Fatalf("a duplicate send on a listed topic = waiting %v, %v; want the receiver still seen and ErrDuplicate", again, err)
	}
	if err := a.admin.Await(a.ctx, task.ID, "notes"); err != nil {
		t.Fatalf("Await of the topics left: %v", err)
	}
	if _, waiting := a.send(task.ID, "orders", "m-orders-2", `2`); waiting {
		t.Fatalf("a send on a topic no longer awaited saw a receiver waiting")
	}
	if err := a.admin.Take(a.ctx, task.ID, "notes", 1); err != nil {
		t.Fatalf("Take: %v", err)
	}
	if st, err := a.admin.GetState(a.ctx, task.ID); err != nil || st.Waiting != "" {
		t.Fatalf("GetState after Take = %+v, %v; want nobody waiting", st, err)
	}
}

// Sends that cannot be placed are refused with the reason: an unknown or
// ended task, a full inbox, too many topics, an invalid or over-size
// message.
func testInboxRefusals(t *testing.T, a *adminEnv) {
	if _, _, err := a.admin.Send(a.ctx, inbox.Message{Task: a.id(), Topic: "t", ID: "x", Payload: []byte(`1`)}); !errors.Is(err, lease.ErrNotFound) {
		t.Fatalf("Send to no task = %v, want ErrNotFound", err)
	}
	ended := a.finish(a.claim(a.create(a.newTask()), "w1"), []byte(`"done"`))
	if _, _, err := a.admin.Send(a.ctx, inbox.Message{Task: ended.ID, Topic: "t", ID: "x", Payload: []byte(`1`)}); !errors.Is(err, inbox.ErrEnded) {
		t.Fatalf("Send to an ended task = %v, want ErrEnded", err)
	}
	task := a.create(a.newTask())
	for name, m := range map[string]inbox.Message{
		"bad topic":   {Task: task.ID, Topic: "1x", ID: "x", Payload: []byte(`1`)},
		"no id":       {Task: task.ID, Topic: "t", Payload: []byte(`1`)},
		"id with tab": {Task: task.ID, Topic: "t", ID: "a\tb", Payload: []byte(`1`)},
	} {
		if _, _, err := a.admin.Send(a.ctx, m); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("Send(%s) = %v, want ErrInvalid", name, err)
		}
	}
	big := inbox.Message{Task: task.ID, Topic: "t", ID: "big", Payload: []byte(`"` + strings.Repeat("x", inbox.MaxMessageBytes-1) + `"`)}
	var tl *lease.TooLargeError
	if _, _, err := a.admin.Send(a.ctx, big); !errors.As(err, &tl) || tl.Limit != inbox.MaxMessageBytes {
		t.Fatalf("Send of %d bytes = %v, want a TooLargeError at %d", len(big.Payload), err, inbox.MaxMessageBytes)
	}
	big.Payload = big.Payload[2:]
	if _, _, err := a.admin.Send(a.ctx, big); err != nil {
		t.Fatalf("Send of %d bytes (the limit): %v", len(big.Payload), err)
	}
	if _, err := a.admin.GetMessage(a.ctx, task.ID, "t", 1); err != nil {
		t.Fatalf("GetMessage of the largest message: %v", err)
	}
	for i := range inbox.MaxTopics - 1 {
		a.send(task.ID, fmt.Sprintf("t%d", i), fmt.Sprintf("topic%d", i), `1`)
	}
	if _, _, err := a.admin.Send(a.ctx, inbox.Message{Task: task.ID, Topic: "onemore", ID: "y", Payload: []byte(`1`)}); !errors.Is(err, lease.ErrInvalid) {
		t.Fatalf("Send on topic %d = %v, want ErrInvalid", inbox.MaxTopics+1, err)
	}
}

// Events: set, read back, replaced; an unset key is ErrNotFound; an
// over-size value is refused.
func testEvents(t *testing.T, a *adminEnv) {
	task := a.create(a.newTask())
	if _, err := a.admin.GetEvent(a.ctx, task.ID, "progress"); !errors.Is(err, lease.ErrNotFound) {
		t.Fatalf("GetEvent before any = %v, want ErrNotFound", err)
	}
	for _, v := range []string{`1`, `2`} {
		if err := a.admin.SetEvent(a.ctx, inbox.Event{Task: task.ID, Key: "progress", Value: []byte(v)}); err != nil {
			t.Fatalf("SetEvent(%s): %v", v, err)
		}
		got, err := a.admin.GetEvent(a.ctx, task.ID, "progress")
		if err != nil || string(got.Value) != v || !got.SetAt.Equal(a.now()) || got.Key != "progress" {
			t.Fatalf("GetEvent = %+v, %v; want %s at %v", got, err, v, a.now())
		}
	}
	var tl *lease.TooLargeError
	big := inbox.Event{Task: task.ID, Key: "big", Value: make([]byte, inbox.MaxEventBytes+1)}
	if err := a.admin.SetEvent(a.ctx, big); !errors.As(err, &tl) {
		t.Fatalf("SetEvent over the limit = %v, want a TooLargeError", err)
	}
	if err := a.admin.SetEvent(a.ctx, inbox.Event{Task: task.ID, Key: "", Value: []byte(`1`)}); !errors.Is(err, lease.ErrInvalid) {
		t.Fatalf("SetEvent with no key = %v, want ErrInvalid", err)
	}
}
