package leaseholdtest

import (
	"encoding/json"
	"fmt"

	"github.com/leasehold/leasehold/internal/lease"
)

// Send sends payload to workflow id on topic, as leasehold.Client.Send
// does, under the message id messageID (a second Send of the same id sends
// nothing): workflow.Receive takes it at the next Run. It returns the
// message's number in its topic. A workflow that sleeps in a receive on the
// topic is woken.
//
// Run does not advance the clock for a workflow that waits for a message
// alone, as it does not for a callback: it stops, and the test sends the
// message (or advances the clock past the receive's timeout) and calls Run
// again.
func (e *Env) Send(id, topic, messageID string, payload any) (int64, error) {
	if err := e.usable(); err != nil {
		return 0, err
	}
	return e.Client().SendOnce(e.ctx, id, topic, messageID, payload)
}

// GetEvent returns the value workflow id set last under key
// (workflow.SetEvent), without waiting: an event not set gives an error
// matching leasehold.ErrNotFound.
func (e *Env) GetEvent(id, key string) (json.RawMessage, error) {
	if err := e.usable(); err != nil {
		return nil, err
	}
	ev, err := e.store.GetEvent(e.ctx, id, key)
	if err != nil {
		return nil, fmt.Errorf("leaseholdtest: %w", err)
	}
	return json.RawMessage(ev.Value), nil
}

// receiving reports whether task id sleeps in a receive (workflow.Receive)
// until a message or its timeout: PENDING, not due, its inbox awaited.
func (e *Env) receiving(id string) bool {
	t, err := e.store.Get(e.ctx, id)
	if err != nil || t.Status != lease.StatusPending || !t.RunAt.After(e.clock.Now()) {
		return false
	}
	st, err := e.store.GetState(e.ctx, id)
	return err == nil && st.Waiting != ""
}
