package demo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lifecycle"
)

// taskReader is the store call the watch makes.
type taskReader interface {
	Get(ctx context.Context, id string) (lease.Task, error)
}

// dlqReader is the SQS call the watch makes.
type dlqReader interface {
	ReceiveMessage(ctx context.Context, params *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
}

// queued is the pseudo-state of a task whose record does not exist yet.
const queued = "QUEUED"

// observed is what the watch has seen of one planned message.
type observed struct {
	enqueuedAt time.Time
	state      string // queued, a lease.Status, or deadLettered
	attempt    int
	fence      int64
	leaseUntil time.Time
	renewals   int
	settledAt  time.Time
	result     string
	lastError  string
	reason     string // dead-letter reason
	finishedAt time.Time
	completed  bool // the demo has answered its callback
	messaged   bool // the demo has sent it its message
}

func (o *observed) settled() bool {
	return o.state == deadLettered || lease.Status(o.state).Terminal()
}

// watch follows the planned messages through the table and the dead-letter
// queue, reporting every change it sees.
type watch struct {
	store  taskReader
	q      dlqReader
	dlq    string
	prefix string
	plan   []planned
	seen   []observed
	out    *progress
	start  time.Time
	// complete answers the callback of a task waiting for one, as a user
	// would with the CLI; it returns what to show.
	complete func(ctx context.Context, id string) (string, error)
	// send sends a message body to the work queue (a task's message, in
	// the message form).
	send func(ctx context.Context, body string) error

	// The schedule's fired slots (task ids), from the firer's goroutine.
	firedMu sync.Mutex
	fired   []string
}

// slotFired records a slot the schedule firer sent.
func (w *watch) slotFired(taskID string) {
	w.firedMu.Lock()
	defer w.firedMu.Unlock()
	w.fired = append(w.fired, taskID)
}

// pollSchedule reads the fired slots' tasks: planned i settles once
// wantSlots of them have SUCCEEDED.
func (w *watch) pollSchedule(ctx context.Context, i int) error {
	w.firedMu.Lock()
	fired := slices.Clone(w.fired)
	w.firedMu.Unlock()
	o, p := &w.seen[i], w.plan[i]
	done, last := 0, ""
	for _, id := range fired {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		t, err := w.store.Get(cctx, id)
		cancel()
		switch {
		case errors.Is(err, lease.ErrNotFound):
			continue
		case err != nil:
			return fmt.Errorf("read slot %s: %w", id, err)
		}
		o.state = string(lease.StatusRunning)
		if t.Status == lease.StatusSucceeded && t.Attempt == 1 {
			done, last = done+1, id
		}
	}
	if done > o.attempt {
		w.event(p.name, "slot %d of the schedule SUCCEEDED (%d fired): %s", done, len(fired), last)
		o.attempt = done
	}
	if done >= p.wantSlots {
		o.state, o.settledAt, o.finishedAt = string(lease.StatusSucceeded), time.Now(), time.Now()
		o.result = fmt.Sprintf("%d slots", done)
	}
	return nil
}

func newWatch(store taskReader, q dlqReader, dlq, runID string, p []planned, out *progress) *watch {
	w := &watch{store: store, q: q, dlq: dlq, prefix: "demo-" + runID + "-", plan: p, seen: make([]observed, len(p)), out: out, start: time.Now()}
	for i := range w.seen {
		w.seen[i].state = queued
	}
	return w
}

func (w *watch) id(i int) string { return w.prefix + w.plan[i].name }

func (w *watch) enqueued(i int, at time.Time) { w.seen[i].enqueuedAt = at }

// run polls until every message has settled, the timeout passes, ctx ends,
// or the runner stops on its own.
func (w *watch) run(ctx context.Context, timeout time.Duration, runnerDone chan error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for n := 0; ; n++ {
		if err := w.poll(ctx, n%4 == 0); err != nil && ctx.Err() == nil {
			return err
		}
		w.out.bar(w.counts(), time.Since(w.start))
		if w.allSettled() {
			return nil
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("%w: still unsettled after %s", ErrUnexpected, timeout)
			}
			return ctx.Err()
		case err := <-runnerDone:
			runnerDone <- err // for Run
			return fmt.Errorf("runner stopped early: %w", err)
		case <-tick.C:
		}
	}
}

// poll reads every unsettled task, and the dead-letter queue when withDLQ.
// The reads go out together, so that one slow answer on a loaded machine
// does not space the slow task's reads wider than its renewals (the demo
// shows them as they come); what they read is then reported in plan order.
func (w *watch) poll(ctx context.Context, withDLQ bool) error {
	read := w.readUnsettled(ctx)
	for i, p := range w.plan {
		o := &w.seen[i]
		if o.settled() || p.want == deadLettered {
			continue
		}
		if p.schedule {
			if err := w.pollSchedule(ctx, i); err != nil {
				return err
			}
			continue
		}
		t, err := read[i].task, read[i].err
		if errors.Is(err, lease.ErrNotFound) {
			continue // not stored yet (the dispatcher has not got to it)
		}
		if err != nil {
			return fmt.Errorf("read task %s: %w", p.name, err)
		}
		w.observe(i, t)
		if o := &w.seen[i]; p.callback && t.Status == lease.StatusWaiting && t.Wait == lease.WaitCallback && !o.completed && w.complete != nil {
			shown, err := w.complete(ctx, w.id(i))
			if err != nil {
				return fmt.Errorf("complete %s: %w", p.name, err)
			}
			o.completed = true
			w.event(p.name, "%s", shown)
		}
		if o := &w.seen[i]; p.message != "" && !o.messaged && w.send != nil && receiving(t, p.message) {
			body := sendForm(w.id(i), p.message)
			if err := w.send(ctx, body); err != nil {
				return fmt.Errorf("send %s its message: %w", p.name, err)
			}
			o.messaged = true
			w.event(p.name, "its receive started: message sent with SendMessage to the work queue: %s", body)
		}
	}
	if withDLQ {
		return w.pollDLQ(ctx)
	}
	return nil
}

// taskRead is one task's read in a poll.
type taskRead struct {
	task lease.Task
	err  error
}

// readUnsettled reads the plan's unsettled tasks (schedules and planned
// dead letters aside) concurrently, each read within callTimeout, and
// returns when all have answered.
func (w *watch) readUnsettled(ctx context.Context) []taskRead {
	read := make([]taskRead, len(w.plan))
	var wg sync.WaitGroup
	for i, p := range w.plan {
		if w.seen[i].settled() || p.want == deadLettered || p.schedule {
			continue
		}
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, callTimeout)
			defer cancel()
			read[i].task, read[i].err = w.store.Get(cctx, w.id(i))
		})
	}
	wg.Wait()
	return read
}

// receiving reports whether t has started a receive on topic: its
// first receive's start (recv:TOPIC#1#start, recorded before it waits) or
// the receive itself is in its history.
func receiving(t lease.Task, topic string) bool {
	return slices.ContainsFunc(t.Steps, func(s lease.Step) bool { return strings.HasPrefix(s.Name, "recv:"+topic+"#") })
}

// receiveTopic is the topic of t's last recorded receive (a step
// recv:TOPIC#n...), or "" if it has none.
func receiveTopic(t lease.Task) string {
	for _, st := range slices.Backward(t.Steps) {
		if rest, ok := strings.CutPrefix(st.Name, "recv:"); ok {
			topic, _, _ := strings.Cut(rest, "#")
			return topic
		}
	}
	return ""
}

// observe compares a task record with the last one seen and reports the
// difference.
func (w *watch) observe(i int, t lease.Task) {
	o, name := &w.seen[i], w.plan[i].name
	switch {
	case string(t.Status) != o.state || t.Attempt != o.attempt:
		switch t.Status {
		case lease.StatusPending:
			if o.state == string(lease.StatusWaiting) && t.Wait == lease.WaitCallback {
				w.event(name, "callback answered: it runs again, as attempt %d, to read the answer", t.Attempt+1)
			} else if len(t.WaitFor) > 0 && o.state == string(lease.StatusWaiting) {
				w.event(name, "woken: every task it waited for has ended")
			} else if topic := receiveTopic(t); topic != "" && t.RunAt.After(time.Now()) {
				w.event(name, "asleep until a message on %q or its timeout, whichever comes first (due %s), holding no lease", topic, w.rel(t.RunAt))
			} else if t.Attempt == 0 {
				w.event(name, "stored by the dispatcher, due %s", w.rel(t.RunAt))
			} else {
				w.event(name, "attempt %d failed (%s); retry due %s", t.Attempt, t.Error, w.rel(t.RunAt))
			}
		case lease.StatusRunning:
			w.event(name, "attempt %d of %d running, lease until %s", t.Attempt, t.MaxAttempts, w.rel(t.LeaseUntil))
		case lease.StatusSucceeded:
			w.event(name, "SUCCEEDED on attempt %d: %s", t.Attempt, t.Result)
		case lease.StatusFailed:
			w.event(name, "FAILED after %d attempt(s): %s", t.Attempt, t.Error)
		case lease.StatusWaiting:
			if t.Wait == lease.WaitCallback {
				w.event(name, "WAITING for a callback until %s, holding no lease", w.rel(t.WaitUntil))
			} else {
				w.event(name, "WAITING for %d %s (%d ended), holding no lease", len(t.WaitFor), t.Wait, len(t.Ended))
			}
		default:
			w.event(name, "%s after %d attempt(s)", t.Status, t.Attempt)
		}
	case t.Status == lease.StatusRunning && t.Fence == o.fence && t.LeaseUntil.After(o.leaseUntil):
		o.renewals++
		w.event(name, "lease renewed (#%d), now until %s", o.renewals, w.rel(t.LeaseUntil))
	}
	o.state, o.attempt, o.fence, o.leaseUntil = string(t.Status), t.Attempt, t.Fence, t.LeaseUntil
	o.result, o.lastError = string(t.Result), t.Error
	if t.Status.Terminal() {
		o.settledAt, o.finishedAt = t.FinishedAt, t.FinishedAt
	}
}

// pollDLQ looks for the run's dead-lettered messages. Messages of other runs
// are left where they are.
func (w *watch) pollDLQ(ctx context.Context) error {
	pending := false
	for i, p := range w.plan {
		if p.want == deadLettered && !w.seen[i].settled() {
			pending = true
		}
	}
	if !pending {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	out, err := w.q.ReceiveMessage(cctx, &sqs.ReceiveMessageInput{
		QueueUrl:            aws.String(w.dlq),
		MaxNumberOfMessages: 10,
		// Messages of earlier runs stay hidden for a while, so that the
		// next receive looks further into the queue.
		VisibilityTimeout:           30,
		MessageAttributeNames:       []string{"All"},
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameSentTimestamp},
	})
	if err != nil {
		return fmt.Errorf("read the dead-letter queue: %w", err)
	}
	for _, m := range out.Messages {
		for i, p := range w.plan {
			o := &w.seen[i]
			if p.want != deadLettered || o.settled() || aws.ToString(m.Body) != p.body(w.id(i)) {
				continue
			}
			o.state = deadLettered
			if a, ok := m.MessageAttributes[lifecycle.AttrReason]; ok {
				o.reason = aws.ToString(a.StringValue)
			}
			o.settledAt = time.Now()
			if ms, err := strconv.ParseInt(m.Attributes[string(sqstypes.MessageSystemAttributeNameSentTimestamp)], 10, 64); err == nil {
				o.settledAt = time.UnixMilli(ms)
			}
			w.event(p.name, "in the work dead-letter queue, reason: %s", o.reason)
		}
	}
	return nil
}

func (w *watch) event(name, format string, args ...any) {
	w.out.event(fmt.Sprintf("%6.1fs  %-12s %s", time.Since(w.start).Seconds(), name, fmt.Sprintf(format, args...)))
}

// rel shows a time relative to the demo's start.
func (w *watch) rel(t time.Time) string {
	return fmt.Sprintf("%.1fs", t.Sub(w.start).Seconds())
}

func (w *watch) allSettled() bool {
	for i := range w.seen {
		if !w.seen[i].settled() {
			return false
		}
	}
	return true
}

// counts returns how many messages are in each state, in display order.
func (w *watch) counts() []stateCount {
	order := []string{queued, string(lease.StatusPending), string(lease.StatusRunning), string(lease.StatusWaiting),
		string(lease.StatusSucceeded), string(lease.StatusFailed), string(lease.StatusCancelled), deadLettered}
	n := map[string]int{}
	for _, o := range w.seen {
		n[o.state]++
	}
	var out []stateCount
	for _, s := range order {
		out = append(out, stateCount{state: s, n: n[s]})
	}
	return out
}

type stateCount struct {
	state string
	n     int
}

// asExpected says whether message i ended as planned, and if not, why.
func (w *watch) asExpected(i int) (bool, string) {
	p, o := w.plan[i], w.seen[i]
	switch {
	case o.state != p.want:
		return false, "ended " + o.state
	case p.want == deadLettered && !strings.Contains(o.reason, "malformed"):
		return false, "no malformed-JSON reason recorded"
	case p.wantAttempts > 0 && o.attempt != p.wantAttempts:
		return false, fmt.Sprintf("%d attempts", o.attempt)
	case o.renewals < p.minRenewals:
		return false, fmt.Sprintf("only %d renewals seen", o.renewals)
	case o.settledAt.Sub(o.enqueuedAt) < p.minLatency:
		return false, "ran too early"
	case p.wantResult != "" && o.result != p.wantResult:
		return false, "result " + o.result
	case p.wantFence > 0 && o.fence != p.wantFence:
		return false, fmt.Sprintf("fence %d: resumed %d times", o.fence, o.fence-1)
	case p.callback && !o.completed:
		return false, "the demo never completed its callback"
	case p.message != "" && !o.messaged:
		return false, "the demo never sent its message"
	case p.won != "" && winner(o.result) != p.won:
		return false, cmp.Or(winner(o.result), "nobody") + " won"
	}
	if p.after != "" {
		for j, q := range w.plan {
			if q.name == p.after && w.seen[j].finishedAt.After(o.finishedAt) {
				return false, "finished before " + p.after
			}
		}
	}
	return true, ""
}

func (w *watch) allAsExpected() bool {
	for i := range w.plan {
		if ok, _ := w.asExpected(i); !ok {
			return false
		}
	}
	return true
}
