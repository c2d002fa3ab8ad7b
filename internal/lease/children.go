package lease

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// A placeholder is the item a parent's cancel (or failure) writes for a child
// that has no item yet (Store.CreateCancelled): CANCELLED, naming the parent,
// with no kind and no payload. The child's token, still on a queue, then
// finds its task ended and neither creates nor runs it.

// IsPlaceholder reports whether t was written for a child cancelled before its
// token created it: it has a parent and no kind.
func IsPlaceholder(t Task) bool {
	return t.Parent != "" && t.Kind == ""
}

// ChildTaken reports whether stored, the task found under the id of a child
// that n would create, is some other task than that child: n names a parent,
// and stored names another parent or none. A placeholder of the same parent
// is the child itself, cancelled before it was created.
func ChildTaken(stored Task, n NewTask) bool {
	return n.Parent != "" && stored.Parent != n.Parent
}

// ChildTakenReason is the error a parent fails with when the id of its child
// id names another task.
func ChildTakenReason(id string) string {
	return Truncate(fmt.Sprintf("child id %s is taken by another task", DisplayID(id)), MaxErrorBytes)
}

// ParentEndedReason is the error a child keeps when it is cancelled because
// its parent ended (cancelled or failed) before it: why is the parent's
// error, if any.
func ParentEndedReason(parent string, status Status, why string) string {
	msg := fmt.Sprintf("cancelled with its parent %s", DisplayID(parent))
	if status != StatusCancelled {
		msg = fmt.Sprintf("cancelled: its parent %s ended %s", DisplayID(parent), status)
	}
	if why != "" {
		msg += ": " + why
	}
	return Truncate(msg, MaxErrorBytes)
}

// UnendedChildren lists the children t waits for that have not told it of
// their end (none unless t is WAITING for children).
func UnendedChildren(t Task) []string {
	if t.Status != StatusWaiting || t.Wait != WaitChildren {
		return nil
	}
	var out []string
	for _, id := range t.WaitFor {
		if !slices.Contains(t.Ended, id) {
			out = append(out, id)
		}
	}
	return out
}

// childCanceller is what cancelling a parent's children takes; both stores
// have it.
type childCanceller interface {
	CreateCancelled(ctx context.Context, id, parent, reason string) (Task, error)
	RequestCancel(ctx context.Context, id string) (Task, error)
}

// maxCancelDepth bounds how far CancelChildren follows children that are
// parents themselves.
const maxCancelDepth = 16

// CancelChildren cancels every child of parent, a task WAITING for its
// children as seen, that has not told it of its end, with reason:
//   - a child with no item gets a placeholder (CreateCancelled), so its
//     token, still on a queue, finds it ended and never creates or runs it;
//   - a child of parent that exists and has not ended is cancelled
//     (RequestCancel): at once when PENDING or WAITING, at its next lease
//     renewal when RUNNING. A child that waits for children of its own has
//     them cancelled first, in the same way;
//   - an id taken by a task that is not parent's child is left alone.
//
// The caller ends parent afterwards, so that no child is created after its
// parent ended. cancelled hears of each existing child cancelled outright,
// whose waiters the caller tells. Every step is idempotent: a caller
// interrupted half-way calls it again.
func CancelChildren(ctx context.Context, s childCanceller, parent Task, reason string, cancelled func(Task)) error {
	return cancelChildren(ctx, s, parent, reason, cancelled, 0)
}

func cancelChildren(ctx context.Context, s childCanceller, parent Task, reason string, cancelled func(Task), depth int) error {
	if depth >= maxCancelDepth {
		return fmt.Errorf("cancel the children of %s: %w: children more than %d deep", DisplayID(parent.ID), ErrInvalid, maxCancelDepth)
	}
	// A sliding map's children are not in WaitFor (it waits for one wake
	// id): a store that keeps maps stops the map and cancels its running
	// children itself (mapstate.StopChildren).
	if m, ok := s.(interface {
		StopMap(ctx context.Context, parent Task, reason string, cancelled func(Task)) error
	}); ok && parent.Wait == WaitChildren {
		if err := m.StopMap(ctx, parent, reason, cancelled); err != nil {
			return err
		}
	}
	for _, id := range UnendedChildren(parent) {
		got, err := s.CreateCancelled(ctx, id, parent.ID, reason)
		switch {
		case err == nil:
			continue
		case !errors.Is(err, ErrAlreadyExists):
			return fmt.Errorf("cancel child %s of %s: %w", DisplayID(id), DisplayID(parent.ID), err)
		case got.Parent != parent.ID || got.Status.Terminal():
			continue // another task's id, or the child ended
		}
		if len(UnendedChildren(got)) > 0 {
			if err := cancelChildren(ctx, s, got, ParentEndedReason(got.ID, StatusCancelled, ""), cancelled, depth+1); err != nil {
				return err
			}
		}
		t, err := s.RequestCancel(ctx, id)
		switch {
		case err == nil && t.Status == StatusCancelled:
			if cancelled != nil {
				cancelled(t)
			}
		case err == nil, errors.Is(err, ErrFinished), errors.Is(err, ErrNotFound):
		default:
			return fmt.Errorf("cancel child %s of %s: %w", DisplayID(id), DisplayID(parent.ID), err)
		}
	}
	return nil
}
