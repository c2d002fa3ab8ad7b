package eventsource

import (
	"context"
	"slices"
	"sync"

	"github.com/aws/aws-lambda-go/events"
)

type ackKey struct{}

// Ack tells the Runner that invoked ctx's handler that the message with this
// id is done with and may be deleted now, before the rest of its batch ends.
// It reports whether anyone was listening: on Lambda nobody is (the event
// source mapping deletes a batch's messages only when the invocation ends),
// and the batch response alone decides.
//
// Deleting each message as soon as its work is done keeps a crash or a
// timeout later in the batch from delivering finished messages again, where
// every extra receive counts towards the queue's maxReceiveCount.
func Ack(ctx context.Context, messageID string) bool {
	d, ok := ctx.Value(ackKey{}).(*earlyDeletes)
	return ok && d.ack(messageID)
}

// earlyDeletes collects the messages of one batch acknowledged before the
// batch ends, for a goroutine that deletes them as they come: those that
// finish close together go out in one DeleteMessageBatch.
type earlyDeletes struct {
	mu      sync.Mutex
	records []events.SQSMessage
	acked   []bool
	queue   []events.SQSMessage
	closed  bool
	wake    chan struct{}
}

func newEarlyDeletes(records []events.SQSMessage) *earlyDeletes {
	return &earlyDeletes{records: records, acked: make([]bool, len(records)), wake: make(chan struct{}, 1)}
}

// ack queues the first not yet acknowledged record with id. It is a no-op
// after close, and for ids not in the batch.
func (d *earlyDeletes) ack(id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return false
	}
	i := slices.IndexFunc(d.records, func(m events.SQSMessage) bool { return m.MessageId == id })
	for i >= 0 && i < len(d.records) && (d.records[i].MessageId != id || d.acked[i]) {
		i++
	}
	if i < 0 || i >= len(d.records) {
		return false
	}
	d.acked[i] = true
	d.queue = append(d.queue, d.records[i])
	select {
	case d.wake <- struct{}{}:
	default:
	}
	return true
}

// take returns the queued messages and empties the queue.
func (d *earlyDeletes) take() []events.SQSMessage {
	d.mu.Lock()
	defer d.mu.Unlock()
	q := d.queue
	d.queue = nil
	return q
}

// close stops further acks and returns which records were acknowledged.
func (d *earlyDeletes) close() []bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	return slices.Clone(d.acked)
}
