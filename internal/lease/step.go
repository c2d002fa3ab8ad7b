package lease

import (
	"context"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"
)

// Step is one checkpointed step of a task's handler (Store.Checkpoint): its
// name and result, kept across attempts so a retried handler skips it.
type Step struct {
	Name string
	// Op is the durable operation that recorded the step, and the shape
	// that identifies it ("step", "sleep 1h0m0s", "map 100/10", ...):
	// a replay that asks for another operation at the step's position
	// has diverged from the history. "" for a step recorded before
	// operations were identified, which matches by name alone.
	Op     string
	Result []byte
}

// Limits of steps. A task's first steps stay in its item (the inline head,
// Task.Steps), where every later write of the item is priced by their size;
// the operations past the head are items of their own (the spilled tail,
// Store.PutStep: docs/workflows.md, "History beyond the item").
const (
	// MaxSteps bounds the inline head's steps.
	MaxSteps         = 100
	MaxStepNameBytes = 64
	// MaxStepsBytes bounds the results of the inline head's steps together
	// (64 KiB, so that every limit at once fits an item: see MaxItemBytes).
	MaxStepsBytes = 64 << 10
	// MaxOperations bounds the operations of a task's whole history, head
	// and tail (each result up to MaxResultBytes).
	MaxOperations = 25_000
	// MaxStepsPage is the most operations one ReadSteps returns: one
	// BatchGetItem's keys.
	MaxStepsPage = 100
	// SpilledStepHorizon is how long past its write, beyond the store's
	// retention, an operation of the spilled tail is kept: DynamoDB's TTL
	// cannot follow the task's own expiry, which is set only when it ends.
	// It is longer than the longest sleep.
	SpilledStepHorizon = 400 * 24 * time.Hour
)

// StepKey is the item key of the operation at position pos (from 0, over
// the whole history) of task id's spilled tail. The separator, U+001F, is a
// control character no task id may contain (CheckID), so no task's key is
// ever a step's.
func StepKey(id string, pos int) string {
	return id + "\x1fstep\x1f" + strconv.Itoa(pos)
}

// TailID is the id under which t's spilled tail is kept (StepKey's id),
// so that no run of a workflow reads another's operations: a first run's
// (Run 0) is the task's id; a later run's (continue-as-new) is the id its
// archive will have once it ends, RunID(ID, Run); and an archived run
// (RunID(Parent, Run)) reads where its run wrote: the workflow's id for
// run 0, its own id otherwise.
func (t Task) TailID() string {
	if t.Parent != "" && t.ID == RunID(t.Parent, int(t.Run)) {
		if t.Run == 0 {
			return t.Parent
		}
		return t.ID
	}
	if t.Run == 0 {
		return t.ID
	}
	return RunID(t.ID, int(t.Run))
}

// FitsInline reports whether a step with result may join head, the inline
// head of a task that has not spilled: within MaxSteps and MaxStepsBytes.
// Every workflow that fits today stays in the head, as it was recorded
// before there was a tail.
func FitsInline(head []Step, result []byte) bool {
	return len(head) < MaxSteps && StepsBytes(Task{Steps: head})+len(result) <= MaxStepsBytes
}

// CheckOperation checks an operation about to be recorded at position pos
// (from 0) of a history, head or tail: its name, its result, and
// MaxOperations.
func CheckOperation(pos int, name string, result []byte) error {
	switch {
	case name == "" || len(name) > MaxStepNameBytes || !utf8.ValidString(name):
		return fmt.Errorf("%w: step name must be 1..%d bytes of UTF-8", ErrInvalid, MaxStepNameBytes)
	case pos >= MaxOperations:
		return fmt.Errorf("%w: a task's history keeps at most %d operations", ErrInvalid, MaxOperations)
	}
	return CheckResult(result)
}

// StepResult returns the result of the step named name, if t has one.
func (t Task) StepResult(name string) ([]byte, bool) {
	for _, s := range t.Steps {
		if s.Name == name {
			return s.Result, true
		}
	}
	return nil, false
}

// StepsBytes is the size of t's step results together (what
// MaxStepsBytes bounds).
func StepsBytes(t Task) int {
	n := 0
	for _, s := range t.Steps {
		n += len(s.Result)
	}
	return n
}

// CheckTail checks the arguments of a read or write of n positions of task
// id's spilled tail from pos (Store.PutStep, Store.ReadSteps).
func CheckTail(id string, pos, n int) error {
	if err := CheckID(id); err != nil {
		return err
	}
	if pos < 0 || n < 1 || n > MaxStepsPage {
		return fmt.Errorf("%w: positions %d..+%d (at most %d at once)", ErrInvalid, pos, n, MaxStepsPage)
	}
	return nil
}

// stepReader reads a history's spilled tail (Store.ReadSteps): the one call
// ReadHistory needs, which a client's narrower store also makes.
type stepReader interface {
	ReadSteps(ctx context.Context, id string, from, n int) ([]Step, error)
}

// ReadHistory returns t's whole history: its inline steps, then, when it
// has spilled, the tail's operations read in pages of MaxStepsPage until a
// page comes back short. Each page is one call, bounded by timeout (zero:
// by ctx alone).
func ReadHistory(ctx context.Context, s stepReader, t Task, timeout time.Duration) ([]Step, error) {
	steps := append([]Step(nil), t.Steps...)
	for t.Spilled && len(steps) < MaxOperations {
		cctx, cancel := ctx, context.CancelFunc(func() {})
		if timeout > 0 {
			cctx, cancel = context.WithTimeout(ctx, timeout)
		}
		page, err := s.ReadSteps(cctx, t.TailID(), len(steps), MaxStepsPage)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("could not read the task's history from operation %d: %w", len(steps)+1, err)
		}
		steps = append(steps, page...)
		if len(page) < MaxStepsPage {
			break
		}
	}
	return steps, nil
}
