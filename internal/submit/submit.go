// Package submit turns what a caller asks to enqueue into a task record,
// with the checks every way of enqueueing makes (the client, and
// leaseholdtest's in-memory Env): one set of rules, in one place.
package submit

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/leasehold/leasehold/internal/claimcheck"
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
	// Stow, if set, keeps the payload of task id in the payload bucket
	// and returns the reference the task carries in its place
	// (claimcheck.Checker.Stow with no inline limit). NewTask calls it
	// only for a payload over lease.MaxPayloadBytes and for chain links'
	// payloads over what a chain keeps inline, once every other rule has
	// passed. Nil keeps the inline limits.
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
		if err := claimcheck.CheckValue(p); err != nil {
			return nt, fmt.Errorf("%w: chain link %d's payload: %w", lease.ErrInvalid, i+2, err)
		}
		nt.Then = append(nt.Then, lease.Link{ID: cmp.Or(l.ID, LinkID(r.ID, i+2)), Kind: l.Kind, Payload: p, MaxAttempts: l.MaxAttempts, Queue: l.Queue})
	}
	// Links' payloads over what a chain keeps inline go to the payload
	// bucket once every rule has passed (left empty for the check).
	stowLinks := linksToStow(r, nt)
	held := make(map[int][]byte, len(stowLinks))
	for _, i := range stowLinks {
		held[i], nt.Then[i].Payload = nt.Then[i].Payload, nil
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
	for _, i := range stowLinks {
		if len(held[i]) > claimcheck.MaxValueBytes {
			return nt, fmt.Errorf("task %s: chain link %d: %w", lease.DisplayID(r.ID), i+2, &lease.TooLargeError{What: "payload", Size: len(held[i]), Limit: claimcheck.MaxValueBytes})
		}
		ref, err := r.Stow(nt.Then[i].ID, held[i])
		if err != nil {
			return nt, err
		}
		nt.Then[i].Payload = ref
	}
	if len(stowLinks) > 0 {
		if err := lease.CheckThen(nt.ID, nt.Then); err != nil {
			return nt, fmt.Errorf("task %s: %w", lease.DisplayID(r.ID), err)
		}
	}
	return nt, nil
}

// refBytes is about the size of a reference to a value in the payload
// bucket (a 64-byte hex digest, the key's path and the size): more than
// any real one, so a chain that fits with this much per reference fits.
const refBytes = 128 + lease.MaxIDBytes*3

// linksToStow lists the links of nt whose payloads go to the payload
// bucket: none when r has no Stow or the chain's payloads fit inline as
// they are (nothing changes for a chain that works without a bucket);
// else the largest first, until the rest and the references fit.
func linksToStow(r Request, nt lease.NewTask) []int {
	var tl *lease.TooLargeError
	if r.Stow == nil || !errors.As(lease.CheckThen(nt.ID, nt.Then), &tl) {
		return nil
	}
	order := make([]int, len(nt.Then))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(len(nt.Then[b].Payload), len(nt.Then[a].Payload)) })
	total := tl.Size
	var out []int
	for _, i := range order {
		if total <= tl.Limit {
			break
		}
		if len(nt.Then[i].Payload) <= refBytes {
			break // the rest are smaller than a reference
		}
		total += refBytes - len(nt.Then[i].Payload)
		out = append(out, i)
	}
	slices.Sort(out)
	return out
}
