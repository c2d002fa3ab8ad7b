package token

import (
	"encoding/json"
	"fmt"

	"github.com/leasehold/leasehold/internal/lease/inbox"
)

// ToWorkflow is where the message form sends its payload: the workflow's
// id ("send" on the wire), the topic, and the message id ("message_id";
// empty: the SQS message's id names it).
type ToWorkflow struct {
	Workflow, Topic, MessageID string
}

// IsMessage reports whether the token is the message form: a message to a
// running workflow (docs/workflows.md, "Messages and events").
func (t Token) IsMessage() bool { return t.To != nil }

// validateMessage checks the message form: "v", "send", "topic",
// "payload", and optionally "message_id" and "md"; nothing else.
func (t Token) validateMessage() error {
	switch {
	case t.ID != "" || t.Kind != "" || t.MaxAttempts != 0 || t.Queue != "" || t.CreateToken != "" || t.Parent != "" ||
		len(t.After) > 0 || t.AfterAny || t.WaitTimeout != 0 || t.Callback != "" || t.Result != nil || t.HasError || t.Wake ||
		len(t.Then) > 0 || t.Prev != "":
		return &Error{Reason: ErrInvalidField, Detail: `a message to a workflow has only "v", "send", "topic", "payload", "message_id" and "md"`}
	case t.Payload == nil:
		return &Error{Reason: ErrMissingField, Detail: `a message to a workflow needs "payload"`}
	case len(t.Payload) > inbox.MaxMessageBytes:
		return &Error{Reason: ErrPayloadTooBig, Detail: fmt.Sprintf("message is %d bytes, the limit is %d", len(t.Payload), inbox.MaxMessageBytes)}
	}
	if t.To.Workflow == "" {
		return &Error{Reason: ErrMissingField, Detail: `"topic" and "message_id" need "send" (the workflow's id)`}
	}
	if err := checkID(t.To.Workflow); err != nil {
		return &Error{Reason: ErrInvalidField, Detail: `"send": ` + err.(*Error).Detail}
	}
	if err := inbox.CheckName("topic", t.To.Topic); err != nil {
		return &Error{Reason: ErrInvalidField, Detail: `"topic": ` + err.Error()}
	}
	if t.To.MessageID != "" {
		m := inbox.Message{Task: t.To.Workflow, Topic: t.To.Topic, ID: t.To.MessageID}
		if err := m.Check(); err != nil {
			return &Error{Reason: ErrInvalidField, Detail: `"message_id": ` + err.Error()}
		}
	}
	return nil
}

// Message encodes the message form: payload sent to workflow on topic
// under messageID ("" lets the SQS message's id name it).
func Message(workflow, topic, messageID string, payload json.RawMessage) (string, error) {
	v := Version
	b, err := json.Marshal(wire{V: &v, Send: workflow, Topic: topic, MessageID: messageID, Payload: payload})
	return string(b), err
}
