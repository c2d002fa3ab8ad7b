package durable

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/inbox"
)

// The operations of messages and events (lease.Step.Op).
const (
	OpReceive      = "receive"
	OpReceiveStart = "receive start"
	OpEvent        = "event"
)

// ReceiveRecheck bounds a suspended receive's sleep: a sender wakes the
// workflow (inbox.Store.Wake), and should that wake be lost (a sender that
// stopped between its writes and never tried again) the receiver looks
// again this long after it suspended, or at its deadline if sooner.
const ReceiveRecheck = time.Hour

// Inboxer is an Attempt whose store keeps inboxes and events (package
// inbox). An Attempt without it fails the task at its first Receive or
// SetEvent, saying why.
type Inboxer interface {
	// Inbox is the store's inbox side; nil when it has none.
	Inbox() inbox.Store
}

// received is what a receive records: the message it took, or that it
// timed out.
type received struct {
	Seq      int64           `json:"seq,omitempty"`
	ID       string          `json:"id,omitempty"`
	Payload  json.RawMessage `json:"m,omitempty"`
	TimedOut bool            `json:"timeout,omitempty"`
}

// timedOutRecord is the result a receive that timed out records.
var timedOutRecord = []byte(`{"timeout":true}`)

// ReceiveOf takes the next message of topic from the task's inbox: the
// n-th receive of a topic in a run is the operation "recv:TOPIC#n", and
// it takes the topic's message number 1 + the receives of the topic before
// it that took one (a receive that timed out takes none). So a replay
// takes the same messages in the same order, and each message is taken
// once. It returns the message's payload and true, or false when no
// message came within timeout (0: look once, do not wait); until then the
// error is a snooze the handler must return: the task sleeps PENDING, and
// a send on the topic wakes it. With a timeout, the time of the first look
// is recorded first ("recv:TOPIC#n#start").
func ReceiveOf(ctx context.Context, topic string, timeout time.Duration) ([]byte, bool, error) {
	w, ok := ctx.Value(workflowKey{}).(*Workflow)
	if !ok {
		return nil, false, ErrNoWorkflow
	}
	if err := errInSpace(ctx, "workflow.Receive"); err != nil {
		return nil, false, err
	}
	if err := inbox.CheckName("topic", topic); err != nil {
		return nil, false, &PermanentError{Err: fmt.Errorf("workflow.Receive: %w", err)}
	}
	if timeout < 0 || timeout > MaxSleep {
		return nil, false, &PermanentError{Err: fmt.Errorf("workflow.Receive on %q: timeout %s: %w: want 0 to %s", topic, timeout, lease.ErrInvalid, MaxSleep)}
	}
	n, seq := w.receives(topic)
	name := "recv:" + topic + "#" + strconv.Itoa(n)
	clock := w.att.Clock()
	deadline := time.Time{} // look once
	if timeout > 0 {
		raw, err := stepOf(ctx, name+"#start", OpReceiveStart, func(context.Context) ([]byte, error) {
			return strconv.AppendInt(nil, clock.Now().UnixMilli(), 10), nil
		}, false)
		if err != nil {
			return nil, false, err
		}
		ms, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil {
			return nil, false, &PermanentError{Err: fmt.Errorf("step %q: recorded start %q is not a time: %w", name+"#start", raw, err)}
		}
		deadline = time.UnixMilli(ms).Add(timeout)
	}
	task := w.held.TaskID
	out, err := stepOf(ctx, name, OpReceive, func(ctx context.Context) ([]byte, error) {
		ib := inboxOf(w.att)
		if ib == nil {
			return nil, &PermanentError{Err: errors.New("workflow.Receive: the store keeps no inboxes")}
		}
		m, err := ib.GetMessage(ctx, task, topic, seq)
		if errors.Is(err, lease.ErrNotFound) {
			if !clock.Now().Before(deadline) {
				if timeout > 0 {
					// No longer waiting: a send need not wake the task.
					if err := ib.Await(ctx, task, ""); err != nil {
						return nil, err
					}
				}
				return timedOutRecord, nil
			}
			// The wait is written before the last look, and a sender
			// raises the topic after it placed the message: one of the
			// two sees the other (package inbox).
			if err := ib.Await(ctx, task, topic); err != nil {
				return nil, err
			}
			if m, err = ib.GetMessage(ctx, task, topic, seq); errors.Is(err, lease.ErrNotFound) {
				return nil, errNotYet
			}
		}
		if err != nil {
			return nil, err
		}
		// Counted as received before it is recorded: a run that stops in
		// between takes it again (the same number), and the count is a
		// raise.
		if err := ib.Take(ctx, task, topic, seq); err != nil {
			return nil, err
		}
		return json.Marshal(received{Seq: m.Seq, ID: m.ID, Payload: m.Payload})
	}, false)
	if errors.Is(err, errNotYet) {
		next := min(clock.Until(deadline), ReceiveRecheck)
		return nil, false, w.wait(ctx, &pauseError{
			msg:    fmt.Sprintf("%s: waiting for message %d of topic %q until %s", name, seq, topic, deadline.UTC().Format(time.RFC3339)),
			snooze: SnoozeError{Delay: max(next, time.Millisecond)},
		}, fmt.Sprintf("workflow.Receive %q", topic))
	}
	if err != nil {
		return nil, false, err
	}
	var r received
	if err := json.Unmarshal(out, &r); err != nil {
		return nil, false, &PermanentError{Err: fmt.Errorf("step %q: recorded message does not decode: %w", name, err)}
	}
	if r.TimedOut {
		return nil, false, nil
	}
	return r.Payload, true, nil
}

// receives counts the receives of topic this run has called so far: the
// next one is the n-th, and takes message seq.
func (w *Workflow) receives(topic string) (n int, seq int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	prefix := "recv:" + topic + "#"
	n, seq = 1, 1
	for _, st := range w.steps[:w.pos] {
		if st.Op == OpReceive && strings.HasPrefix(st.Name, prefix) {
			n++
			if !bytes.Equal(st.Result, timedOutRecord) {
				seq++
			}
		}
	}
	return n, seq
}

// inboxOf is att's inbox store, nil for none.
func inboxOf(att Attempt) inbox.Store {
	if ib, ok := att.(Inboxer); ok {
		return ib.Inbox()
	}
	return nil
}

// SetEventOf publishes value under key for readers outside the workflow
// (Client.GetEvent): the n-th SetEventOf of a key in a run is the step
// "event:KEY#n", so a replay does not write it again.
func SetEventOf(ctx context.Context, key string, value []byte) error {
	w, ok := ctx.Value(workflowKey{}).(*Workflow)
	if !ok {
		return ErrNoWorkflow
	}
	if err := errInSpace(ctx, "workflow.SetEvent"); err != nil {
		return err
	}
	e := inbox.Event{Key: key, Value: value}
	if err := inbox.CheckName("event key", key); err != nil {
		return &PermanentError{Err: fmt.Errorf("workflow.SetEvent: %w", err)}
	}
	if len(value) > inbox.MaxEventBytes {
		return &PermanentError{Err: fmt.Errorf("workflow.SetEvent %q: %w", key, &lease.TooLargeError{What: "event", Size: len(value), Limit: inbox.MaxEventBytes})}
	}
	w.mu.Lock()
	e.Task = w.held.TaskID
	n := 1
	for _, st := range w.steps[:w.pos] {
		if st.Op == OpEvent && strings.HasPrefix(st.Name, "event:"+key+"#") {
			n++
		}
	}
	w.mu.Unlock()
	_, err := stepOf(ctx, "event:"+key+"#"+strconv.Itoa(n), OpEvent, func(ctx context.Context) ([]byte, error) {
		ib := inboxOf(w.att)
		if ib == nil {
			return nil, &PermanentError{Err: errors.New("workflow.SetEvent: the store keeps no events")}
		}
		return nil, ib.SetEvent(ctx, e)
	}, false)
	return err
}
