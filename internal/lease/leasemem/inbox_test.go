package leasemem_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/inbox"
	"github.com/leasehold/leasehold/internal/lease/leasemem"
)

// The unread bound: the sender is refused at inbox.MaxUnread, and a take
// makes room again. (Not in the conformance suite: a thousand sends take a
// minute against the local DynamoDB; both stores check the bound with
// inbox.State.Admit on the state they read.)
func TestInboxFull(t *testing.T) {
	t.Parallel()
	s := leasemem.New(lease.Options{})
	ctx := t.Context()
	if _, err := s.Create(ctx, lease.NewTask{ID: "wf", Kind: "k", Payload: []byte(`1`), MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	send := func(topic, id string) error {
		_, _, err := s.Send(ctx, inbox.Message{Task: "wf", Topic: topic, ID: id, Payload: []byte(`1`)})
		return err
	}
	for i := range inbox.MaxUnread {
		if err := send("t", fmt.Sprintf("m%d", i)); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	if err := send("u", "over"); !errors.Is(err, inbox.ErrFull) {
		t.Fatalf("Send past %d unread = %v, want ErrFull", inbox.MaxUnread, err)
	}
	if err := s.Take(ctx, "wf", "t", 1); err != nil {
		t.Fatal(err)
	}
	if err := send("u", "over"); err != nil {
		t.Fatalf("Send after a take: %v", err)
	}
}
