package leasehold_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/workflow"
)

// TestInboxReadsAreBounded: Client.Inbox counts every topic from the
// inbox's state item, reads at most max waiting messages (in topic order,
// then by number) and the values of at most max events, and with max 0
// reads neither: the events' keys alone, from the task's steps.
func TestInboxReadsAreBounded(t *testing.T) {
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "pub", func(ctx context.Context, _ *leasehold.Task[json.RawMessage]) (any, error) {
		for _, key := range []string{"a", "b", "a"} { // a set twice: one key
			if err := workflow.SetEvent(ctx, key, key+"!"); err != nil {
				return nil, err
			}
		}
		_, _, err := workflow.Receive[int](ctx, "never", 0)
		if err != nil {
			return nil, err
		}
		_, _, err = workflow.Receive[int](ctx, "late", 24*time.Hour)
		return nil, err
	})
	env := leaseholdtest.New(t, hs)
	if _, err := env.Enqueue(leasehold.Submission{Kind: "pub", ID: "pub-1"}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		for _, topic := range []string{"y", "x"} {
			if _, err := env.Send("pub-1", topic, fmt.Sprint(topic, i), i); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := env.Run(); err != nil {
		t.Fatal(err)
	}
	c := env.Client()
	task, err := c.Get(t.Context(), "pub-1")
	if err != nil {
		t.Fatal(err)
	}
	if task.Inbox != nil {
		t.Fatal("Get filled the inbox")
	}
	got, err := c.Inbox(t.Context(), task, 4)
	if err != nil {
		t.Fatal(err)
	}
	ib := got.Inbox
	if fmt.Sprint(ib.Topics) != "[{x 0 3} {y 0 3}]" || ib.ReceivingOn != "late" {
		t.Errorf("topics %v, receiving on %q; want x and y with 3 waiting each, receiving on late", ib.Topics, ib.ReceivingOn)
	}
	var read []string
	for _, m := range ib.Messages {
		read = append(read, fmt.Sprint(m.Topic, m.Seq, "=", string(m.Payload)))
	}
	if fmt.Sprint(read) != "[x1=0 x2=1 x3=2 y1=0]" || !ib.More {
		t.Errorf("messages read %v, more %v; want x's three and y's first, and more", read, ib.More)
	}
	if len(ib.Events) != 2 || ib.Events[0].Key != "a" || string(ib.Events[0].Value) != `"a!"` || ib.Events[1].Key != "b" || !ib.Events[1].Read || ib.EventsNotRead != 0 {
		t.Errorf("events %+v (%d not read); want a and b, both read, a's last value", ib.Events, ib.EventsNotRead)
	}
	if got, err = c.Inbox(t.Context(), task, 0); err != nil {
		t.Fatal(err)
	}
	if ib := got.Inbox; len(ib.Topics) != 2 || len(ib.Messages) != 0 || !ib.More || len(ib.Events) != 2 || ib.Events[0].Read || ib.EventsNotRead != 2 {
		t.Errorf("with max 0: %+v; want the counts, no message or event read", ib)
	}
}
