package leasehold_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lifecycle"
	"github.com/leasehold/leasehold/workflow"
)

// TestMessagesOnTheStack (issue 37, point 6): a workflow receives four
// messages on one topic, sent by Client.Send and by plain SQS messages on
// the work queue (one of them twice, under one message id), in send order,
// each once; it publishes its progress as an event that Client.GetEvent
// reads; once it has ended, the client's send is refused and the SQS
// form is dead-lettered with the reason, and Client.Inbox counts the four
// delivered and reads the event.
func TestMessagesOnTheStack(t *testing.T) {
	t.Parallel()
	e := setupStack(t)
	c := newClientOn(t, e)
	var mu sync.Mutex
	runs := map[string]int{}
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "inbox", func(ctx context.Context, _ *leasehold.Task[any]) (string, error) {
		var got []string
		for i := range 4 {
			n, ok, err := workflow.Receive[int](ctx, "orders", 10*time.Minute)
			if err != nil {
				return "", err
			}
			if !ok {
				return "", leasehold.Fail(errors.New("no message within 10 minutes"))
			}
			name := fmt.Sprintf("handle-%d", i)
			if _, err := workflow.Step(ctx, name, func(context.Context) (int, error) {
				mu.Lock()
				defer mu.Unlock()
				runs[name]++
				return n, nil
			}); err != nil {
				return "", err
			}
			got = append(got, fmt.Sprint(n))
			if err := workflow.SetEvent(ctx, "received", len(got)); err != nil {
				return "", err
			}
		}
		return strings.Join(got, ","), nil
	})
	w := e.worker(t, leasehold.WorkerConfig{Handlers: hs})
	ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(3*time.Minute))
	defer cancel()
	const id = "receiver"
	if _, err := c.Enqueue(ctx, leasehold.Submission{Kind: "inbox", ID: id}); err != nil {
		t.Fatal(err)
	}
	placed := func(n int64) func() bool {
		return func() bool {
			st, err := e.store.GetState(ctx, id)
			return err == nil && st.Last["orders"] == n
		}
	}
	received := func(n int) func() bool {
		return func() bool { return strings.Count(stepNames(e.get(t, id)), "handle-") == n }
	}
	// The workflow waits: its first receive found nothing.
	e.pump(t, w, 60*time.Second, func() bool {
		st, err := e.store.GetState(ctx, id)
		return err == nil && st.Waiting == "orders" && e.status(t, id) == lease.StatusPending
	})
	if seq, err := c.Send(ctx, id, "orders", 1); err != nil || seq != 1 {
		t.Fatalf("Send(1) = %d, %v; want seq 1", seq, err)
	}
	e.pump(t, w, 60*time.Second, received(1)) // woken by the send
	e.send(t, e.queues.Work, fmt.Sprintf(`{"v":1,"send":%q,"topic":"orders","payload":2}`, id))
	e.pump(t, w, 60*time.Second, placed(2))
	if seq, err := c.SendOnce(ctx, id, "orders", "third", 3); err != nil || seq != 3 {
		t.Fatalf("SendOnce(3) = %d, %v; want seq 3", seq, err)
	}
	if seq, err := c.SendOnce(ctx, id, "orders", "third", 3); err != nil || seq != 3 {
		t.Fatalf("SendOnce(3) again = %d, %v; want seq 3, sent once", seq, err)
	}
	fourth := fmt.Sprintf(`{"v":1,"send":%q,"topic":"orders","message_id":"fourth","payload":4}`, id)
	e.send(t, e.queues.Work, fourth)
	e.send(t, e.queues.Work, fourth)
	if v, err := c.GetEvent(ctx, id, "received", awstest.Scale(time.Minute)); err != nil || len(v) == 0 {
		t.Fatalf("GetEvent = %s, %v; want the workflow's progress", v, err)
	}
	e.pump(t, w, 90*time.Second, func() bool { return e.status(t, id) == lease.StatusSucceeded })
	got := e.get(t, id)
	if string(got.Result) != `"1,2,3,4"` {
		t.Fatalf("the workflow's result: %s (%s), want 1,2,3,4", got.Result, got.Error)
	}
	for i := range 4 {
		if n := runs[fmt.Sprintf("handle-%d", i)]; n != 1 {
			t.Errorf("handle-%d ran %d times, want once", i, n)
		}
	}
	if v, err := c.GetEvent(ctx, id, "received", 0); err != nil || string(v) != "4" {
		t.Fatalf("GetEvent at the end = %s, %v; want 4", v, err)
	}
	// Ended: the client is refused; the SQS form is dead-lettered with
	// the reason, and the duplicate placed nothing.
	if _, err := c.Send(ctx, id, "orders", 5); !errors.Is(err, leasehold.ErrFinished) {
		t.Fatalf("Send to the ended workflow = %v, want ErrFinished", err)
	}
	late := fmt.Sprintf(`{"v":1,"send":%q,"topic":"orders","payload":5}`, id)
	e.send(t, e.queues.Work, late)
	for deadline := time.Now().Add(awstest.Scale(60 * time.Second)); ; {
		if time.Now().After(deadline) {
			t.Fatal("the message to the ended workflow was not dead-lettered")
		}
		if ev := e.receive(t, e.queues.Work, 10, time.Second, 30); len(ev.Records) > 0 {
			e.deliver(t, w, t.Context(), ev)
		}
		found := false
		for _, m := range e.receive(t, e.queues.WorkDLQ, 10, time.Second, 30).Records {
			r := m.MessageAttributes[lifecycle.AttrReason].StringValue
			if m.Body == late {
				if r == nil || !strings.Contains(*r, "has ended") {
					t.Fatalf("dead-lettered with %v, want the workflow's end", r)
				}
				found = true
			}
		}
		if found {
			break
		}
	}
	if st, err := e.store.GetState(ctx, id); err != nil || st.Last["orders"] != 4 || st.Unread() != 0 {
		t.Fatalf("the inbox at the end: %+v, %v; want 4 placed, none unread", st, err)
	}
	// What the inspector and leasehold status show of it: Client.Inbox.
	info, err := c.Get(ctx, id)
	if err == nil {
		info, err = c.Inbox(ctx, info, 5)
	}
	switch ib := info.Inbox; {
	case err != nil || ib == nil:
		t.Fatalf("Inbox: %v", err)
	case len(ib.Topics) != 1 || ib.Topics[0].Topic != "orders" || ib.Topics[0].Delivered != 4 || ib.Topics[0].Waiting != 0 || len(ib.Messages) != 0 || ib.More:
		t.Fatalf("Inbox's topics %+v and messages %+v, want orders: 4 delivered, none waiting", ib.Topics, ib.Messages)
	case len(ib.Events) != 1 || ib.Events[0].Key != "received" || !ib.Events[0].Read || string(ib.Events[0].Value) != "4" || ib.Events[0].SetAt.IsZero():
		t.Fatalf("Inbox's events %+v, want received = 4", ib.Events)
	}
}

// stepNames joins the names of t's recorded steps.
func stepNames(t lease.Task) string {
	names := make([]string, len(t.Steps))
	for i, s := range t.Steps {
		names[i] = s.Name
	}
	return strings.Join(names, " ")
}
