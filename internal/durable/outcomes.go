package durable

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"

	"github.com/leasehold/leasehold/internal/claimcheck"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/mapstate"
)

// OutcomesPage is how many children's items OutcomesOf reads at a time:
// one BatchGetItem on DynamoDB (which takes at most 100 keys a call), and
// the most outcomes it holds at once.
const OutcomesPage = 100

// StatusNotStarted is the status OutcomesOf gives a child that its map
// never started (the map's completion policy stopped it first): such a
// child has no item, and none is read.
const StatusNotStarted lease.Status = "NOT_STARTED"

// ChildOutcome is one child's outcome as OutcomesOf yields it: its index
// in the map, its id, and how it ended, Result read back from the payload
// bucket when the child's item keeps a reference.
type ChildOutcome struct {
	Index  int
	ID     string
	Status lease.Status
	Result []byte
	Error  string
}

// OutcomesOf yields the outcomes of the children of the map called name,
// child 0 first, reading their items a page of OutcomesPage at a time
// (Attempt.ReadTasks: one BatchGetItem a page on DynamoDB), so that it
// never holds more than one page, whatever the map's size.
//
// The map must have ended in this run: MapOf returned its summary (the
// step "map:"+name) before. Its children have all ended then, and an
// ended child's item is not written again, so every run that reads them
// reads the same outcomes: the reads record nothing. Two things can still
// change what a later run reads, and a handler that must decide the same
// way in every run folds the outcomes inside a Step: a child whose item
// expired (its retention passed) is EXPIRED, as in ReadOutcomesOf, and a
// failed child retried by hand is read as it is then.
//
// A child the map never started is StatusNotStarted, unread: for a map
// that stopped early, which children started is read from its slot groups
// (a few reads, package mapstate), or, for a map that ran in waves, is its
// first Started children. An error ends the sequence: it is yielded once,
// with a zero outcome.
func OutcomesOf(ctx context.Context, name string) iter.Seq2[ChildOutcome, error] {
	return func(yield func(ChildOutcome, error) bool) {
		w, ok := ctx.Value(workflowKey{}).(*Workflow)
		if !ok {
			yield(ChildOutcome{}, ErrNoWorkflow)
			return
		}
		m, err := w.endedMap(ctx, name)
		if err != nil {
			yield(ChildOutcome{}, err)
			return
		}
		ids := make([]string, 0, OutcomesPage)
		for from := 0; from < m.n; from += OutcomesPage {
			to := min(from+OutcomesPage, m.n)
			ids = ids[:0]
			for i := from; i < to; i++ {
				if m.started(i) {
					ids = append(ids, ChildIDIn(w.held.TaskID, name, i))
				}
			}
			var page []lease.Task
			if len(ids) > 0 {
				if page, err = w.att.ReadTasks(ctx, ids); err == nil && len(page) != len(ids) {
					err = fmt.Errorf("%d tasks read for %d ids", len(page), len(ids))
				}
				if err != nil {
					yield(ChildOutcome{}, fmt.Errorf("map %q: read children %d to %d: %w", name, from, to-1, err))
					return
				}
			}
			for i := from; i < to; i++ {
				o := ChildOutcome{Index: i, Status: StatusNotStarted}
				if !m.started(i) {
					o.ID, o.Error = ChildIDIn(w.held.TaskID, name, i), fmt.Sprintf("map %q stopped (%s) before this child started", name, m.stopped)
				} else {
					oc := outcomeOf(page[0])
					page = page[1:]
					o.ID, o.Status, o.Result, o.Error = oc.ID, oc.Status, oc.Result, oc.Error
					if claimcheck.IsRef(o.Result) {
						v, err := w.fetchOf(ctx, o.ID, o.Result)
						if err != nil {
							yield(ChildOutcome{}, fmt.Errorf("map %q: result of %s: %w", name, o.ID, err))
							return
						}
						o.Result = v
					}
				}
				if !yield(o, nil) {
					return
				}
			}
		}
	}
}

// endedMap is what OutcomesOf needs of the map called name, which ended in
// this run: its size, why it stopped, and which children it started.
type endedMap struct {
	n       int
	stopped string
	// all: every child started. Otherwise next, when the map's groups
	// were read, is each slot's next child (slot s started s, s+C, ...
	// below next[s]); without them the map started its first children,
	// first of them (a map that ran in waves).
	all   bool
	next  []int
	first int
}

// started reports whether the map started child i.
func (m endedMap) started(i int) bool {
	switch {
	case m.all:
		return true
	case m.next != nil:
		return i < m.next[i%len(m.next)]
	}
	return i < m.first
}

// endedMap reads the summary this run recorded or replayed for the map
// called name and, for a map that stopped before it started every child,
// its groups.
func (w *Workflow) endedMap(ctx context.Context, name string) (endedMap, error) {
	w.mu.Lock()
	if w.diverged != nil {
		defer w.mu.Unlock()
		return endedMap{}, w.diverged
	}
	var rec lease.Step
	found := false
	for _, st := range w.steps[:w.pos] {
		if st.Name == "map:"+name {
			rec, found = st, true
			break
		}
	}
	w.mu.Unlock()
	if !found {
		return endedMap{}, &PermanentError{Err: fmt.Errorf("outcomes of map %q: no map of that name has ended in this run (call workflow.Map first, and read its outcomes once it returns): %w", name, lease.ErrInvalid)}
	}
	raw := rec.Result
	if claimcheck.IsRef(raw) {
		v, err := w.fetchStep(ctx, rec.Name, raw)
		if err != nil {
			return endedMap{}, err
		}
		raw = v
	}
	var sum MapSummary
	if err := json.Unmarshal(raw, &sum); err != nil {
		return endedMap{}, &PermanentError{Err: fmt.Errorf("outcomes of map %q: its recorded summary does not decode: %w", name, err)}
	}
	m := endedMap{n: sum.Total, stopped: sum.Stopped, all: sum.Stopped == MapStoppedAll || sum.Started >= sum.Total, first: sum.Started}
	var n, c int
	if m.all || rec.Op == "" {
		return m, nil
	}
	if _, err := fmt.Sscanf(rec.Op, "map %d/%d", &n, &c); err != nil || c < 1 || c > mapstate.MaxSlots {
		return m, nil // not a shape a map records: as in waves
	}
	ids := make([]string, mapstate.Groups(c))
	for g := range ids {
		ids[g] = mapstate.GroupID(w.held.TaskID, name, g)
	}
	groups, err := w.att.MapGroups(ctx, ids)
	switch {
	case errors.Is(err, lease.ErrNotFound):
		return m, nil // a map that ran in waves has no groups
	case err != nil:
		return endedMap{}, fmt.Errorf("outcomes of map %q: read its groups: %w", name, err)
	}
	m.next = make([]int, c)
	for _, g := range groups {
		for j := range g.Seq {
			m.next[g.First+j] = g.Next(g.First + j)
		}
	}
	return m, nil
}
