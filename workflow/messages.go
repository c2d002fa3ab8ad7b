package workflow

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/durable"
)

// Receive takes the next message sent to the task on topic
// (leasehold.Client.Send, or a message on the work queue) and decodes it
// into T. Messages of a topic are received in the order they were sent,
// each exactly once: the message a call took is recorded as a step, so a
// later run (a retry, or a resume after a wait) gets the same message from
// the same call.
//
// When no message is waiting, Receive returns an error the handler must
// return: the task sleeps, holding no lease, and a message on the topic
// wakes it; the handler then runs again and Receive returns the message.
// ok is false, with a nil error, when no message came within timeout (0
// looks once and does not wait; at most 366 days); a call that timed out
// takes no message, so the next call on the topic may still get it.
//
//	order, ok, err := workflow.Receive[Order](ctx, "orders", 24*time.Hour)
//	if err != nil {
//		return "", err // waiting for a message
//	}
//	if !ok {
//		return "no order within a day", nil
//	}
//
// A topic is 1 to 32 letters, digits, '-', '_' or '.', starting with a
// letter. docs/workflows.md ("Messages and events") has the limits and
// what each receive costs.
func Receive[T any](ctx context.Context, topic string, timeout time.Duration) (v T, ok bool, err error) {
	raw, ok, err := durable.ReceiveOf(ctx, topic, timeout)
	if err != nil || !ok {
		return v, false, err
	}
	if v, err = decoded[T](raw, fmt.Sprintf("message on %q: it", topic)); err != nil {
		return v, false, err
	}
	return v, true, nil
}

// SetEvent publishes value, encoded as JSON, under key for readers
// outside the workflow (leasehold.Client.GetEvent, leasehold event): a
// progress report, or an answer to a query. A later call with the same key
// replaces the value. Each call is recorded as a step, so a replay does not
// write it again. A key follows a topic's rules; a value is at most
// 16 KiB.
func SetEvent(ctx context.Context, key string, value any) error {
	b, err := json.Marshal(value)
	if err != nil {
		return leasehold.Fail(fmt.Errorf("event %q: %w", key, err))
	}
	return durable.SetEventOf(ctx, key, b)
}
