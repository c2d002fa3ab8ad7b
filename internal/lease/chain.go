package lease

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/leasehold/leasehold/internal/queues"
)

// Link is a task of a chain that runs after the task carrying it
// (Task.Then) has SUCCEEDED: created, claimed and run from one inline
// token, with no wait, no watch and no notify. The chain's later links
// ride along with it.
type Link struct {
	ID          string          `json:"id"`
	Kind        string          `json:"kind"`
	Payload     json.RawMessage `json:"payload,omitempty"`
	MaxAttempts int             `json:"max_attempts,omitempty"` // 0: the worker's default
	Queue       string          `json:"queue,omitempty"`        // "": the queue of the task before it
}

// Limits of a chain (NewTask.Then): the links ride in the item and the
// token of every task before them.
const (
	maxThen      = 25
	maxThenBytes = 64 << 10 // the links' payloads together
)

// CheckThen checks the links that follow task id.
func CheckThen(id string, then []Link) error {
	if len(then) > maxThen {
		return fmt.Errorf("%w: a chain has at most %d links after its first task, not %d", ErrInvalid, maxThen, len(then))
	}
	size := 0
	for i, l := range then {
		where := fmt.Sprintf("chain link %d", i+1)
		switch {
		case CheckID(l.ID) != nil:
			return fmt.Errorf("%w: %s: %w", ErrInvalid, where, CheckID(l.ID))
		case l.ID == id || slices.ContainsFunc(then[:i], func(o Link) bool { return o.ID == l.ID }):
			return fmt.Errorf("%w: %s: id %s is in the chain twice", ErrInvalid, where, DisplayID(l.ID))
		case l.Kind == "" || len(l.Kind) > MaxKindBytes:
			return fmt.Errorf("%w: %s: kind must be 1..%d bytes", ErrInvalid, where, MaxKindBytes)
		case l.MaxAttempts < 0 || l.MaxAttempts > MaxAttemptsLimit:
			return fmt.Errorf("%w: %s: max attempts %d is outside 0..%d", ErrInvalid, where, l.MaxAttempts, MaxAttemptsLimit)
		case l.Queue != "" && queues.CheckName(l.Queue) != nil:
			return fmt.Errorf("%w: %s: queue: %w", ErrInvalid, where, queues.CheckName(l.Queue))
		}
		if len(l.Payload) > 0 {
			if p := JSONProblem(l.Payload); p != "" {
				return fmt.Errorf("%w: %s: payload %s", ErrInvalid, where, p)
			}
		}
		size += len(l.Payload)
	}
	if size > maxThenBytes {
		return &TooLargeError{What: "chain's payloads", Size: size, Limit: maxThenBytes}
	}
	return nil
}

// CloneThen deep-copies links.
func CloneThen(then []Link) []Link {
	if then == nil {
		return nil
	}
	out := make([]Link, len(then))
	for i, l := range then {
		out[i] = l
		out[i].Payload = slices.Clone(l.Payload)
	}
	return out
}

// ChainReason is the reason a chain's later link keeps when the link
// before it did not succeed.
func ChainReason(ended Task) string {
	msg := fmt.Sprintf("chain: %s ended %s", DisplayID(ended.ID), ended.Status)
	if ended.Error != "" {
		msg += ": " + ended.Error
	}
	return Truncate(msg, MaxErrorBytes)
}
