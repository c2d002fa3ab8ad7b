package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jonboulle/clockwork"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold/internal/claimcheck"
	"github.com/leasehold/leasehold/internal/durable"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/mapstate"
	"github.com/leasehold/leasehold/internal/lifecycle"
)

// Timeout bounds one history's replay: a handler blocked outside its
// durable calls (on a network call of its own, say) is reported as failed
// rather than stalling the check.
const Timeout = 30 * time.Second

// Report is the replay of one history.
type Report struct {
	ID, Kind string
	// Recorded counts the operations the history records, Replayed those
	// the code called as recorded before it stopped.
	Recorded, Replayed int
	// Next describes the code's first operation beyond the history, which
	// a live run would run; "" when the code called none.
	Next string
	// Waits is the wait the handler returned (a recorded sleep that had not
	// passed when the history was read), "" for none.
	Waits string
	// Diverged is the divergence a worker would hold the task for, nil for
	// none.
	Diverged *durable.DivergedError
	// Failed is why the replay failed otherwise: no handler for the kind,
	// or the handler's error or panic outside its durable calls (a
	// recorded result that no longer decodes, say), which a worker would
	// retry and, every attempt failing alike, fail the task with.
	Failed error
}

// OK reports whether the code replays the history as recorded.
func (r Report) OK() bool { return r.Diverged == nil && r.Failed == nil }

// String is one line: "ok", "DIVERGED" or "FAILED", the task, and what
// the replay found.
func (r Report) String() string {
	head := fmt.Sprintf("%s (%s)", lease.DisplayID(r.ID), r.Kind)
	switch {
	case r.Diverged != nil:
		return fmt.Sprintf("DIVERGED %s: %v", head, r.Diverged)
	case r.Failed != nil:
		return fmt.Sprintf("FAILED   %s: replayed %d of %d recorded operations, then: %v", head, r.Replayed, r.Recorded, r.Failed)
	}
	s := fmt.Sprintf("ok       %s: replayed %d recorded %s", head, r.Replayed, plural(r.Replayed, "operation"))
	switch {
	case r.Next != "":
		s += "; next, new: " + r.Next
	case r.Waits != "":
		s += "; waits: " + r.Waits
	default:
		s += "; then the handler returns"
	}
	return s
}

// plural is noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return noun
	}
	return noun + "s"
}

// Run replays h through the handler that handlers has for its kind: the
// handler runs with every durable call of the history answered from it
// and every call beyond it stopped (durable.Replayer), so no step's
// function runs and nothing is read or written. ctx bounds the run, at
// most Timeout.
func Run(ctx context.Context, handlers func(kind string) (lifecycle.Handler, bool), h History) Report {
	t := h.task()
	r := Report{ID: t.ID, Kind: t.Kind, Recorded: len(t.Steps)}
	handler, ok := handlers(t.Kind)
	if !ok {
		r.Failed = fmt.Errorf("no handler for kind %q in this build", t.Kind)
		return r
	}
	exported := h.Exported
	if exported.IsZero() {
		exported = time.Now()
	}
	att := &attempt{clock: clockwork.NewFakeClockAt(exported), claims: &claimcheck.Checker{Blobs: fileBlobs(h.Blobs)}}
	att.awaitName, att.awaitOp = awaiting(t)
	if claimcheck.IsRef(t.Payload) {
		// Kept in the payload bucket: the worker reads it back before the
		// handler runs, the replay from the history's values.
		p, err := att.claims.Fetch(ctx, t.Payload)
		if err != nil {
			r.Failed = fmt.Errorf("payload: %w", err)
			return r
		}
		t.Payload = p
	}
	var w durable.Workflow
	w.Start(att, t.LeaseOf(), t.Steps, t.WaitNote, nil)
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	err := call(&durable.Scope{Context: ctx, Workflow: &w}, handler, t)
	w.Join() // the handler's branches, if any, end before the report

	unreplayed := w.Unreplayed()
	r.Replayed = r.Recorded
	if unreplayed != nil {
		r.Replayed = unreplayed.Position - 1
	}
	r.Next = att.next
	switch d := w.Diverged(); {
	case d != nil:
		r.Diverged, r.Next = d, ""
	case att.beyond:
		// Whatever the handler did with ErrHistoryEnd is the replay's own
		// doing: the history matched up to its end.
	case err == nil && unreplayed != nil:
		r.Diverged = unreplayed
	case err == nil:
	case durable.Suspends(err) && unreplayed == nil:
		r.Waits = err.Error()
	case durable.Suspends(err):
		r.Failed = fmt.Errorf("the handler waits (%w) before the end of its history", err)
	default:
		r.Failed = err
	}
	return r
}

// call runs handler on t under ctx, its panic an error.
func call(ctx context.Context, handler lifecycle.Handler, t lease.Task) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the handler panicked: %v", p)
		}
	}()
	_, err = handler(ctx, t)
	return err
}

// awaiting is the operation t waits in that its history does not record
// yet, the one a resumed run calls first where the history ends: the
// await of children (AllOf, with its count) or of a map (MapOf, with its
// shape: a sliding map's or a wave's) it resumes from, or the callback whose answer it waits
// for. "" for none.
func awaiting(t lease.Task) (name, op string) {
	switch t.Wait {
	case lease.WaitChildren:
		if len(t.WaitFor) == 0 {
			return "", ""
		}
		await := durable.AwaitNameOf(t.ID, t.WaitFor[0])
		if await == "" {
			return "", ""
		}
		var note struct {
			Map   string `json:"map"`
			Shape string `json:"shape"`
		}
		if slide, shape, ok := durable.ParseSlideNote(t.WaitNote); ok && slide == await {
			name, op = "map:"+await, shape
		} else if json.Unmarshal([]byte(t.WaitNote), &note) == nil && note.Map == await {
			name, op = "map:"+await, note.Shape
		} else {
			name, op = "children:"+await, "all "+strconv.Itoa(len(t.WaitFor))
		}
	case lease.WaitCallback:
		if t.Status != lease.StatusWaiting || t.CallbackStep == "" {
			return "", ""
		}
		name, op = t.CallbackStep, "callback"
	default:
		return "", ""
	}
	if _, recorded := t.StepResult(name); recorded {
		return "", ""
	}
	return name, op
}

var (
	errWrites = errors.New("a replay writes nothing")
	errReads  = errors.New("a replay reads no task: the outcomes of other tasks are not in a history")
)

// attempt is a replay's durable.Replayer, and its durable.Stower that
// reads from the history's values and stores nothing.
type attempt struct {
	clock              clockwork.Clock
	claims             *claimcheck.Checker
	awaitName, awaitOp string
	// beyond says a durable call went beyond the history; next describes
	// the first. The durable calls are made under the Workflow's lock.
	beyond bool
	next   string
}

func (a *attempt) Trusted(context.Context) error { return nil }

func (a *attempt) Checkpoint(context.Context, lease.Lease, lease.Step) (lease.Task, error) {
	return lease.Task{}, errWrites
}

func (a *attempt) Spill(context.Context, lease.Lease, int) (lease.Task, error) {
	return lease.Task{}, errWrites
}

func (a *attempt) PutStep(context.Context, string, int, lease.Step) (lease.Step, error) {
	return lease.Step{}, errWrites
}

func (a *attempt) ReadTasks(context.Context, []string) ([]lease.Task, error) { return nil, errReads }
func (a *attempt) MapGroups(context.Context, []string) ([]mapstate.Group, error) {
	return nil, errReads
}

func (a *attempt) StowStep(context.Context, int, []byte) ([]byte, bool, error) {
	return nil, false, errWrites
}

func (a *attempt) FetchOf(ctx context.Context, _ string, ref []byte) ([]byte, error) {
	return a.claims.Fetch(ctx, ref)
}

func (a *attempt) Clock() clockwork.Clock { return a.clock }

func (a *attempt) Tracer() trace.Tracer { return nil }

func (a *attempt) Awaits() bool { return a.awaitName != "" }

// Beyond stops every call beyond the history; the first must be the
// operation the task waits in, if it waits in one.
func (a *attempt) Beyond(position int, name, op string) error {
	if !a.beyond {
		a.beyond, a.next = true, durable.DescribeOp(name, op)
		if a.awaitName != "" && (name != a.awaitName || a.awaitOp != "" && op != a.awaitOp) {
			return &durable.DivergedError{Position: position, Recorded: durable.DescribeOp(a.awaitName, a.awaitOp) + ", which the task waits in", Asked: a.next}
		}
	}
	return fmt.Errorf("%w: the code's next operation, %s, would run in a live attempt", durable.ErrHistoryEnd, durable.DescribeOp(name, op))
}
