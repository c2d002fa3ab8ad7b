// Package submit turns what a caller asks to enqueue into a task record,
// with the checks every way of enqueueing makes (the client, and
// leaseholdtest's in-memory Env): one set of rules, in one place.
package submit

import (
	"cmp"
	"fmt"
	"github.com/leasehold/leasehold/internal/claimcheck"
	"maps"
	"strconv"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/token"
)

// Request is a submission as the caller gave it. ID, MaxAttempts and
// Queue are the caller's to default before NewTask.
type Request struct {
	ID, Kind    string
	Payload     any // encoded as JSON (a json.RawMessage passes through)
	MaxAttempts int
	Queue       string
	After       []string
	AfterAny    bool // After's tasks need only end, not succeed
	Delay       time.Duration
	RunAt       time.Time
	WaitTimeout time.Duration
	// Then are the chain's links after the task (leasehold.Submission.Then).
	Then []Link
	// Metadata is the task's metadata (leasehold.Submission.Metadata).
	Metadata map[string]string
	// Stow, if set, keeps a payload over lease.MaxPayloadBytes in the
	// payload bucket and returns the reference the task carries in its
	// place (claimcheck.Checker.Stow); it is called only once every other
	// rule has passed. Nil keeps the inline limit.
	Stow func(id string, payload []byte) ([]byte, error)
}

// Link is a chain link as the caller gave it: the fields of
// leasehold.Link, which converts to it.
type Link struct {
	Kind        string
	Payload     any
	ID          string
	MaxAttempts int
	Queue       string
}

// LinkID is the id of the n-th task of the chain headed by head (the head
// is the first), for a link given none.
func LinkID(head string, n int) string { return head + "#" + strconv.Itoa(n) }

// NewTask checks r at now and returns its task record. A request the
// rules refuse is an error wrapping lease.ErrInvalid.
func NewTask(r Request, now time.Time) (lease.NewTask, error) {
	nt := lease.NewTask{ID: r.ID, Kind: r.Kind, MaxAttempts: r.MaxAttempts, Queue: r.Queue, After: r.After, AfterAny: r.AfterAny,
		Metadata: maps.Clone(r.Metadata)}
	switch {
	case len(r.After) > 0 && (r.Delay != 0 || !r.RunAt.IsZero()):
		return nt, fmt.Errorf("%w: a task with dependencies starts when they end; it takes no delay or start time", lease.ErrInvalid)
	case r.WaitTimeout != 0 && len(r.After) == 0:
		return nt, fmt.Errorf("%w: a wait timeout is for a task with dependencies", lease.ErrInvalid)
	case r.WaitTimeout < 0 || r.WaitTimeout > token.MaxWaitTimeout:
		return nt, fmt.Errorf("%w: wait timeout %s is outside (0, %s]", lease.ErrInvalid, r.WaitTimeout, token.MaxWaitTimeout)
	case r.Delay < 0:
		return nt, fmt.Errorf("%w: negative delay %s", lease.ErrInvalid, r.Delay)
	case r.Delay > 0 && !r.RunAt.IsZero():
		return nt, fmt.Errorf("%w: a task takes a delay or a start time, not both", lease.ErrInvalid)
	case r.Delay > token.MaxSubmissionDelay, !r.RunAt.IsZero() && r.RunAt.Sub(now) > token.MaxSubmissionDelay:
		return nt, fmt.Errorf("%w: a task may start at most %d days ahead", lease.ErrInvalid, int(token.MaxSubmissionDelay/(24*time.Hour)))
	case r.Delay > 0:
		nt.RunAt = now.Add(r.Delay)
	default:
		nt.RunAt = r.RunAt
	}
	if len(r.After) > 0 {
		// Set here, not left to the store's default, so that a token sent
		// before the create carries it too (a worker that creates the
		// task from it uses the same deadline).
		nt.WaitUntil = now.Add(cmp.Or(r.WaitTimeout, lease.DefaultWaitTimeout))
	}
	payload, err := lease.EncodeJSON("payload", r.Payload)
	if err != nil {
		return nt, err
	}
	if err := claimcheck.CheckValue(payload); err != nil {
		return nt, fmt.Errorf("%w: payload: %w", lease.ErrInvalid, err)
	}
	stow := r.Stow != nil && len(payload) > lease.MaxPayloadBytes
	if !stow {
		nt.Payload = payload
	}
	for i, l := range r.Then {
		p, err := lease.EncodeJSON(fmt.Sprintf("chain link %d's payload", i+2), l.Payload)
		if err != nil {
			return nt, err
		}
		nt.Then = append(nt.Then, lease.Link{ID: cmp.Or(l.ID, LinkID(r.ID, i+2)), Kind: l.Kind, Payload: p, MaxAttempts: l.MaxAttempts, Queue: l.Queue})
	}
	if err := nt.Validate(); err != nil {
		if r.ID != "" {
			return nt, fmt.Errorf("task %s: %w", lease.DisplayID(r.ID), err)
		}
		return nt, err
	}
	if stow {
		if len(payload) > claimcheck.MaxValueBytes {
			return nt, fmt.Errorf("task %s: %w", lease.DisplayID(r.ID), &lease.TooLargeError{What: "payload", Size: len(payload), Limit: claimcheck.MaxValueBytes})
		}
		ref, err := r.Stow(r.ID, payload)
		if err != nil {
			return nt, err
		}
		nt.Payload = ref
	}
	return nt, nil
}
