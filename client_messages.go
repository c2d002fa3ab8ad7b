package leasehold

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/leasehold/leasehold/internal/durable"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/inbox"
	"github.com/leasehold/leasehold/internal/token"
)

// Send sends payload, encoded as JSON, to the running workflow
// workflowID on topic, where workflow.Receive takes it, and returns its
// number in the topic (1 for the first). It is SendOnce with a message id
// drawn at random: the client's own retries of the call are sent once.
func (c *Client) Send(ctx context.Context, workflowID, topic string, payload any) (int64, error) {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return c.SendOnce(ctx, workflowID, topic, fmt.Sprintf("%x", b), payload)
}

// SendOnce is Send under the caller's message id (1 to 128 printable
// ASCII characters): a message id sent to the workflow before is not sent
// again, and SendOnce returns the number it was given then, so a caller
// that retries after a lost answer delivers its message once.
//
// It fails, sending nothing, with an error matching ErrNotFound for a
// workflow that does not exist, ErrFinished for one that has ended (it
// would never receive it), ErrTooLarge for a payload over 32 KiB or an
// inbox holding 1,000 messages not received yet, and ErrInvalid for a bad
// topic or id. A workflow waiting on the topic is woken: its token is sent
// at once (the receive's next look finds the message should that send
// fail).
func (c *Client) SendOnce(ctx context.Context, workflowID, topic, messageID string, payload any) (int64, error) {
	ib, ok := c.store.(inbox.Store)
	if !ok {
		return 0, fmt.Errorf("%w: the client's store keeps no inboxes", ErrInvalid)
	}
	b, err := json.Marshal(payload)
	if err != nil {
		return 0, fmt.Errorf("%w: message payload: %w", ErrInvalid, err)
	}
	m, waiting, err := ib.Send(ctx, inbox.Message{Task: workflowID, Topic: topic, ID: messageID, Payload: b})
	if errors.Is(err, inbox.ErrDuplicate) {
		err = nil
	}
	if err != nil {
		return 0, c.translate(ctx, err)
	}
	if waiting {
		c.wakeReceiver(ctx, ib, m)
	}
	return m.Seq, nil
}

// racedFor reports whether m's workflow waits for a callback or a child
// raced against a receive that m ends (durable.RaceNote.Listens): the message
// form of m, which the worker takes at once, then ends that wait.
func (c *Client) racedFor(ctx context.Context, m inbox.Message) bool {
	t, err := c.store.Get(ctx, m.Task)
	return err == nil && t.Status == lease.StatusWaiting && durable.RaceNote(t.WaitNote).Listens(m.Topic, m.Seq)
}

// wakeRetryDelay is how long after a wake that found its receiver running
// the message form of the same message is delivered, to wake it then.
const wakeRetryDelay = 2 * time.Second

// wakeReceiver makes a workflow that sleeps in a receive due now and
// sends its token. A receiver still running (between its wait and its
// suspension) is woken later: the message form of m, under its id, goes
// on the work queue delayed by wakeRetryDelay, and the worker that takes
// it finds it sent and wakes the receiver then. A workflow WAITING for a
// callback raced against a receive of m (racedFor) gets the message form
// at once: the worker that takes it ends that wait (the message won). All
// of it is best effort: the receive looks again by itself
// (durable.ReceiveRecheck), and a raced callback's wait ends at its own
// deadline.
func (c *Client) wakeReceiver(ctx context.Context, ib inbox.Store, m inbox.Message) {
	id := m.Task
	woke, status, err := ib.Wake(ctx, id)
	if err == nil && !woke && (status == lease.StatusRunning || status == lease.StatusWaiting && c.racedFor(ctx, m)) {
		delay := wakeRetryDelay
		if status == lease.StatusWaiting {
			delay = 0
		}
		body, err := token.Message(id, m.Topic, m.ID, m.Payload)
		if queueURL, qerr := c.workQueue(ctx); err == nil && qerr == nil {
			sctx, cancel := context.WithTimeout(ctx, c.opts.callTimeout)
			_, _ = c.sqs.SendMessage(sctx, &sqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String(body), DelaySeconds: int32(delay / time.Second)})
			cancel()
		}
		return
	}
	if err != nil || !woke {
		return
	}
	t, err := c.store.Get(ctx, id)
	if err != nil {
		return
	}
	if queueURL, err := c.queueOf(ctx, t.Queue); err == nil {
		_ = c.sendRef(ctx, queueURL, id)
	}
}

// GetEvent returns the value workflow id last set under key
// (workflow.SetEvent), waiting until it is set or timeout has passed (0:
// look once). It reads the event's item with backoff, from 50 ms up to 2 s
// between reads (one strongly consistent read each, and one of the task
// while the event is not set, so that a workflow that has ended stops the
// wait at once): an event not set gives an error matching ErrNotFound, and
// a workflow that ended without setting it one matching ErrFinished.
func (c *Client) GetEvent(ctx context.Context, id, key string, timeout time.Duration) (json.RawMessage, error) {
	ib, ok := c.store.(inbox.Store)
	if !ok {
		return nil, fmt.Errorf("%w: the client's store keeps no events", ErrInvalid)
	}
	if err := lease.CheckID(id); err != nil {
		return nil, err
	}
	if err := inbox.CheckName("event key", key); err != nil {
		return nil, err
	}
	if timeout < 0 {
		return nil, invalidOption("timeout %s is negative", timeout)
	}
	clock := c.opts.clock
	deadline := clock.Now().Add(timeout)
	wait := 50 * time.Millisecond
	for {
		e, err := ib.GetEvent(ctx, id, key)
		if err == nil {
			return json.RawMessage(e.Value), nil
		}
		if !errors.Is(err, lease.ErrNotFound) {
			return nil, c.translate(ctx, err)
		}
		t, err := c.store.Get(ctx, id)
		switch {
		case err != nil:
			return nil, c.translate(ctx, err)
		case t.Status.Terminal():
			// The event may have been set just before the end.
			if e, err := ib.GetEvent(ctx, id, key); err == nil {
				return json.RawMessage(e.Value), nil
			}
			return nil, fmt.Errorf("event %q of %s: the workflow ended (%s) without setting it: %w", key, id, t.Status, ErrFinished)
		}
		left := clock.Until(deadline)
		if left <= 0 {
			return nil, &eventNotSetError{msg: fmt.Sprintf("event %q of %s not set within %s (the workflow is %s)", key, id, timeout, t.Status)}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-clock.After(min(wait, left)):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// eventNotSetError is GetEvent's error for an event not set within its
// timeout while the workflow lives: it matches ErrNotFound, without
// ErrNotFound's "task not found", since the task exists.
type eventNotSetError struct{ msg string }

func (e *eventNotSetError) Error() string { return e.msg }

// Unwrap makes the error match ErrNotFound.
func (e *eventNotSetError) Unwrap() error { return ErrNotFound }

// Inbox returns t (a workflow, as Get returned it) with its Inbox read:
// the inbox's state item (one strongly consistent read, whatever the
// number of messages), then at most max waiting messages, one read each
// (1 read unit per 4 KB of payload), and at most max of the events t's
// steps name, one read each; max 0 reads the state item only. The events
// are those its current run set: the keys come from its recorded steps,
// since no item lists them. A workflow that never had a message has an
// empty inbox, not an error.
func (c *Client) Inbox(ctx context.Context, t TaskInfo, max int) (TaskInfo, error) {
	ib, ok := c.store.(inbox.Store)
	if !ok {
		return t, fmt.Errorf("%w: the client's store keeps no inboxes", ErrInvalid)
	}
	if err := lease.CheckID(t.ID); err != nil {
		return t, err
	}
	if max < 0 {
		return t, invalidOption("max %d is negative", max)
	}
	out := alloc(t.Inbox)
	st, err := ib.GetState(ctx, t.ID)
	if err != nil {
		return t, c.translate(ctx, err)
	}
	out.ReceivingOn = st.Waiting
	topics := slices.Sorted(maps.Keys(st.Last))
	for _, topic := range topics {
		n := push(&out.Topics)
		n.Topic, n.Delivered = topic, min(st.Taken[topic], st.Last[topic])
		n.Waiting = st.Last[topic] - n.Delivered
	}
	for _, topic := range topics {
		for seq := st.Taken[topic] + 1; seq <= st.Last[topic]; seq++ {
			if len(out.Messages) >= max {
				out.More = true
				break
			}
			m, err := ib.GetMessage(ctx, t.ID, topic, seq)
			if errors.Is(err, lease.ErrNotFound) {
				continue // past the table's TTL
			}
			if err != nil {
				return t, c.translate(ctx, err)
			}
			n := push(&out.Messages)
			n.Topic, n.ID, n.Seq, n.SentAt, n.Payload = topic, m.ID, m.Seq, m.SentAt, m.Payload
		}
	}
	for i, key := range eventKeys(t.Steps) {
		e := push(&out.Events)
		e.Key = key
		if i >= max {
			out.EventsNotRead++
			continue
		}
		got, err := ib.GetEvent(ctx, t.ID, key)
		switch {
		case err == nil:
			e.Read, e.SetAt, e.Value = true, got.SetAt, got.Value
		case !errors.Is(err, lease.ErrNotFound): // not found: past the TTL
			return t, c.translate(ctx, err)
		}
	}
	t.Inbox = out
	return t, nil
}

// push appends a zero element to *s and returns it, to be filled: the
// elements of TaskInfo.Inbox's lists are unnamed struct types.
func push[S ~[]E, E any](s *S) *E {
	*s = append(*s, *new(E))
	return &(*s)[len(*s)-1]
}

// alloc returns a new E: TaskInfo.Inbox's type is unnamed.
func alloc[E any](*E) *E { return new(E) }

// eventKeys are the event keys that steps (a task's recorded steps) set,
// each once, in the order of their first event:KEY#n step.
func eventKeys(steps []string) []string {
	var keys []string
	for _, s := range steps {
		rest, ok := strings.CutPrefix(s, "event:")
		if !ok {
			continue
		}
		key, _, ok := strings.Cut(rest, "#")
		if ok && key != "" && !slices.Contains(keys, key) {
			keys = append(keys, key)
		}
	}
	return keys
}
