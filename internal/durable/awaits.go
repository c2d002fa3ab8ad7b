package durable

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
)

// Child is a task a handler spawns (AwaitChildrenError).
type Child struct {
	Kind        string
	Payload     []byte // JSON; nil for none
	MaxAttempts int    // 0: the worker's default
	// Queue names the child's queue; "" is the parent's queue.
	Queue string
}

// AwaitChildrenError asks the worker to spawn Children and suspend the task
// until every one has ended; the handler then runs again with their results
// (WaitResultsOf). Child i gets the id ChildID(parent, i), so a retried
// spawn makes no new children.
type AwaitChildrenError struct {
	Children []Child
	// Timeout bounds the wait: at its end the task fails with the reason.
	// 0 takes the worker's WaitTimeout.
	Timeout time.Duration
	// IDs are the children's ids, for a named await (AllOf); nil gives
	// child i the id ChildID(parent, i), and allows one such await per
	// task.
	IDs []string
	// Note is kept on the task through the wait (lease.Wait.Note): a
	// map's progress.
	Note string
	// Slide, set, makes this the step of a sliding map (MapOf): Children
	// are empty, and the worker writes Slide's items, raises its groups,
	// starts the children of its idle slots and waits for Slide.Wake.
	Slide *Slide
	// Timer says Timeout is the deadline of a timer raced against the
	// children (a combinator's wait): at the deadline the worker cancels
	// the children not ended, instead of failing the task, and the task
	// runs again, as the same attempt, once they have ended. The
	// suspension keeps TimerNote as the wait's note to tell it so.
	Timer bool
	// Listen names the receives raced against the children, as
	// AwaitCallbackError.Listen: a message for one of them does what the
	// timer's deadline does (the worker cancels the children, the task
	// runs again and takes the message).
	Listen string
	// First, in a Race (CombineRace) or Any (CombineAny) of several
	// children, says the wait ends at the first child that ends (Race) or
	// succeeds (Any): the worker that tells the task of that end cancels
	// the others (reason FirstEnded), and the task runs again once they
	// have ended.
	First string
}

// RaceNote is the wait note of a children wait in a race (Timer, Listen
// or First), as AwaitCallbackError.Note; "" for another wait, which
// keeps Note.
func (e *AwaitChildrenError) RaceNote() string {
	note := raceNote(e.Timer, e.Listen)
	if e.First != "" {
		note = strings.TrimSpace(note + " " + firstPrefix + e.First)
	}
	return note
}

// firstPrefix starts the part of a wait note that says the wait for
// children ends at the first end (AwaitChildrenError.First).
const firstPrefix = "leasehold:first:"

// FirstEnded is the reason the worker cancels the children of a race of
// children with when one of them ended (or, in an Any, succeeded) first.
const FirstEnded = "leasehold: a child raced against it ended first"

// First is the combinator kind of a wait for children that ends at the
// first end (CombineRace) or success (CombineAny) of one of them; "" for
// a wait for every one (AwaitChildrenError.First).
func (n RaceNote) First() string {
	for _, part := range strings.Fields(string(n)) {
		if kind, ok := strings.CutPrefix(part, firstPrefix); ok {
			return kind
		}
	}
	return ""
}

func (e *AwaitChildrenError) Error() string {
	if e.Slide != nil {
		return fmt.Sprintf("sliding map %q: %d of %d items produced", e.Slide.Name, e.Slide.Produced, e.Slide.N)
	}
	return fmt.Sprintf("awaiting %d children", len(e.Children))
}

// AwaitCallbackError asks the worker to suspend the task until an outside
// system completes or fails it with the callback token (CallbackTokenOf),
// or until Timeout passes, which fails the attempt (retried as any failure).
type AwaitCallbackError struct {
	Timeout time.Duration
	// Heartbeat is the wait's heartbeat timeout (zero: none): the wait
	// also ends when no heartbeat came within it (lease.Wait.Heartbeat).
	Heartbeat time.Duration
	// Step makes the wait resumable (CallbackOf): the answer is recorded
	// as this step, and the handler runs again to read it.
	Step string
	// Timer says Timeout is the deadline of a timer raced against the
	// callback (a combinator's wait): at the deadline the worker records
	// TimerFired as the callback's answer and runs the task again, as
	// the same attempt, instead of failing the attempt. The suspension
	// keeps TimerNote as the wait's note to tell it so.
	Timer bool
	// Listen names the receives raced against the callback (Race or Any),
	// as "TOPIC#SEQ" joined by commas: a message at or past SEQ on TOPIC
	// ends the wait with the answer MessageCame, and the task runs again,
	// as the same attempt, and takes it. The suspension keeps it in the
	// wait's note (Note).
	Listen string
	// Children, with the ids IDs, are children raced against the
	// callback (Race or Any of an InvokeAsync and a CallbackAsync): the
	// worker spawns them before the suspension, whose note names them
	// (Note), and the end of one ends the wait with the answer ChildEnded
	// (the task runs again, as the same attempt, and waits for it as a
	// child); an answer that comes first has them cancelled.
	Children []Child
	IDs      []string
	// First is the combinator of the race with Children (CombineRace or
	// CombineAny): in an Any, only a child's success ends the wait (a
	// failure leaves the callback to be answered), and only a callback's
	// success has the children cancelled.
	First string
}

// Note is the wait note of the suspension e asks for: TimerNote for a
// raced timer, "leasehold:recv:" and Listen for raced receives, both
// separated by a space; "" for neither.
func (e *AwaitCallbackError) Note() string {
	if e.Step == "" {
		return ""
	}
	note := raceNote(e.Timer, e.Listen)
	if len(e.IDs) > 0 {
		note = strings.TrimSpace(note + " " + kidPrefix + strings.Join(e.IDs, ","))
		if e.First != "" {
			note += " " + firstPrefix + e.First
		}
	}
	return note
}

// kidPrefix starts the part of a callback wait's note that names the
// children raced against it (AwaitCallbackError.IDs).
const kidPrefix = "leasehold:kid:"

// Kids is the ids of the children raced against a callback wait
// (AwaitCallbackError.IDs); nil for none.
func (n RaceNote) Kids() []string {
	for _, part := range strings.Fields(string(n)) {
		if list, ok := strings.CutPrefix(part, kidPrefix); ok && list != "" {
			return strings.Split(list, ",")
		}
	}
	return nil
}

// RacedKids is t, as lease.CancelChildren takes a parent, WAITING for
// the children raced against the callback it waits for (its wait's note
// names them, AwaitCallbackError.IDs) that have not told it of their end:
// a cancel of t, or the callback's answer, cancels them with it. It has
// none when t waits for no such callback.
func RacedKids(t lease.Task) lease.Task {
	kids := lease.Task{ID: t.ID, Status: lease.StatusWaiting, Wait: lease.WaitChildren, Ended: t.Ended}
	if t.Wait == lease.WaitCallback && strings.Contains(t.WaitNote, kidPrefix) {
		kids.WaitFor = RaceNote(t.WaitNote).Kids()
	}
	return kids
}

// ChildEnded is the answer the worker records for a callback whose raced
// child ended first (a failure with this reason), as TimerFired for a
// timer; the callback routes refuse it too.
const ChildEnded = "leasehold: the raced child ended first"

// CallbackCame is the reason the worker cancels a child raced against a
// callback with when the callback's answer came first.
const CallbackCame = "leasehold: the callback raced against it was answered first"

// Reserved reports whether reason is one of the answers the worker
// records for a callback closed by what was raced against it
// (TimerFired, MessageCame, ChildEnded): the callback routes refuse it as
// an outside failure's reason.
func Reserved(reason string) bool {
	return reason == TimerFired || reason == MessageCame || reason == ChildEnded
}

// raceNote is the wait note of a race's suspension: TimerNote for a raced
// timer, listenPrefix and listen for raced receives, separated by a
// space.
func raceNote(timer bool, listen string) string {
	var parts []string
	if timer {
		parts = append(parts, TimerNote)
	}
	if listen != "" {
		parts = append(parts, listenPrefix+listen)
	}
	return strings.Join(parts, " ")
}

// listenPrefix starts the part of a wait note that names raced receives
// (AwaitCallbackError.Listen).
const listenPrefix = "leasehold:recv:"

// RaceNote is a wait note (lease.Task.WaitNote) as a race's suspension
// writes it (AwaitCallbackError.Note): what ends the wait besides what it
// waits for.
type RaceNote string

// Timer reports whether the wait's deadline is a raced timer's.
func (n RaceNote) Timer() bool {
	return slices.Contains(strings.Fields(string(n)), TimerNote)
}

// Listens reports whether a message number seq of topic ends the wait: a
// receive raced against it waits for message number seq or an earlier one
// of the topic.
func (n RaceNote) Listens(topic string, seq int64) bool {
	for _, part := range strings.Fields(string(n)) {
		list, ok := strings.CutPrefix(part, listenPrefix)
		if !ok {
			continue
		}
		for _, entry := range strings.Split(list, ",") {
			t, num, _ := strings.Cut(entry, "#")
			want, err := strconv.ParseInt(num, 10, 64)
			if t == topic && err == nil && want <= seq {
				return true
			}
		}
	}
	return false
}

// MessageCame is the answer the worker records for a callback whose raced
// receive's message came first (a failure with this reason), as
// TimerFired for a timer; the callback routes refuse it too.
const MessageCame = "leasehold: the raced message came first"

// TimerNote is the wait note (lease.Wait.Note) of a callback wait, or a
// wait for children, whose deadline is a raced timer's
// (AwaitCallbackError.Timer, AwaitChildrenError.Timer).
const TimerNote = "leasehold:timer"

// TimerFired is the answer the worker records for a callback whose raced
// timer's deadline came first (a failure with this reason). The callback
// routes refuse it as a failure's reason, so no outside system can make
// a timer win.
const TimerFired = "leasehold: the raced timer fired first"

func (e *AwaitCallbackError) Error() string {
	return fmt.Sprintf("awaiting a callback for up to %s", e.Timeout)
}

// ChildID is the id of the i-th child (from 0) a task spawns.
func ChildID(parent string, i int) string { return parent + "/" + strconv.Itoa(i) }

// ChildIDIn is the id of the i-th child (from 0) of the await called name
// (AllOf) of the task parent. An await's name starts with a letter and
// has no slash, so these ids differ from ChildID's, and from those of the
// children's own children.
func ChildIDIn(parent, name string, i int) string {
	return childPrefix(parent, name) + strconv.Itoa(i)
}

// childPrefix is what the ids of the await called name of parent start
// with (ChildIDIn).
func childPrefix(parent, name string) string { return parent + "/" + name + "/" }

// AwaitNameOf is the name of the await whose child has the id child, of
// the task parent (ChildIDIn), and "" for an id of another form (the
// unnamed ChildID of older versions, or not parent's child).
func AwaitNameOf(parent, child string) string {
	rest, ok := strings.CutPrefix(child, parent+"/")
	if !ok {
		return ""
	}
	if name, _, ok := strings.Cut(rest, "/"); ok && CheckAwaitName(name) == nil {
		return name
	}
	return ""
}

// CheckAwaitName checks the name of a named await (AllOf, CallbackOf):
// 1 to 32 letters, digits, '-', '_' or '.', starting with a letter.
func CheckAwaitName(name string) error {
	ok := len(name) >= 1 && len(name) <= 32
	for i, r := range name {
		letter := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		ok = ok && (letter || i > 0 && (r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.'))
	}
	if !ok {
		return fmt.Errorf("%w: await name %q: want 1 to 32 letters, digits, '-', '_' or '.', starting with a letter", lease.ErrInvalid, name)
	}
	return nil
}

// MaxCallbackTimeout bounds AwaitCallbackError.Timeout.
const MaxCallbackTimeout = 365 * 24 * time.Hour

// WaitResults is what a resumed handler sees of the tasks it waited for.
type WaitResults struct {
	Mode  lease.WaitMode // children, after or after_any
	Tasks []lease.Task   // in WaitFor order; a task gone (expired) has only its ID
}
