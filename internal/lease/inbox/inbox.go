// Package inbox declares the items of a workflow's inbox and events
// (docs/workflows.md, "Messages and events"): the messages sent to a
// running workflow, numbered per topic in send order, the state item that
// counts them and says which topic a receiver waits on, and the events a
// workflow publishes. They live in the tasks table under ids that start
// with a control character, so no task can have one; both stores
// implement Store.
//
// # Sending exactly once, without a transaction
//
// A send is four small steps, each idempotent, so that a sender that
// stops anywhere, or whose answer is lost, can send the same message id
// again and land it once:
//
//  1. read the state item: the topic's next sequence number n is its
//     last one plus one (and the unread count is checked);
//  2. put the message id's marker, recording n, unless it exists: a
//     marker that exists means this id was sent before, and the send
//     goes on from the position the marker records;
//  3. put the message at n unless n is taken; a taken n holding another
//     id moves the marker on to n+1 and tries again (a concurrent
//     sender won n);
//  4. raise the topic's last number on the state item to n, which also
//     tells the sender whether a receiver waits on the topic (it must
//     then wake the workflow).
//
// The marker always names the last position the sender tried, so a
// retry finds its own message there or places it at the first free one:
// positions stay contiguous (a receiver reads n+1 after n, by key) and
// no id is placed twice. A receiver writes its wait on the state item
// before it looks for the message, and a sender raises the state item
// after it placed the message: one of the two sees the other.
package inbox

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
)

// Limits of an inbox and of events (docs/limits.md).
const (
	// MaxMessageBytes bounds one message's payload: a message is kept
	// inline in its item and recorded in the receiver's history as a step.
	MaxMessageBytes = 32 << 10
	// MaxUnread bounds the messages sent to a workflow and not received
	// yet, all topics together.
	MaxUnread = 1000
	// MaxTopics bounds the topics of one workflow's inbox (they are
	// attributes of its state item).
	MaxTopics = 64
	// MaxMessageIDBytes bounds a message id.
	MaxMessageIDBytes = 128
	// MaxEventBytes bounds one event's value.
	MaxEventBytes = 16 << 10
	// Life is how long messages, markers and events are kept (the table's
	// TTL) after they are written.
	Life = 400 * 24 * time.Hour
)

// Errors of sends.
var (
	// ErrDuplicate: the message id was sent already; the message it
	// placed is returned with it.
	ErrDuplicate = errors.New("message sent already")
	// ErrFull: the workflow has MaxUnread messages it has not received.
	// It matches lease.ErrTooLarge.
	ErrFull = fmt.Errorf("inbox full: %w", lease.ErrTooLarge)
	// ErrEnded: the workflow has ended; it receives nothing more. It
	// matches lease.ErrFinished.
	ErrEnded = fmt.Errorf("workflow has ended and receives nothing more: %w", lease.ErrFinished)
)

// idPrefix starts every inbox item's id; the control character keeps task
// ids out. sep separates the parts after it.
const (
	idPrefix = "\x1einbox/"
	sep      = "\x1f"
)

// IsID reports whether id is an inbox item's, not a task's.
func IsID(id string) bool { return strings.HasPrefix(id, idPrefix) }

// StateID is the id of task's inbox state item.
func StateID(task string) string { return idPrefix + task }

// MessageID is the id of the item of message seq of topic in task's inbox.
func MessageID(task, topic string, seq int64) string {
	return idPrefix + task + sep + "m" + sep + topic + sep + strconv.FormatInt(seq, 10)
}

// MarkerID is the id of the marker of message id msg in task's inbox.
func MarkerID(task, msg string) string { return idPrefix + task + sep + "id" + sep + msg }

// EventID is the id of task's event key.
func EventID(task, key string) string { return idPrefix + task + sep + "e" + sep + key }

// CheckName checks a topic or an event key: 1 to 32 letters, digits, '-',
// '_' or '.', starting with a letter (so that it fits a step name).
func CheckName(what, name string) error {
	ok := len(name) >= 1 && len(name) <= 32
	for i, r := range name {
		letter := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		ok = ok && (letter || i > 0 && (r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.'))
	}
	if !ok {
		return fmt.Errorf("%w: %s %q: want 1 to 32 letters, digits, '-', '_' or '.', starting with a letter", lease.ErrInvalid, what, name)
	}
	return nil
}

// Message is one message of an inbox.
type Message struct {
	Task, Topic string
	// ID names the message for deduplication: a second send of the same
	// id to the same task places nothing (ErrDuplicate).
	ID string
	// Seq is its position in the topic, from 1, in send order.
	Seq     int64
	Payload []byte
	SentAt  time.Time
}

// Check validates a message about to be sent (Seq and SentAt are the
// store's).
func (m Message) Check() error {
	if err := lease.CheckID(m.Task); err != nil {
		return err
	}
	if err := CheckName("topic", m.Topic); err != nil {
		return err
	}
	switch {
	case m.ID == "" || len(m.ID) > MaxMessageIDBytes || strings.ContainsFunc(m.ID, func(r rune) bool { return r < 0x21 || r > 0x7e }):
		return fmt.Errorf("%w: message id %q: want 1 to %d printable ASCII characters", lease.ErrInvalid, m.ID, MaxMessageIDBytes)
	case len(m.Payload) > MaxMessageBytes:
		return &lease.TooLargeError{What: "message", Size: len(m.Payload), Limit: MaxMessageBytes}
	}
	return lease.CheckResult(m.Payload)
}

// State is a workflow's inbox state item.
type State struct {
	Task string
	// Last is each topic's last placed sequence number, Taken the last
	// one the workflow received (recorded).
	Last, Taken map[string]int64
	// Waiting is the topic a receiver last waited on, or the topics of a
	// race of receives, joined by commas ("" for none): Listening.
	Waiting string
}

// Listening reports whether a receiver waiting as waiting (State.Waiting)
// waits on topic: one topic, or several joined by commas (a topic has
// none: CheckName).
func Listening(waiting, topic string) bool {
	for w := range strings.SplitSeq(waiting, ",") {
		if w == topic && topic != "" {
			return true
		}
	}
	return false
}

// Unread counts the messages placed and not received, all topics.
func (s State) Unread() int64 {
	var n int64
	for t, last := range s.Last {
		n += last - s.Taken[t]
	}
	return n
}

// Next is the sequence number a new message of topic would take.
func (s State) Next(topic string) int64 { return s.Last[topic] + 1 }

// Admit says whether s has room for one more message of topic: ErrFull
// past MaxUnread, lease.ErrInvalid past MaxTopics.
func (s State) Admit(topic string) error {
	if s.Unread() >= MaxUnread {
		return fmt.Errorf("%w: %d messages not received yet, the limit is %d", ErrFull, s.Unread(), MaxUnread)
	}
	if _, ok := s.Last[topic]; !ok && len(s.Last) >= MaxTopics {
		return fmt.Errorf("%w: an inbox keeps at most %d topics", lease.ErrInvalid, MaxTopics)
	}
	return nil
}

// Event is a value a workflow published under a key.
type Event struct {
	Task, Key string
	Value     []byte
	SetAt     time.Time
}

// Check validates an event about to be set.
func (e Event) Check() error {
	if err := lease.CheckID(e.Task); err != nil {
		return err
	}
	if err := CheckName("event key", e.Key); err != nil {
		return err
	}
	if len(e.Value) > MaxEventBytes {
		return &lease.TooLargeError{What: "event", Size: len(e.Value), Limit: MaxEventBytes}
	}
	return lease.CheckResult(e.Value)
}

// Store keeps inboxes and events: both stores implement it.
type Store interface {
	// Send places m (its Seq and SentAt set by the store) at the next
	// position of its topic, exactly once per message id, following the
	// protocol of the package's documentation. It returns the message as
	// placed and whether a receiver waits on the topic (Listening; the
	// caller then wakes the workflow: Wake). A message id sent already gives the
	// message it placed and ErrDuplicate (waiting is still reported, so a
	// retry after a lost answer wakes the workflow too); a task that does
	// not exist lease.ErrNotFound; one that has ended ErrEnded; a full
	// inbox ErrFull.
	Send(ctx context.Context, m Message) (placed Message, waiting bool, err error)
	// GetMessage reads message seq of topic; lease.ErrNotFound if none.
	GetMessage(ctx context.Context, task, topic string, seq int64) (Message, error)
	// Take records that the workflow received topic's messages up to seq
	// (a raise only: an earlier seq changes nothing) and that it no
	// longer waits.
	Take(ctx context.Context, task, topic string, seq int64) error
	// Await records that the workflow waits on topic, before it looks for
	// the message a last time and suspends ("" records that it waits on
	// none: its receive timed out). topic may name several topics joined
	// by commas (a race of receives): a send on any of them reports the
	// receiver waiting (Listening).
	Await(ctx context.Context, task, topic string) error
	// GetState reads task's inbox state (an empty state if there is none).
	GetState(ctx context.Context, task string) (State, error)
	// Wake makes a PENDING task whose run time is later than now due now,
	// and reports whether it did: a receiver that suspended is woken by a
	// message (the caller then sends its token). A task that is not
	// PENDING, or is due already, is left as it is; status is the task's
	// as the write saw it ("" for no task). A RUNNING one may be a
	// receiver between its wait and its suspension: the caller tries the
	// wake again shortly (docs/workflows.md).
	Wake(ctx context.Context, task string) (woke bool, status lease.Status, err error)
	// SetEvent writes e (SetAt set by the store), replacing the key's
	// value.
	SetEvent(ctx context.Context, e Event) error
	// GetEvent reads task's event key; lease.ErrNotFound if it is not set.
	GetEvent(ctx context.Context, task, key string) (Event, error)
}
