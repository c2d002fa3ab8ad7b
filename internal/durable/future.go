package durable

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
)

// The kinds of a Future.
const (
	futureStep uint8 = iota + 1
	futureTimer
	futureCallback
	futureBranch
	futureReceive
	futureChild
)

// Future is a durable operation started now and settled later: a step
// (StepFuture), a timer (TimerFuture) or a callback (CallbackFuture). Get
// waits for one; Combine for several (Race, Any, All, AllSettled). A
// future belongs to the run of the handler that made it, and is read from
// the handler's goroutine.
//
// What a future records keeps the history positional: a step records its
// result and a timer its deadline at the position where the future is
// made; a callback records nothing until its answer, which the worker
// records where the run waited for it (at the Get or combinator that
// suspended); and a combinator records its outcome (which futures
// settled, in which order) as one operation, so a replay sees the same
// outcome whatever settled since.
type Future struct {
	kind uint8
	// name is the step's name, the timer's step ("sleep#n") or the
	// callback's name.
	name string
	wake time.Time // a timer's deadline
	// timeout and submit are a callback's; submitted says this run handed
	// out its token already.
	timeout   time.Duration
	submit    func(ctx context.Context, token string) error
	submitted bool
	// done says the future settled, with out or err. closed says a
	// callback's wait ended at a raced timer or message: its token
	// answers nothing any more. expired says a receive's deadline ended
	// a raced callback's wait (settleOrder): it has timed out, whatever
	// this worker's clock says. closer is what closed a callback or
	// child in a race: TimerFired or MessageCame.
	done    bool
	closed  bool
	expired bool
	closer  string
	out     []byte
	err     error
	// recorded says err is a recorded outcome (a receive's timing out, a
	// child's failure), counted by a combinator, not a failed call.
	recorded bool
	// topic and seq are a receive's: its topic, and the number of the
	// message it takes; wake is its deadline (zero: look once), timeout
	// its timeout. child is a child's (InvokeFuture), name its await's,
	// and topic then its task id.
	topic string
	seq   int64
	child *Child
	// ch, a branch's, is closed when its goroutine has ended: only then
	// are done, out and err read (join).
	ch chan struct{}
}

// join waits for a branch's goroutine to end; other futures have none.
func (f *Future) join() {
	if f.ch != nil {
		<-f.ch
	}
}

// StepFuture runs fn as the step name now (StepAs) and returns it as a
// settled future: a step's function runs in the handler's goroutine, so
// its result is recorded at the future's position. An error of fn is the
// future's, recorded nowhere: Get and every combinator return it as it is,
// and the attempt retries as after any failed step.
func StepFuture(ctx context.Context, name, op string, fn func(context.Context) ([]byte, error)) *Future {
	out, err := stepOf(ctx, name, op, fn, false)
	return &Future{kind: futureStep, name: name, done: true, out: out, err: err}
}

// TimerFuture starts a durable timer of d: its deadline is recorded at
// once, as the step a SleepOf records ("sleep#n", sharing their count), so
// SleepOf(d) is TimerFuture(d) then Get. The timer settles, with no
// value, once its deadline has passed.
func TimerFuture(ctx context.Context, d time.Duration) *Future {
	w, ok := ctx.Value(workflowKey{}).(*Workflow)
	if !ok {
		return &Future{kind: futureTimer, done: true, err: ErrNoWorkflow}
	}
	if d < 0 || d > MaxSleep {
		return &Future{kind: futureTimer, done: true, err: &PermanentError{Err: fmt.Errorf("timer of %s: %w: want 0 to %s", d, lease.ErrInvalid, MaxSleep)}}
	}
	name := w.nextSleep(ctx)
	clock := w.att.Clock()
	raw, err := stepOf(ctx, name, OpSleep, func(context.Context) ([]byte, error) {
		return strconv.AppendInt(nil, clock.Now().Add(d).UnixMilli(), 10), nil
	}, false)
	if err != nil {
		return &Future{kind: futureTimer, name: name, done: true, err: err}
	}
	ms, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return &Future{kind: futureTimer, name: name, done: true, err: &PermanentError{Err: fmt.Errorf("step %q: recorded wake-up %q is not a time: %w", name, raw, err)}}
	}
	return &Future{kind: futureTimer, name: name, wake: time.UnixMilli(ms)}
}

// CallbackFuture starts the callback called name: where the run is new
// (at the end of its history, not a replay) it draws this run's callback
// token and hands it to submit at once; otherwise it hands it out only
// when the run must wait for the answer (submit may thus run once per
// attempt, as in CallbackOf). The answer is recorded as the step
// "callback:"+name where the run waited for it, so CallbackFuture then Get
// records what CallbackOf does. A run hands out one callback token: a
// second callback future that must submit fails the task.
func CallbackFuture(ctx context.Context, name string, timeout time.Duration, submit func(ctx context.Context, token string) error) *Future {
	f := &Future{kind: futureCallback, name: name, timeout: timeout, submit: submit}
	w, ok := ctx.Value(workflowKey{}).(*Workflow)
	if !ok {
		f.done, f.err = true, ErrNoWorkflow
		return f
	}
	if err := CheckAwaitName(name); err != nil {
		f.done, f.err = true, &PermanentError{Err: err}
		return f
	}
	sp := spaceOf(ctx)
	w.mu.Lock()
	_, replaying := w.att.(Replayer)
	live := w.next(sp) < 0 && w.diverged == nil && !replaying
	twice := w.called[sp.qualify("callback:"+name)]
	w.mu.Unlock()
	switch {
	case twice:
		f.done, f.err = true, &PermanentError{Err: fmt.Errorf("callback %q: %w", name, ErrStepTwice)}
	case live:
		f.submitted = true
		if err := w.submitCallback(ctx, name, submit); err != nil {
			f.done, f.err = true, err
		}
	}
	return f
}

// Get waits for f and returns its value: a step's result, nil for a
// timer, a callback's answer (a *CallbackFailedError for a failed one).
// While f has not settled, Get returns the error that suspends the task
// (a snooze until a timer's deadline, a wait for a callback), which the
// handler must return, as SleepOf and CallbackOf do.
func (f *Future) Get(ctx context.Context) ([]byte, error) {
	f.join()
	if f.kind == futureBranch && !f.done {
		w, _ := ctx.Value(workflowKey{}).(*Workflow)
		if w == nil {
			return nil, f.err
		}
		return nil, w.wait(ctx, f.err, fmt.Sprintf("the branch %q", f.name))
	}
	if f.done {
		return f.value()
	}
	w, ok := ctx.Value(workflowKey{}).(*Workflow)
	if !ok {
		return nil, ErrNoWorkflow
	}
	switch f.kind {
	case futureTimer:
		clock := w.att.Clock()
		if !f.wake.After(clock.Now()) {
			f.done = true
			return nil, nil
		}
		return nil, w.wait(ctx, &pauseError{msg: f.name + " until " + f.wake.UTC().Format(time.RFC3339), snooze: SnoozeError{Delay: f.wake.Sub(clock.Now())}}, sleepWhat(f.name))
	case futureCallback:
		out, err := w.callback(ctx, f.name, f.timeout, 0, f.submit, f.submitted, 0)
		if Suspends(err) {
			return nil, err
		}
		f.settleCallback(out, err)
		return f.value()
	case futureReceive:
		return w.getReceive(ctx, f)
	case futureChild:
		return w.getChild(ctx, f)
	}
	return f.value()
}

// value is a settled future's value.
func (f *Future) value() ([]byte, error) {
	if f.closed && f.kind == futureReceive {
		return nil, &PermanentError{Err: fmt.Errorf("receive %s lost the combinator it was in: it took no message (the next receive on %q gets it)", f.name, f.topic)}
	}
	if f.closed && f.kind == futureChild && f.err == nil {
		return nil, &PermanentError{Err: fmt.Errorf("invoke %q lost the combinator it was in: its child was never started, or was cancelled when what was raced against it (a timer, a message, a callback's answer) came first", f.name)}
	}
	if f.closed && f.closer == MessageCame {
		return nil, &CallbackFailedError{Name: f.name, Reason: "its wait ended at a message raced against it, which came first: its token answers nothing any more"}
	}
	if f.closed && f.closer == ChildEnded {
		return nil, &CallbackFailedError{Name: f.name, Reason: "its wait ended when a child raced against it ended first: its token answers nothing any more"}
	}
	if f.closed {
		return nil, &CallbackFailedError{Name: f.name, Reason: "its wait ended at the timer it was raced against, which fired first: its token answers nothing any more"}
	}
	return f.out, f.err
}

// settleCallback settles the callback f with its recorded answer (out, or
// err), closed when the answer is a raced timer's (TimerFired), message's
// (MessageCame) or child's (ChildEnded).
func (f *Future) settleCallback(out []byte, err error) {
	f.done, f.out, f.err = true, out, err
	var failed *CallbackFailedError
	if errors.As(err, &failed) && Reserved(failed.Reason) {
		f.closed, f.closer = true, failed.Reason
	}
}

// settled reports whether f has settled by now.
func (f *Future) settled(now time.Time) bool {
	if f.kind == futureTimer && !f.done && !f.wake.After(now) {
		f.done = true
	}
	return f.done
}

// succeeded reports whether a settled f succeeded.
func (f *Future) succeeded() bool { return f.done && f.err == nil && !f.closed }

// The combinators (Combine's kind).
const (
	CombineRace       = "race"
	CombineAny        = "any"
	CombineAll        = "all"
	CombineAllSettled = "allsettled"
	CombineParallel   = "parallel"
)

// combined is a combinator's recorded outcome: the indexes of the futures
// that had settled, in the order they settled.
type combined struct {
	Order []int `json:"order"`
}

// Combine waits for fs as the combinator kind (CombineRace: the first to
// settle; CombineAny: the first to succeed, or all settled; CombineAll:
// all succeeded, or the first failure; CombineAllSettled: all settled)
// called name, and returns the indexes of the futures that settled, in
// the order they settled; the caller reads the values with Get. The
// outcome is recorded as the step kind+":"+name (operation "KIND N"), so
// a replay returns the same order, whatever has settled since.
//
// The order: callbacks answered while the combinator waited, in the
// order of their answers, then the other settled futures in argument
// order, then callbacks closed by a raced timer. While the outcome is not
// decided, Combine returns the error that suspends the task on what it
// needs: a snooze until the earliest timer's deadline, or a wait for the
// one callback it needs, whose deadline, for Race and Any, is the
// earliest timer's when that comes before the callback's own timeout (at
// which the timer wins, with no failure). A mix it cannot wait on (two
// callbacks not settled) fails the task, naming the mix. An error of a
// step (not recorded) is returned as it is, and nothing is recorded.
func Combine(ctx context.Context, kind, name string, fs []*Future) ([]int, error) {
	return combine(ctx, kind, name, fs, policy{})
}

// policy is a parallel's completion policy (ParallelOf).
type policy struct{ min, tolerated int }

// combine is Combine's work; pol is CombineParallel's.
func combine(ctx context.Context, kind, name string, fs []*Future, pol policy) ([]int, error) {
	w, ok := ctx.Value(workflowKey{}).(*Workflow)
	if !ok {
		return nil, ErrNoWorkflow
	}
	if err := CheckAwaitName(name); err != nil {
		return nil, &PermanentError{Err: fmt.Errorf("%s: %w", kind, err)}
	}
	if len(fs) == 0 {
		return nil, &PermanentError{Err: fmt.Errorf("%s %q: %w: no futures", kind, name, lease.ErrInvalid)}
	}
	for _, f := range fs {
		if f == nil {
			return nil, &PermanentError{Err: fmt.Errorf("%s %q: %w: a nil future", kind, name, lease.ErrInvalid)}
		}
	}
	for _, f := range fs {
		// Every branch goes as far as it can first: the task waits only
		// when none can go on.
		f.join()
	}
	for _, f := range fs {
		if f.kind == futureBranch && !f.done && !Suspends(f.err) {
			return nil, f.err // a failed step, a divergence: recorded nowhere
		}
		var answered *CallbackFailedError
		if f.kind != futureBranch && f.done && f.err != nil && !f.recorded && !errors.As(f.err, &answered) {
			// A step's failure, a timer's invalid duration, a callback's
			// submit error: recorded nowhere.
			return nil, f.err
		}
	}
	step, op := kind+":"+name, kind+" "+strconv.Itoa(len(fs))
	// Answers the worker recorded at this point for callbacks of fs, in
	// the order they came, then the outcome, if recorded.
	var answered []int
	sp := spaceOf(ctx)
	for {
		w.mu.Lock()
		i := -1
		if at := w.next(sp); at >= 0 && w.diverged == nil {
			i = answerNamed(fs, w.steps[at].Name, sp)
		}
		w.mu.Unlock()
		if i < 0 {
			break
		}
		if fs[i].kind != futureCallback {
			// A receive's or a child's outcome, replayed.
			if _, err := w.settleLive(ctx, fs[i]); err != nil {
				return nil, err
			}
			answered = append(answered, i)
			continue
		}
		out, err := w.callback(ctx, fs[i].name, fs[i].timeout, 0, fs[i].submit, true, 0)
		if Suspends(err) || isRunEnd(err) {
			return nil, err
		}
		fs[i].settleCallback(out, err)
		answered = append(answered, i)
	}
	w.mu.Lock()
	recorded := w.next(sp) >= 0
	w.mu.Unlock()
	now := w.att.Clock().Now()
	var order []int
	if !recorded {
		kids, err := w.settleWaitedChildren(ctx, kind, fs, now)
		if err != nil {
			return nil, err
		}
		answered = append(answered, kids...)
		order = settleOrder(kind, fs, answered, now)
		if !decided(kind, fs, order, pol) {
			var err error
			if order, err = w.settleLiveAll(ctx, kind, fs, order, pol); err != nil {
				return nil, err
			}
		}
		order = closedLast(fs, order)
		if !decided(kind, fs, order, pol) {
			return nil, w.wait(ctx, w.combineWait(ctx, kind, name, fs, now), fmt.Sprintf("workflow.%s %q", kind, name))
		}
	}
	raw, err := stepOf(ctx, step, op, func(context.Context) ([]byte, error) {
		return json.Marshal(combined{Order: order})
	}, false)
	if err != nil {
		return nil, err
	}
	var c combined
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, &PermanentError{Err: fmt.Errorf("step %q: recorded outcome %q is not a combinator's: %w", step, raw, err)}
	}
	for _, i := range c.Order {
		if i < 0 || i >= len(fs) {
			return nil, &PermanentError{Err: fmt.Errorf("step %q: recorded outcome names future %d of %d", step, i, len(fs))}
		}
		if fs[i].kind == futureTimer {
			fs[i].done = true // settled when the outcome was decided
		}
	}
	w.closeLosers(fs, c.Order)
	return c.Order, nil
}

// isRunEnd reports whether err ends the run rather than settling a
// future: a divergence, or the end of a replay's history.
func isRunEnd(err error) bool {
	var d *DivergedError
	return errors.As(err, &d) || errors.Is(err, ErrHistoryEnd) || errors.Is(err, ErrNoWorkflow)
}

// answerNamed is the index of the future of fs, not settled, whose
// answer is the step name (as the space sp records it): a callback's, a
// receive's or a child's; -1 for none.
func answerNamed(fs []*Future, name string, sp *space) int {
	for i, f := range fs {
		if f.done {
			continue
		}
		switch {
		case f.kind == futureCallback && name == sp.qualify("callback:"+f.name),
			f.kind == futureReceive && name == sp.qualify(f.name),
			f.kind == futureChild && name == sp.qualify("children:"+f.name):
			return i
		}
	}
	return -1
}

// settleOrder is the order of the futures of fs that have settled by now
// (Combine): answered first, then the others in argument order; the
// callbacks closed by a raced timer or message come after them and after
// the receives settled live (closedLast).
func settleOrder(kind string, fs []*Future, answered []int, now time.Time) []int {
	order := make([]int, 0, len(fs))
	var earliest *Future // the timer, or a Race's receive, a closed callback's wait ended at
	for _, f := range fs {
		if !f.done && (f.kind == futureTimer || kind == CombineRace && f.kind == futureReceive && !f.wake.IsZero()) && (earliest == nil || f.wake.Before(earliest.wake)) {
			earliest = f
		}
	}
	for _, i := range answered {
		if fs[i].closed && fs[i].closer == TimerFired && earliest != nil {
			// Its wait's deadline was that timer's (or receive's), by the
			// clock of the worker that ended it, whatever this one's says.
			if earliest.kind == futureTimer {
				earliest.done = true
			} else {
				earliest.expired = true
			}
		}
	}
	for _, i := range answered {
		if !fs[i].closed {
			order = append(order, i)
		}
	}
	for i, f := range fs {
		if f.settled(now) && !f.closed && !containsInt(answered, i) {
			order = append(order, i)
		}
	}
	return order
}

// closedLast appends to order the callbacks and children of fs closed by
// a raced timer, message or child: they lost to what closed them (and
// win only when nothing else settled). A callback closed by a child
// (ChildEnded) waits while a child of fs has not settled: that child,
// read once the task has waited for it, comes first.
func closedLast(fs []*Future, order []int) []int {
	kidOpen := slices.ContainsFunc(fs, func(f *Future) bool { return f.kind == futureChild && !f.done })
	for i, f := range fs {
		if f.closed && !slices.Contains(order, i) && !(kidOpen && f.closer == ChildEnded) {
			order = append(order, i)
		}
	}
	return order
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// decided reports whether the combinator kind over fs is decided by the
// settled futures in order.
func decided(kind string, fs []*Future, order []int, pol policy) bool {
	switch kind {
	case CombineParallel:
		ok, failed := 0, 0
		for _, i := range order {
			if fs[i].succeeded() {
				ok++
			} else {
				failed++
			}
		}
		if pol.min > 0 && ok >= pol.min || failed > pol.tolerated {
			return true
		}
	case CombineRace:
		return len(order) > 0
	case CombineAny:
		for _, i := range order {
			if fs[i].succeeded() {
				return true
			}
		}
	case CombineAll:
		for _, i := range order {
			if !fs[i].succeeded() {
				return true
			}
		}
	}
	return len(order) == len(fs)
}
