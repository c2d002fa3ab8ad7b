package lifecycle_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lifecycle"
)

// An inline token whose id names a stored task of another kind or payload
// is a conflict: it goes to the dead-letter queue saying so, and the stored
// task neither runs for it nor changes. A redelivery of the same token (same
// id, kind and payload) is a duplicate and runs nothing twice.
func TestInlineIDConflictIsDeadLettered(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ran := 0
	e.handlers["ok"] = func(context.Context, lease.Task) ([]byte, error) { ran++; return []byte(`1`), nil }
	e.handlers["other"] = e.handlers["ok"]
	first := inline(t, "ok", "c1", `{"n":1}`, 0)
	if r := e.exec.Process(t.Context(), nil, msg("m1", first)); !r.Ack || r.Outcome != lifecycle.OutcomeSucceeded {
		t.Fatalf("first token: %+v", r)
	}
	if r := e.exec.Process(t.Context(), nil, msg("m2", inline(t, "ok", "c1", ` { "n" : 1 } `, 0))); !r.Ack || r.Reason != "" {
		t.Fatalf("duplicate token: %+v, want acknowledged as a duplicate", r)
	}
	conflicts := map[string]string{
		inline(t, "ok", "c1", `{"n":2}`, 0):    "another payload",
		inline(t, "other", "c1", `{"n":1}`, 0): "another kind",
		inline(t, "ok", "c1", "", 0):           "another payload",
	}
	for body, want := range conflicts {
		r := e.exec.Process(t.Context(), nil, msg("m-"+want, body))
		if !r.Ack || !strings.Contains(r.Reason, "id conflict") || !strings.Contains(r.Reason, want) {
			t.Errorf("%s: %+v, want acknowledged with an id conflict reason", body, r)
		}
	}
	dead := e.sqs.sentTo(dlqURL)
	if len(dead) != len(conflicts) {
		t.Fatalf("%d dead letters, want %d", len(dead), len(conflicts))
	}
	for _, d := range dead {
		want, ok := conflicts[aws.ToString(d.MessageBody)]
		reason := aws.ToString(d.MessageAttributes[lifecycle.AttrReason].StringValue)
		if !ok || !strings.Contains(reason, "id conflict") || !strings.Contains(reason, want) {
			t.Errorf("dead letter %s: reason %q", aws.ToString(d.MessageBody), reason)
		}
	}
	if got := e.get(t, "c1"); ran != 1 || got.Kind != "ok" || string(got.Payload) != `{"n":1}` || got.Status != lease.StatusSucceeded {
		t.Fatalf("handler ran %d times; stored task %s %s %s", ran, got.Kind, got.Payload, got.Status)
	}
}
