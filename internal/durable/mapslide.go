package durable

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/mapstate"
)

// A sliding map (docs/workflows.md, "Sliding") keeps its state in slot
// groups (package mapstate): each child that ends counts itself there and
// starts the next child of its slot, so the parent runs once per batch of
// items, not once per child. This file is the parent's side: read the
// groups, decide, produce the next batch. The worker's side (writing the
// batch, raising the groups, starting idle slots, a child's end) is
// internal/lifecycle's.

// Slide is what a sliding map's parent asks its worker to do before it
// waits again (AwaitChildrenError.Slide).
type Slide struct {
	// Name, Shape, N, C and the policy (Min, Tolerate) are the map's.
	Name, Shape         string
	N, C, Min, Tolerate int
	// Create: the groups do not all exist yet; the worker creates them,
	// every slot idle, so that the first children start as any idle
	// slot's do.
	Create bool
	// Items are the items From, From+1, ... (From a multiple of
	// mapstate.PageItems), to be written as pages before Produced is
	// raised in every group.
	From  int
	Items []Child
	// Produced is what every group's Produced is raised to.
	Produced int
	// Stop, set, is written into every group: the map stops.
	Stop string
	// Wake is the id the parent waits for (WakeID of Produced).
	Wake string
}

// WakeID is the id a sliding map's parent waits for while its groups
// stand at produced (mapstate.WakeID, which a cancel reads back).
func WakeID(parent, name string, produced int) string {
	return mapstate.WakeID(parent, name, produced)
}

// SlideNote is the wait note of a sliding map's parent (lease.Wait.Note):
// the map's name and shape, for a replay to name the operation it waits
// in (its wait's id, WakeID, names the map but not its shape).
func SlideNote(name, shape string) string {
	b, _ := json.Marshal(slideNote{Slide: name, Shape: shape})
	return string(b)
}

// ParseSlideNote reads a SlideNote: ok false for another note.
func ParseSlideNote(note string) (name, shape string, ok bool) {
	var n slideNote
	if json.Unmarshal([]byte(note), &n) != nil || n.Slide == "" {
		return "", "", false
	}
	return n.Slide, n.Shape, true
}

type slideNote struct {
	Slide string `json:"slide"`
	Shape string `json:"shape"`
}

// MapItem is a map's item as its page keeps it: the child, its queue and
// attempts resolved by the worker that wrote the page.
type MapItem struct {
	Kind        string          `json:"kind"`
	Payload     json.RawMessage `json:"payload,omitempty"`
	MaxAttempts int             `json:"max_attempts"`
	Queue       string          `json:"queue"`
}

// slide is one run of a sliding map's parent (MapOf): it returns the map's
// summary once every group is done, and otherwise an
// *AwaitChildrenError with a Slide.
func (w *Workflow) slide(ctx context.Context, name, op string, n, c int, item func(int) (Child, error), minOK, tolerate int) ([]byte, error) {
	ids := make([]string, mapstate.Groups(c))
	for g := range ids {
		ids[g] = mapstate.GroupID(w.held.TaskID, name, g)
	}
	groups, err := w.att.MapGroups(ctx, ids)
	missing := errors.Is(err, lease.ErrNotFound)
	if err != nil && !missing {
		return nil, err
	}
	s := &Slide{Name: name, Shape: op, N: n, C: c, Min: minOK, Tolerate: tolerate, Create: missing}
	produced, stopped, ok, failed, done := 0, "", 0, 0, !missing
	next := 0 // the furthest next child of a slot that is not done
	for i, g := range groups {
		if g.Shape != op {
			return nil, w.diverge(&DivergedError{Position: w.position() + 1, Recorded: fmt.Sprintf("%q (%s), with %d children counted", "map:"+name, g.Shape, g.OK+g.Failed), Asked: DescribeOp("map:"+name, op)})
		}
		if i == 0 || g.Produced < produced {
			produced = g.Produced
		}
		stopped = cmp.Or(stopped, g.Stopped)
		ok, failed, done = ok+g.OK, failed+g.Failed, done && g.Done()
		for j := range g.Seq {
			if nx := g.Next(g.First + j); nx < n && nx > next {
				next = nx
			}
		}
	}
	if done {
		return w.mapSummary(ctx, name, n, groups, ok, failed, cmp.Or(stopped, MapStoppedAll))
	}
	if stopped == mapstate.StoppedCancelled {
		// Its parent was cancelled (mapstate.StopChildren) and is run
		// again (a retry): the children cancelled with it never report,
		// so waiting would be for ever.
		return nil, &PermanentError{Err: fmt.Errorf("map %q was stopped when its parent was cancelled (%d of %d children ended); it cannot go on", name, ok+failed, n)}
	}
	s.Stop = mapstate.Group{Min: minOK, Tolerate: tolerate}.Decide(ok, failed)
	if stopped != "" && s.Stop == "" {
		s.Stop = stopped // a group stopped; the others may not know yet
	}
	s.Produced = produced
	if ahead := mapstate.Ahead(c); s.Stop == "" && produced < n && produced-next <= ahead {
		// The next batch: from produced (a page's start) to a page's
		// start or the end, twice Ahead past the furthest slot.
		to := min(n, roundUp(max(produced+1, next+2*ahead), mapstate.PageItems))
		s.From, s.Items = produced, make([]Child, 0, to-produced)
		for i := produced; i < to; i++ {
			ch, err := item(i)
			if err != nil {
				return nil, &PermanentError{Err: fmt.Errorf("map %q: child %d: %w", name, i, err)}
			}
			s.Items = append(s.Items, ch)
		}
		s.Produced = to
	}
	s.Wake = WakeID(w.held.TaskID, name, s.Produced)
	return nil, &AwaitChildrenError{Slide: s}
}

// mapSummary is the summary of a sliding map whose groups are all done:
// the first failures are read from those children's items.
func (w *Workflow) mapSummary(ctx context.Context, name string, n int, groups []mapstate.Group, ok, failed int, stopped string) ([]byte, error) {
	var first []int
	for _, g := range groups {
		first = append(first, g.Failures...)
	}
	slices.Sort(first)
	first = first[:min(len(first), maxMapFailures)]
	sum := MapSummary{Total: n, Started: ok + failed, Succeeded: ok, Failed: failed, Stopped: stopped}
	if len(first) > 0 {
		ids := make([]string, len(first))
		for i, idx := range first {
			ids[i] = ChildIDIn(w.held.TaskID, name, idx)
		}
		tasks, err := w.att.ReadTasks(ctx, ids)
		if err != nil {
			return nil, err
		}
		for _, t := range tasks {
			f := outcomeOf(t)
			f.Result, f.Error = nil, lease.Truncate(f.Error, 200)
			sum.Failures = append(sum.Failures, f)
		}
	}
	return json.Marshal(sum)
}

func roundUp(v, to int) int { return (v + to - 1) / to * to }
