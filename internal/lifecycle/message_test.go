package lifecycle_test

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lifecycle"
	"github.com/leasehold/leasehold/internal/token"
)

// TestMessageFormPutsItInTheInbox: the message form of a token puts its
// payload in the workflow's inbox once per message id and acknowledges
// the message; a redelivery is the same message; a message to a workflow
// that does not exist is dead-lettered with the reason, never dropped.
func TestMessageFormPutsItInTheInbox(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := t.Context()
	if _, err := e.store.Create(ctx, lease.NewTask{ID: "wf", Kind: "flow", MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	body, err := token.Message("wf", "orders", "m-1", []byte(`{"n":1}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "a-again"} {
		res := e.exec.Process(ctx, nil, msg(id, body))
		if !res.Ack || res.Final != lifecycle.StateExited || res.Reason != "" {
			t.Fatalf("delivery %s: %+v, want acknowledged", id, res)
		}
	}
	got, err := e.store.GetMessage(ctx, "wf", "orders", 1)
	if err != nil || string(got.Payload) != `{"n":1}` || got.ID != "m-1" {
		t.Fatalf("the inbox's first message: %+v (%v)", got, err)
	}
	if _, err := e.store.GetMessage(ctx, "wf", "orders", 2); err == nil {
		t.Error("a redelivery of the message was put in the inbox a second time")
	}

	body, err = token.Message("nobody", "orders", "m-2", []byte(`{"n":2}`))
	if err != nil {
		t.Fatal(err)
	}
	res := e.exec.Process(ctx, nil, msg("b", body))
	if !res.Ack || !strings.Contains(res.Reason, "message to a workflow rejected") {
		t.Fatalf("a message to no workflow: %+v, want rejected with the reason", res)
	}
	if dead := e.sqs.sentTo(dlqURL); len(dead) != 1 || !strings.Contains(aws.ToString(dead[0].MessageBody), `"send":"nobody"`) {
		t.Fatalf("dead letters %+v, want the message to no workflow", dead)
	}
}
