package durable

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/mapstate"
)

// attempt is an Attempt that records checkpoints in memory and counts
// them: the package's own view of what the executor writes.
type attempt struct {
	clock       *clockwork.FakeClock
	checkpoints []string
	fail        error // returned by Checkpoint when set
}

func (a *attempt) Trusted(context.Context) error { return nil }
func (a *attempt) Checkpoint(_ context.Context, _ lease.Lease, st lease.Step) (lease.Task, error) {
	if a.fail != nil {
		return lease.Task{}, a.fail
	}
	a.checkpoints = append(a.checkpoints, st.Name)
	return lease.Task{}, nil
}
func (a *attempt) Spill(context.Context, lease.Lease, int) (lease.Task, error) {
	return lease.Task{}, a.fail
}
func (a *attempt) PutStep(_ context.Context, _ string, _ int, st lease.Step) (lease.Step, error) {
	if a.fail != nil {
		return lease.Step{}, a.fail
	}
	a.checkpoints = append(a.checkpoints, st.Name)
	return st, nil
}
func (a *attempt) ReadTasks(context.Context, []string) ([]lease.Task, error) { return nil, nil }
func (a *attempt) MapGroups(context.Context, []string) ([]mapstate.Group, error) {
	return nil, lease.ErrNotFound
}
func (a *attempt) Clock() clockwork.Clock { return a.clock }
func (a *attempt) Tracer() trace.Tracer   { return nil }

// run starts w as a run of task "p" with steps and results, and returns
// the handler's context.
func run(w *Workflow, a *attempt, steps []lease.Step, results *WaitResults) context.Context {
	w.Start(a, lease.Lease{TaskID: "p", Fence: 1, Attempt: 1}, steps, "", results)
	return &Scope{Context: context.Background(), Workflow: w}
}

func kids(n int) []Child {
	out := make([]Child, n)
	for i := range out {
		out[i] = Child{Kind: "k"}
	}
	return out
}

// ended are the tasks of a finished wait for the children of the await
// name of task "p".
func ended(name string, n int) *WaitResults {
	r := &WaitResults{Mode: lease.WaitChildren}
	for i := range n {
		r.Tasks = append(r.Tasks, lease.Task{ID: ChildIDIn("p", name, i), Status: lease.StatusSucceeded, Result: []byte("1")})
	}
	return r
}

// TestAllOfDerivesItsOutcomes: AllOf reads its outcomes from the wait and
// writes them only when needed: a later step of the run (before that
// step's function runs), or Flush; a run that ends after it writes
// nothing for them.
func TestAllOfDerivesItsOutcomes(t *testing.T) {
	a := &attempt{clock: clockwork.NewFakeClock()}
	var w Workflow

	ctx := run(&w, a, nil, nil)
	var ac *AwaitChildrenError
	if _, err := AllOf(ctx, "kids", kids(2), 0); !errors.As(err, &ac) || len(ac.IDs) != 2 || ac.IDs[1] != "p/kids/1" {
		t.Fatalf("first run: %v, want an AwaitChildrenError for p/kids/0..1", err)
	}
	if w.UnreturnedWait() != `workflow.All "kids"` {
		t.Errorf("UnreturnedWait = %q, want the await", w.UnreturnedWait())
	}

	// The resumed run that returns after All: nothing written.
	ctx = run(&w, a, nil, ended("kids", 2))
	out, err := AllOf(ctx, "kids", kids(2), 0)
	if err != nil || !strings.Contains(string(out), `"p/kids/1"`) {
		t.Fatalf("resumed: %s %v", out, err)
	}
	if len(a.checkpoints) != 0 || w.UnreturnedWait() != "" {
		t.Errorf("checkpoints %v, unreturned %q: want none", a.checkpoints, w.UnreturnedWait())
	}
	if names := stepNames(w.Steps()); strings.Join(names, ",") != "children:kids" {
		t.Errorf("steps %v, want the derived children:kids", names)
	}

	// A resumed run that goes on to a step: the outcomes are written
	// first, then the step.
	ctx = run(&w, a, nil, ended("kids", 2))
	if _, err := AllOf(ctx, "kids", kids(2), 0); err != nil {
		t.Fatal(err)
	}
	var order []string
	if _, err := StepOf(ctx, "next", func(context.Context) ([]byte, error) {
		order = append(order, a.checkpoints...)
		return []byte("2"), nil
	}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(order, ",") != "children:kids" || strings.Join(a.checkpoints, ",") != "children:kids,next" {
		t.Errorf("written before the step ran %v, in all %v: want children:kids before next", order, a.checkpoints)
	}

	// Flush writes what is left once, and a failed write is returned and
	// kept for the next Flush.
	a.checkpoints = nil
	ctx = run(&w, a, nil, ended("kids", 2))
	if _, err := AllOf(ctx, "kids", kids(2), 0); err != nil {
		t.Fatal(err)
	}
	a.fail = errors.New("lease lost")
	if err := w.Flush(context.Background()); err == nil || !strings.Contains(err.Error(), "children:kids") {
		t.Errorf("Flush with a failing write: %v", err)
	}
	a.fail = nil
	if err := w.Flush(context.Background()); err != nil || strings.Join(a.checkpoints, ",") != "children:kids" {
		t.Errorf("Flush: %v, wrote %v", err, a.checkpoints)
	}
	if err := w.Flush(context.Background()); err != nil || len(a.checkpoints) != 1 {
		t.Errorf("a second Flush wrote again: %v", a.checkpoints)
	}

	// A recorded outcome replays without the wait's results.
	ctx = run(&w, a, []lease.Step{{Name: "children:kids", Result: []byte(`[]`)}}, nil)
	if out, err := AllOf(ctx, "kids", kids(2), 0); err != nil || string(out) != "[]" {
		t.Errorf("replay: %s %v", out, err)
	}
}

// TestSleepOfAsksToWait: a sleep not yet over is a wait the handler must
// return, named by UnreturnedWait; one that is over is not.
func TestSleepOfAsksToWait(t *testing.T) {
	a := &attempt{clock: clockwork.NewFakeClock()}
	var w Workflow
	ctx := run(&w, a, nil, nil)
	var snooze *SnoozeError
	if err := SleepOf(ctx, time.Hour); !errors.As(err, &snooze) || snooze.Delay <= time.Hour-time.Millisecond || snooze.Delay > time.Hour {
		t.Fatalf("SleepOf: %v, want a snooze of an hour", err)
	}
	if got := w.UnreturnedWait(); got != `workflow.Sleep (step "sleep#1")` {
		t.Errorf("UnreturnedWait = %q", got)
	}
	steps := []lease.Step{{Name: "sleep#1", Result: []byte("0")}} // woke at the epoch: over
	ctx = run(&w, a, steps, nil)
	if err := SleepOf(ctx, time.Hour); err != nil || w.UnreturnedWait() != "" {
		t.Errorf("a sleep that is over: %v, unreturned %q", err, w.UnreturnedWait())
	}
}

func stepNames(steps []lease.Step) []string {
	out := make([]string, len(steps))
	for i, s := range steps {
		out[i] = s.Name
	}
	return out
}

// spacePath reads the space of a recorded operation's name; a name that
// could be a branch's is refused as a step's.
func TestSpacePath(t *testing.T) {
	for name, want := range map[string]string{
		"plan":             "",
		"a/b":              "",
		"@a/first":         "@a/",
		"@a/@b/sleep#1":    "@a/@b/",
		"@p/@x/callback:c": "@p/@x/",
		"@noslash":         "",
	} {
		if got := spacePath(name); got != want {
			t.Errorf("spacePath(%q) = %q, want %q", name, got, want)
		}
	}
	if !spaced("@a/first") || spaced("plan") || spaced("@noslash") {
		t.Error("spaced misreads names")
	}
}
