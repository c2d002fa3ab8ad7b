package token_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/token"
)

// The message form decodes with its workflow, topic and message id, and
// is refused with the reason when it mixes in another form's fields or
// lacks its own.
func TestMessageForm(t *testing.T) {
	t.Parallel()
	body, err := token.Message("wf-1", "orders", "m-1", []byte(`{"n":1}`))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := token.Decode(body)
	if err != nil || !tok.IsMessage() || tok.To.Workflow != "wf-1" || tok.To.Topic != "orders" || tok.To.MessageID != "m-1" || string(tok.Payload) != `{"n":1}` {
		t.Fatalf("Decode(%s) = %+v, %v; want the message form", body, tok, err)
	}
	if tok, err := token.Decode(`{"v":1,"send":"wf-1","topic":"orders","payload":2}`); err != nil || tok.To.MessageID != "" {
		t.Fatalf("a message without message_id = %+v, %v; want it accepted", tok, err)
	}
	for name, c := range map[string]struct{ body, why string }{
		"no payload":      {`{"v":1,"send":"wf","topic":"t"}`, `needs "payload"`},
		"no topic":        {`{"v":1,"send":"wf","payload":1}`, `"topic"`},
		"bad topic":       {`{"v":1,"send":"wf","topic":"a b","payload":1}`, `"topic"`},
		"no send":         {`{"v":1,"topic":"t","payload":1}`, `need "send"`},
		"with a kind":     {`{"v":1,"send":"wf","topic":"t","kind":"k","payload":1}`, `has only`},
		"with a callback": {`{"v":1,"send":"wf","topic":"t","callback":"lhcb1.x","payload":1}`, `has only`},
		"bad message id":  {`{"v":1,"send":"wf","topic":"t","message_id":"a b","payload":1}`, `"message_id"`},
		"over the limit":  {`{"v":1,"send":"wf","topic":"t","payload":"` + strings.Repeat("x", 33<<10) + `"}`, `the limit is 32768`},
	} {
		_, err := token.Decode(c.body)
		var te *token.Error
		if !errors.As(err, &te) || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%s: Decode = %v, want a token error saying %s", name, err, c.why)
		}
	}
}
