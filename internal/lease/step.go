package lease

import (
	"fmt"
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

// Limits of steps. Every step's result stays in the task's item, and every
// later write of the item is priced by its size, so keep them small.
const (
	MaxSteps         = 100
	MaxStepNameBytes = 64
	// MaxStepsBytes bounds the results of all of a task's steps together
	// (64 KiB, so that every limit at once fits an item: see MaxItemBytes).
	MaxStepsBytes = 64 << 10
)

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

// CheckStep checks a step about to be added to the steps of t.
func CheckStep(t Task, name string, result []byte) error {
	switch {
	case name == "" || len(name) > MaxStepNameBytes || !utf8.ValidString(name):
		return fmt.Errorf("%w: step name must be 1..%d bytes of UTF-8", ErrInvalid, MaxStepNameBytes)
	case len(t.Steps) >= MaxSteps:
		return fmt.Errorf("%w: a task keeps at most %d steps", ErrInvalid, MaxSteps)
	}
	if err := CheckResult(result); err != nil {
		return err
	}
	total := len(result) + StepsBytes(t)
	if total > MaxStepsBytes {
		return &TooLargeError{What: "steps' results", Size: total, Limit: MaxStepsBytes}
	}
	return nil
}
