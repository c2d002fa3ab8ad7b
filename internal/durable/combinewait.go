package durable

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
)

// settleLive settles the receive or child future f if it can (tryReceive,
// trySettleChild).
func (w *Workflow) settleLive(ctx context.Context, f *Future) (bool, error) {
	if f.kind == futureReceive {
		return w.tryReceive(ctx, f, f.topic)
	}
	return w.trySettleChild(ctx, f)
}

// settleWaitedChildren settles the children of fs, the futures of the
// combinator kind, that the task waited for (their outcomes in
// w.results): a run resumed from their wait must record them first. A
// child cancelled at the deadline of a timer raced against it (the wait's
// note a timer's, the race's deadline passed by now: raceDeadline) is
// closed: the timer won; one cancelled in a wait whose note names raced
// receives is closed too: a message came (endRacedWait), and the receive
// that takes it comes first (closedLast); and in a race of children (the
// note's First), one cancelled when a sibling ended first. It returns the
// indexes it settled, a race of children's in the order they ended.
func (w *Workflow) settleWaitedChildren(ctx context.Context, kind string, fs []*Future, now time.Time) ([]int, error) {
	r := w.results
	if r == nil || r.Mode != lease.WaitChildren {
		return nil, nil
	}
	timer := raceDeadline(kind, fs)
	note := RaceNote(w.note)
	var settled []int
	for i, f := range fs {
		if f.kind != futureChild || f.done || !slices.ContainsFunc(r.Tasks, func(t lease.Task) bool { return t.ID == f.topic }) {
			continue
		}
		if _, err := w.trySettleChild(ctx, f); err != nil {
			return nil, err
		}
		if !f.done {
			continue
		}
		var ended *ChildEndedError
		cancelled := errors.As(f.err, &ended) && ended.Status == lease.StatusCancelled
		switch {
		case cancelled && note.Timer() && !timer.IsZero() && !timer.After(now):
			f.closed, f.closer = true, TimerFired
		case cancelled && strings.Contains(w.note, listenPrefix):
			f.closed, f.closer = true, MessageCame
		case cancelled && note.First() != "":
			// Cancelled when a sibling ended first (notifyOne's
			// FirstEnded), by the same clock tick, perhaps.
			f.closed, f.closer = true, FirstEnded
		}
		settled = append(settled, i)
	}
	if note.First() != "" {
		// A race of children: they settle in the order they ended (by
		// the clocks of the workers that ended them; a tie in argument
		// order), so the first to end wins; the others, cancelled when
		// it ended, are closed and come after it (closedLast).
		ended := func(i int) time.Time {
			for _, t := range r.Tasks {
				if t.ID == fs[i].topic {
					return t.FinishedAt
				}
			}
			return time.Time{}
		}
		slices.SortStableFunc(settled, func(a, b int) int {
			ta, tb := ended(a), ended(b)
			switch {
			case ta.IsZero() || tb.IsZero(): // unknown (an expired record): after the known
				return cmp.Compare(btoi(ta.IsZero()), btoi(tb.IsZero()))
			}
			return ta.Compare(tb)
		})
	}
	return settled, nil
}

// raceDeadline is the deadline of a Race or Any over fs, the earliest of
// its timers not settled, and in a Race of its receives' deadlines too (a
// receive that times out settles the race); zero for none or for another
// kind.
func raceDeadline(kind string, fs []*Future) time.Time {
	var at time.Time
	if kind != CombineRace && kind != CombineAny {
		return at
	}
	for _, f := range fs {
		raced := f.kind == futureTimer || kind == CombineRace && f.kind == futureReceive && !f.wake.IsZero()
		if f.done || !raced {
			continue
		}
		if at.IsZero() || f.wake.Before(at) {
			at = f.wake
		}
	}
	return at
}

// maxRaceListen bounds raceListen where the wait's note keeps it (a
// callback's or children's wait), leaving room for the note's other parts
// within lease.MaxWaitNoteBytes.
const maxRaceListen = lease.MaxWaitNoteBytes - 128

// raceListen is the receives of a Race or Any over fs not settled, as a
// wait note names them (AwaitCallbackError.Listen): "TOPIC#SEQ" joined by
// commas; "" for none or for another kind.
func raceListen(kind string, fs []*Future) string {
	var listen []string
	for _, f := range fs {
		if (kind == CombineRace || kind == CombineAny) && f.kind == futureReceive && !f.done {
			listen = append(listen, f.topic+"#"+strconv.FormatInt(f.seq, 10))
		}
	}
	return strings.Join(listen, ",")
}

// settleLiveAll settles, in a live run of the combinator kind over fs not
// decided by order (the futures settled so far), the receives, in
// argument order, until the first that has no message (its topic's wait
// is written: a send wakes the task); in a Race or Any, every receive is
// looked at, and the wait written names all their topics (a send on any
// wakes the task). Children settle only from what the task waited for
// (settleWaitedChildren). It stops once the outcome is decided, so no
// receive takes a message the outcome does not need, and returns order
// with those it settled appended.
func (w *Workflow) settleLiveAll(ctx context.Context, kind string, fs []*Future, order []int, pol policy) ([]int, error) {
	first := kind == CombineRace || kind == CombineAny
	var topics []string // a race's receives not settled
	for _, f := range fs {
		if first && f.kind == futureReceive && !f.done {
			topics = append(topics, f.topic)
		}
	}
	for i, f := range fs {
		if f.kind != futureReceive || f.done {
			continue
		}
		listen := f.topic
		if first {
			listen = strings.Join(topics, ",")
		}
		done, err := w.tryReceive(ctx, f, listen)
		if err != nil || !done && !first {
			return order, err
		}
		if !done {
			continue
		}
		topics = slices.DeleteFunc(topics, func(t string) bool { return t == f.topic })
		if order = append(order, i); decided(kind, fs, order, pol) {
			return order, nil
		}
	}
	return order, nil
}

// closeLosers closes the receives and children of fs that a combinator's
// outcome, order, left unsettled: a receive took no message (the next
// receive on its topic gets it), a child was never spawned.
func (w *Workflow) closeLosers(fs []*Future, order []int) {
	for i, f := range fs {
		if f.done || slices.Contains(order, i) || f.kind != futureReceive && f.kind != futureChild {
			continue
		}
		f.done, f.closed = true, true
		if f.kind == futureReceive {
			w.pend(f.topic, false)
		}
	}
}

// combineWait is the error that suspends the task for the combinator kind
// called name until something it needs settles (Combine).
func (w *Workflow) combineWait(ctx context.Context, kind, name string, fs []*Future, now time.Time) error {
	var cb *Future           // a callback future not settled
	var branchWait error     // a branch's callback wait
	var timer, nap time.Time // the earliest timer's deadline, and branch's sleep's end
	callbacks := []string(nil)
	var kids []*Future   // children not ended
	var ids []string     // their task ids
	var look time.Time   // when a receive not settled looks again
	var topics []string  // the topics of the receives not settled
	var branchKids error // a branch's wait for children
	nBranchKids := 0     // the branches that wait for children
	for _, f := range fs {
		var sn *SnoozeError
		var ac *AwaitCallbackError
		switch {
		case f.done:
		case f.kind == futureChild:
			kids, ids = append(kids, f), append(ids, w.childID(f))
		case f.kind == futureReceive:
			if at := f.receiveNext(now); look.IsZero() || at.Before(look) {
				look = at
			}
			if !slices.Contains(topics, f.topic) {
				topics = append(topics, f.topic)
			}
		case f.kind == futureCallback:
			cb = f
			callbacks = append(callbacks, f.name)
		case f.kind == futureTimer:
			if timer.IsZero() || f.wake.Before(timer) {
				timer = f.wake
			}
		case errors.As(f.err, &sn):
			if at := now.Add(sn.Delay); nap.IsZero() || at.Before(nap) {
				nap = at
			}
		case errors.As(f.err, &ac):
			branchWait = f.err
			callbacks = append(callbacks, "of the branch "+f.name)
		case errors.As(f.err, new(*AwaitChildrenError)):
			branchKids = f.err
			nBranchKids++
		default:
			return f.err // a branch's other wait (a continue-as-new, say)
		}
	}
	first := kind == CombineRace || kind == CombineAny
	others := len(callbacks) > 0 || !timer.IsZero() || !nap.IsZero() || len(topics) > 0
	if listen := raceListen(kind, fs); (len(callbacks) > 0 || len(kids) > 0) && len(listen) > maxRaceListen {
		return &PermanentError{Err: fmt.Errorf("%s %q races %d receives beside a callback or children: their topics and message numbers (%d bytes) do not fit the wait's note (at most %d)", kind, name, strings.Count(listen, ",")+1, len(listen), maxRaceListen)}
	}
	if branchKids != nil {
		if first && (others || len(kids) > 0 || nBranchKids > 1) {
			return &PermanentError{Err: fmt.Errorf("%s %q races a branch that waits for a child against something else: not yet: the store's wait for children ends at its deadline by failing the task, not by waking it (a parent waits for its children alone)", kind, name)}
		}
		if len(callbacks) == 0 {
			// AwaitAll and AllSettled: the branch's children, then the
			// others'.
			return branchKids
		}
	}
	switch {
	case len(callbacks) > 1:
		return &PermanentError{Err: fmt.Errorf("%s %q waits for callbacks %q at once: a run waits for one callback at a time (not yet: settle one first)", kind, name, callbacks)}
	case first && len(kids) > 0 && len(callbacks) == 0 && nap.IsZero() && (len(kids) > 1 || !timer.IsZero() || len(topics) > 0):
		// Children raced against each other, timers and messages: a wait
		// for the children whose deadline is the race's (raceDeadline),
		// where the worker cancels the children and runs the task again
		// (childTimerFired), whose note names the receives, whose message
		// does the same (endRacedWait), and, for several children, says
		// that the first to end (or succeed, in an Any) ends it: the
		// worker that hears of that end cancels the others (notifyOne).
		wait := childrenWait(kids, ids).(*AwaitChildrenError)
		if at := raceDeadline(kind, fs); !at.IsZero() {
			wait.Timeout, wait.Timer = max(at.Sub(now), time.Millisecond), true
		}
		wait.Listen = raceListen(kind, fs)
		if len(kids) > 1 {
			wait.First = kind
		}
		return wait
	case first && len(kids) == 1 && cb != nil && len(callbacks) == 1 && timer.IsZero() && nap.IsZero() && len(topics) == 0:
		// One child raced against one callback: the callback's wait,
		// whose note names the child, spawned first. The child's end
		// ends the wait (notifyOne, answer ChildEnded) and the task runs
		// again and waits for it as a child (closedLast keeps the closed
		// callback after it); the callback's answer has the child
		// cancelled (runCallback).
		_, err := w.callback(ctx, cb.name, cb.timeout, 0, cb.submit, cb.submitted, 0)
		if ac := (*AwaitCallbackError)(nil); errors.As(err, &ac) {
			ac.Children, ac.IDs, ac.First = []Child{*kids[0].child}, ids, kind
			if note := ac.Note(); len(note) > lease.MaxWaitNoteBytes {
				return &PermanentError{Err: fmt.Errorf("%s %q races the child %s against a callback: its id does not fit the wait's note (%d bytes, at most %d)", kind, name, ids[0], len(note), lease.MaxWaitNoteBytes)}
			}
		}
		return err
	case first && len(kids) > 0 && others:
		return &PermanentError{Err: fmt.Errorf("%s %q races the child %q against a callback with more beside them (a timer, a message, another child or callback) or against a branch: not yet: a callback wait ends at one child's end, not at a timer's or message's beside it (race one child against one callback, or a child against timers and messages)", kind, name, kids[0].name)}
	case first && len(topics) > 0 && branchWait != nil:
		return &PermanentError{Err: fmt.Errorf("%s %q races a message on %q against a branch's callback: not yet (race a callback future, CallbackAsync, against the message)", kind, name, topics[0])}
	case len(kids) > 0 && len(callbacks) == 0 && branchWait == nil:
		// AwaitAll and AllSettled wait for the children first (a sleep, a
		// message, waits its turn: a timer's deadline and a message keep).
		return childrenWait(kids, ids)
	case len(callbacks) == 0:
		until := timer
		if until.IsZero() || !nap.IsZero() && nap.Before(until) {
			until = nap
		}
		if until.IsZero() || !look.IsZero() && look.Before(until) {
			until = look
		}
		return &pauseError{msg: fmt.Sprintf("%s %q until %s", kind, name, until.UTC().Format(time.RFC3339)), snooze: SnoozeError{Delay: until.Sub(now)}}
	case !nap.IsZero():
		return &PermanentError{Err: fmt.Errorf("%s %q waits for a callback %s and a branch's sleep at once: not yet (the executor waits for one or the other)", kind, name, callbacks[0])}
	case branchWait != nil && first && !timer.IsZero():
		return &PermanentError{Err: fmt.Errorf("%s %q races a branch's callback against a timer: not yet (race a callback future, CallbackAsync, against the timer)", kind, name)}
	case branchWait != nil:
		return branchWait
	}
	// In a Race or Any, the receives not settled end the callback wait
	// with their message (Listen), and in a Race the earliest receive's
	// deadline is a timer's: it settles the race.
	deadline := raceDeadline(kind, fs)
	var err error
	if left := deadline.Sub(now); first && !deadline.IsZero() && left <= cb.timeout {
		_, err = w.callback(ctx, cb.name, cb.timeout, 0, cb.submit, cb.submitted, max(left, time.Millisecond))
	} else {
		_, err = w.callback(ctx, cb.name, cb.timeout, 0, cb.submit, cb.submitted, 0)
	}
	if ac := (*AwaitCallbackError)(nil); errors.As(err, &ac) {
		ac.Listen = raceListen(kind, fs)
	}
	return err
}

// btoi is 1 for true, 0 for false.
func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
