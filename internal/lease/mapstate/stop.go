package mapstate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/leasehold/leasehold/internal/lease"
)

// StoppedCancelled is why a map stopped when its parent was cancelled (or
// ended otherwise while it waited): no child starts another after it.
const StoppedCancelled = "cancelled"

// wakePart separates a sliding map's name from its produced count in the
// id its parent waits for (WakeID).
const wakePart = "/wake"

// WakeID is the id a sliding map's parent waits for while its groups
// stand at produced: a child that must wake it notifies this id, which no
// task has (its last part is not a number).
func WakeID(parent, name string, produced int) string {
	return parent + "/" + name + wakePart + strconv.Itoa(produced)
}

// WaitedMap is the name of the sliding map parent waits in, and ok false
// when it waits for something else: its wait is for children, and for the
// one id WakeID gives.
func WaitedMap(parent lease.Task) (name string, ok bool) {
	if parent.Wait != lease.WaitChildren || len(parent.WaitFor) != 1 {
		return "", false
	}
	rest, found := strings.CutPrefix(parent.WaitFor[0], parent.ID+"/")
	i := strings.LastIndex(rest, wakePart)
	if !found || i <= 0 {
		return "", false
	}
	if _, err := strconv.Atoi(rest[i+len(wakePart):]); err != nil {
		return "", false
	}
	return rest[:i], true
}

// Canceller is what stopping a map's children takes (both stores have
// it; lease.CancelChildren takes the same).
type Canceller interface {
	CreateCancelled(ctx context.Context, id, parent, reason string) (lease.Task, error)
	RequestCancel(ctx context.Context, id string) (lease.Task, error)
}

// StopChildren stops the sliding map that parent, a task WAITING in it as
// seen, runs, before the caller ends parent (lease.CancelChildren calls it
// through the store's StopMap):
//   - every group is stopped (StoppedCancelled, or the reason it stopped
//     for already): a child that ends after this reads it and starts no
//     successor, and the parent, ended, starts none either;
//   - the child each busy slot runs is cancelled (a placeholder if its
//     token is still queued, else RequestCancel), found from the group's
//     counts without reading the map's children;
//   - when that child had ended already, its end may have sent its
//     successor's token before the stop landed (a child starts its
//     successor before it counts itself): the successor is cancelled the
//     same way. Its own end cannot go further: it counts only after its
//     predecessor, so it reads the stopped group.
//
// A parent that waits for anything else is left to lease.CancelChildren.
// cancelled hears of each child cancelled outright. Every step is
// idempotent: a caller interrupted half-way calls it again. It costs one
// write per group and one or two per busy slot; nothing on a map that is
// not cancelled.
func StopChildren(ctx context.Context, ms Store, c Canceller, parent lease.Task, reason string, cancelled func(lease.Task)) error {
	name, ok := WaitedMap(parent)
	if !ok {
		return nil
	}
	for gi, groups := 0, 1; gi < groups; gi++ {
		g, err := ms.Stop(ctx, GroupID(parent.ID, name, gi), StoppedCancelled)
		switch {
		case errors.Is(err, lease.ErrNotFound):
			return nil // the groups expired, or were never written
		case err != nil:
			return fmt.Errorf("stop map %q of %s: %w", name, lease.DisplayID(parent.ID), err)
		}
		groups = Groups(g.C)
		for j := range g.Seq {
			slot := g.First + j
			idx := g.Next(slot)
			if idx >= g.N || g.IsIdle(slot) {
				continue
			}
			ended, err := cancelChild(ctx, c, parent.ID, name, idx, reason, cancelled)
			if err == nil && ended && idx+g.C < g.N {
				_, err = cancelChild(ctx, c, parent.ID, name, idx+g.C, reason, cancelled)
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// cancelChild cancels child index of parent's map name: a placeholder when
// it has no item, else a cancel request (its own children first). ended
// reports that it had ended before (not by this call).
func cancelChild(ctx context.Context, c Canceller, parent, name string, index int, reason string, cancelled func(lease.Task)) (ended bool, err error) {
	id := parent + "/" + name + "/" + strconv.Itoa(index)
	got, err := c.CreateCancelled(ctx, id, parent, reason)
	switch {
	case err == nil:
		return false, nil
	case !errors.Is(err, lease.ErrAlreadyExists):
		return false, fmt.Errorf("cancel map child %s: %w", lease.DisplayID(id), err)
	case got.Parent != parent:
		return false, nil // another task's id
	case lease.IsPlaceholder(got):
		return false, nil // cancelled before its token came
	case got.Status.Terminal():
		return true, nil
	}
	if len(lease.UnendedChildren(got)) > 0 {
		if err := lease.CancelChildren(ctx, c, got, lease.ParentEndedReason(got.ID, lease.StatusCancelled, ""), cancelled); err != nil {
			return false, err
		}
	}
	t, err := c.RequestCancel(ctx, id)
	switch {
	case err == nil && t.Status == lease.StatusCancelled:
		if cancelled != nil {
			cancelled(t)
		}
	case err == nil, errors.Is(err, lease.ErrFinished), errors.Is(err, lease.ErrNotFound):
	default:
		return false, fmt.Errorf("cancel map child %s: %w", lease.DisplayID(id), err)
	}
	return false, nil
}
