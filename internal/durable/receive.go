package durable

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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
// is recorded first ("recv:TOPIC#n#start"). ReceiveOf is ReceiveFuture
// then Get.
func ReceiveOf(ctx context.Context, topic string, timeout time.Duration) ([]byte, bool, error) {
	out, err := ReceiveFuture(ctx, topic, timeout).Get(ctx)
	var none *NoMessageError
	if errors.As(err, &none) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return out, true, nil
}

// NoMessageError is the failure of a receive future (ReceiveFuture) whose
// timeout passed with no message: it took none, so the next receive on the
// topic may still get it. It matches context.DeadlineExceeded.
type NoMessageError struct {
	Topic   string
	Timeout time.Duration
}

func (e *NoMessageError) Error() string {
	return fmt.Sprintf("no message on %q within %s", e.Topic, e.Timeout)
}

// Is makes a NoMessageError match context.DeadlineExceeded.
func (e *NoMessageError) Is(target error) bool { return target == context.DeadlineExceeded }

// ReceiveFuture starts the receive of the next message of topic as a
// future (ReceiveOf's operations): with a timeout, the time of its first
// look is recorded now ("recv:TOPIC#n#start"); the message it takes, or
// its timing out, is recorded as "recv:TOPIC#n" where the run settles it
// (at its Get, or in the combinator that waits for it). It settles with
// the message's payload, or fails with a *NoMessageError once its timeout
// has passed with no message. A topic has at most one receive not
// settled at a time: it knows which message it takes only once the one
// before has taken its own, or timed out. A receive that loses a
// combinator's outcome (Race, Any) is closed: it took no message, and
// the next receive on the topic gets the message it would have taken.
func ReceiveFuture(ctx context.Context, topic string, timeout time.Duration) *Future {
	f := &Future{kind: futureReceive, topic: topic, timeout: timeout}
	w, ok := ctx.Value(workflowKey{}).(*Workflow)
	if !ok {
		f.done, f.err = true, ErrNoWorkflow
		return f
	}
	fail := func(err error) *Future {
		f.done, f.err = true, err
		return f
	}
	if err := errInBranch(ctx, "workflow.Receive", receiveInBranch); err != nil {
		return fail(err)
	}
	if err := inbox.CheckName("topic", topic); err != nil {
		return fail(&PermanentError{Err: fmt.Errorf("workflow.Receive: %w", err)})
	}
	if timeout < 0 || timeout > MaxSleep {
		return fail(&PermanentError{Err: fmt.Errorf("workflow.Receive on %q: timeout %s: %w: want 0 to %s", topic, timeout, lease.ErrInvalid, MaxSleep)})
	}
	n, seq, pending := w.receives(spaceOf(ctx), topic)
	if pending {
		return fail(&PermanentError{Err: fmt.Errorf("workflow.Receive on %q: a receive on the topic has not settled yet (ReceiveAsync): a topic has one receive pending at a time", topic)})
	}
	f.name, f.seq = "recv:"+topic+"#"+strconv.Itoa(n), seq
	if timeout > 0 {
		clock := w.att.Clock()
		raw, err := stepOf(ctx, f.name+"#start", OpReceiveStart, func(context.Context) ([]byte, error) {
			return strconv.AppendInt(nil, clock.Now().UnixMilli(), 10), nil
		}, false)
		if err != nil {
			return fail(err)
		}
		ms, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil {
			return fail(&PermanentError{Err: fmt.Errorf("step %q: recorded start %q is not a time: %w", f.name+"#start", raw, err)})
		}
		f.wake = time.UnixMilli(ms).Add(timeout)
	}
	w.pend(topic, true)
	return f
}

// getReceive is Get of a receive future not settled: it looks for the
// message, and suspends the task until it comes or the timeout passes.
func (w *Workflow) getReceive(ctx context.Context, f *Future) ([]byte, error) {
	done, err := w.tryReceive(ctx, f, f.topic)
	if err != nil {
		return nil, err
	}
	if !done {
		return nil, w.wait(ctx, f.receiveWait(w.att.Clock().Now()), fmt.Sprintf("workflow.Receive %q", f.topic))
	}
	return f.value()
}

// receiveWait is the snooze of the receive f while no message has come:
// until its deadline, or ReceiveRecheck if sooner (a send wakes it).
func (f *Future) receiveWait(now time.Time) error {
	return &pauseError{
		msg:    fmt.Sprintf("%s: waiting for message %d of topic %q until %s", f.name, f.seq, f.topic, f.wake.UTC().Format(time.RFC3339)),
		snooze: SnoozeError{Delay: max(f.receiveNext(now).Sub(now), time.Millisecond)},
	}
}

// receiveNext is when the receive f, not settled, looks again.
func (f *Future) receiveNext(now time.Time) time.Time {
	return minTime(f.wake, now.Add(ReceiveRecheck))
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// tryReceive settles the receive f if it can: its recorded outcome
// replayed, or, live, the message taken (and recorded), or its timing out
// recorded. done is false when no message has come yet, with the inbox's
// wait on listen written (a send on one of its topics wakes the task):
// f's topic, or, in a race of receives, every topic the race waits on,
// joined by commas (inbox.Store.Await). A receive that times out leaves
// the wait on the others.
func (w *Workflow) tryReceive(ctx context.Context, f *Future, listen string) (done bool, err error) {
	task, topic, seq, deadline, timeout, expired := w.held.TaskID, f.topic, f.seq, f.wake, f.timeout, f.expired
	others := strings.Join(slices.DeleteFunc(strings.Split(listen, ","), func(t string) bool { return t == topic }), ",")
	clock := w.att.Clock()
	out, err := stepOf(ctx, f.name, OpReceive, func(ctx context.Context) ([]byte, error) {
		ib := inboxOf(w.att)
		if ib == nil {
			return nil, &PermanentError{Err: errors.New("workflow.Receive: the store keeps no inboxes")}
		}
		m, err := ib.GetMessage(ctx, task, topic, seq)
		if errors.Is(err, lease.ErrNotFound) {
			if expired || !clock.Now().Before(deadline) {
				if timeout > 0 {
					// No longer waiting: a send need not wake the task.
					if err := ib.Await(ctx, task, others); err != nil {
						return nil, err
					}
				}
				return timedOutRecord, nil
			}
			// The wait is written before the last look, and a sender
			// raises the topic after it placed the message: one of the
			// two sees the other (package inbox).
			if err := ib.Await(ctx, task, listen); err != nil {
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
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var r received
	if err := json.Unmarshal(out, &r); err != nil {
		return false, &PermanentError{Err: fmt.Errorf("step %q: recorded message does not decode: %w", f.name, err)}
	}
	f.done, f.recorded = true, true
	if r.TimedOut {
		f.err = &NoMessageError{Topic: topic, Timeout: timeout}
	} else {
		f.out = r.Payload
	}
	w.pend(topic, false)
	return true, nil
}

// receives numbers the next receive of topic in the space sp (nil: the
// root) in this run: it is the n-th of the space (counted per run, as
// sleeps are), and takes message seq, 1 + the messages that the receives
// recorded before it, in any space, took (the inbox is the task's);
// pending says a receive of the topic has not settled (ReceiveFuture).
func (w *Workflow) receives(sp *space, topic string) (n int, seq int64, pending bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	futs := w.extras()
	if futs.pending[topic] {
		return 0, 0, true
	}
	if futs.receives == nil {
		futs.receives = map[string]int{}
	}
	key := sp.qualify(topic)
	futs.receives[key]++
	prefix := "recv:" + topic + "#"
	seq = 1
	for _, st := range w.before(sp) {
		if st.Op == OpReceive && strings.HasPrefix(st.Name[len(spacePath(st.Name)):], prefix) && !bytes.Equal(st.Result, timedOutRecord) {
			seq++
		}
	}
	return futs.receives[key], seq, false
}

// pend marks a receive of topic as not settled (on) or settled.
func (w *Workflow) pend(topic string, on bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	futs := w.extras()
	if futs.pending == nil {
		futs.pending = map[string]bool{}
	}
	futs.pending[topic] = on
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

	e := inbox.Event{Key: key, Value: value}
	if err := inbox.CheckName("event key", key); err != nil {
		return &PermanentError{Err: fmt.Errorf("workflow.SetEvent: %w", err)}
	}
	if len(value) > inbox.MaxEventBytes {
		return &PermanentError{Err: fmt.Errorf("workflow.SetEvent %q: %w", key, &lease.TooLargeError{What: "event", Size: len(value), Limit: inbox.MaxEventBytes})}
	}
	sp := spaceOf(ctx)
	prefix := sp.qualify("event:" + key + "#")
	w.mu.Lock()
	e.Task = w.held.TaskID
	n := 1
	for _, st := range w.before(sp) {
		if st.Op == OpEvent && strings.HasPrefix(st.Name, prefix) {
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

// receiveInBranch is why a branch may not receive, and what to do
// instead.
const receiveInBranch = "a branch runs beside the handler and the other branches, so which of them took which message of a topic would depend on timing; " +
	"receive in the handler or in a child context (which runs in the handler's turn) and pass the message to the branch, or race a ReceiveAsync made there against the branch's future"
