package durable

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/mapstate"
)

// MapOptions tune MapOf.
type MapOptions struct {
	// MaxConcurrency is how many children run at once (1 to
	// mapstate.MaxSlots; default DefaultMapConcurrency): a new one starts
	// as each one ends.
	MaxConcurrency int
	// MinSuccessful ends the map, launching no more children, once this
	// many have SUCCEEDED (0: every child runs).
	MinSuccessful int
	// ToleratedFailures ends the map, failed, once more children than this
	// have ended otherwise than SUCCEEDED (default 0).
	ToleratedFailures int
	// ToleratedFailurePercentage, beside ToleratedFailures, ends the map,
	// failed, once more than this percentage of its n children have ended
	// otherwise than SUCCEEDED (0 to 100; 0: only the count applies). The
	// map tolerates the smaller of the two when both are set.
	ToleratedFailurePercentage int
}

// Tolerated is how many failures a map of n children under o tolerates:
// ToleratedFailures, or ToleratedFailurePercentage of n, the smaller when
// both are set.
func (o MapOptions) Tolerated(n int) int {
	byPct := n * o.ToleratedFailurePercentage / 100
	switch {
	case o.ToleratedFailurePercentage == 0:
		return o.ToleratedFailures
	case o.ToleratedFailures == 0:
		return byPct
	}
	return min(o.ToleratedFailures, byPct)
}

// Map limits and defaults.
const (
	DefaultMapConcurrency = 10
	MaxMapChildren        = 100_000
	maxMapFailures        = 5 // failures a map's summary keeps
)

// MapSummary is what a map records when it ends (the step "map:"+name):
// its counts, why it stopped, and its first failures.
type MapSummary struct {
	Total     int       `json:"total"`
	Started   int       `json:"started"`
	Succeeded int       `json:"succeeded"`
	Failed    int       `json:"failed"`
	Stopped   string    `json:"stopped"` // "all", "min_successful" or "failures"
	Failures  []outcome `json:"failures,omitempty"`
}

// Why a map stops.
const (
	MapStoppedAll           = "all"
	MapStoppedMinSuccessful = "min_successful"
	MapStoppedFailures      = "failures"
)

// mapNote is a map's progress between its waves, kept on the task as its
// wait's note (lease.Wait.Note): the waves whose outcomes it has counted.
type mapNote struct {
	Map string `json:"map"`
	// Shape is the map's identity as its first wave saw it ("map N/C",
	// with its completion policy): a later wave of another shape is a
	// divergence, not a summary of children that ran under two shapes.
	// "" in a note written before shapes were kept.
	Shape    string    `json:"shape,omitempty"`
	Waves    int       `json:"waves"`
	OK       int       `json:"ok"`
	Failed   int       `json:"failed"`
	Failures []outcome `json:"failures,omitempty"`
}

// MapOf runs n children, item(i) the i-th, as the map called name (ids
// ChildIDIn(parent, name, i)), at most o.MaxConcurrency at a time, a new
// one starting as each one ends (slide: the children count themselves in
// the map's slot groups and start their successors; the handler runs
// again once per batch of items, not per child). Once every child has
// ended, or o's completion policy stopped the map and its running
// children ended, the summary is recorded as the step "map:"+name and
// returned (JSON of MapSummary). Until then it returns an
// *AwaitChildrenError the handler must return. A map that a worker began
// in waves (the code before sliding maps; its progress is the task's
// wait note) ends in waves.
func MapOf(ctx context.Context, name string, n int, item func(i int) (Child, error), o MapOptions) ([]byte, error) {
	w, ok := ctx.Value(workflowKey{}).(*Workflow)
	if !ok {
		return nil, ErrNoWorkflow
	}
	if err := CheckAwaitName(name); err != nil {
		return nil, &PermanentError{Err: err}
	}
	if err := errInSpace(ctx, "workflow.Map", mapInSpace); err != nil {
		return nil, err
	}
	size := cmp.Or(o.MaxConcurrency, DefaultMapConcurrency)
	switch {
	case n < 1 || n > MaxMapChildren:
		return nil, &PermanentError{Err: fmt.Errorf("map %q: %d children, want 1..%d: %w", name, n, MaxMapChildren, lease.ErrInvalid)}
	case size < 1 || size > mapstate.MaxSlots:
		return nil, &PermanentError{Err: fmt.Errorf("map %q: max concurrency %d, want 1..%d: %w", name, size, mapstate.MaxSlots, lease.ErrInvalid)}
	case o.MinSuccessful < 0 || o.MinSuccessful > n || o.ToleratedFailures < 0 || o.ToleratedFailurePercentage < 0 || o.ToleratedFailurePercentage > 100:
		return nil, &PermanentError{Err: fmt.Errorf("map %q: min successful %d (want 0..%d), tolerated failures %d (want >= 0), tolerated percentage %d (want 0..100): %w",
			name, o.MinSuccessful, n, o.ToleratedFailures, o.ToleratedFailurePercentage, lease.ErrInvalid)}
	}
	op := fmt.Sprintf("map %d/%d", n, size)
	if o.MinSuccessful > 0 || o.ToleratedFailures > 0 {
		op += fmt.Sprintf(" min %d tolerate %d", o.MinSuccessful, o.ToleratedFailures)
	}
	tolerate := o.Tolerated(n)
	if p := o.ToleratedFailurePercentage; p > 0 {
		op += fmt.Sprintf(" pct %d", p)
	}
	out, err := stepOf(ctx, "map:"+name, op, func(ctx context.Context) ([]byte, error) {
		w.mu.Lock()
		raw := w.note
		w.mu.Unlock()
		var note mapNote
		if json.Unmarshal([]byte(raw), &note) != nil || note.Map != name {
			// No wave of this map in flight (the waves of code before
			// sliding maps finish as they started): it slides.
			return w.slide(ctx, name, op, n, size, item, o.MinSuccessful, tolerate)
		}
		if note.Shape != "" && note.Shape != op {
			return nil, w.diverge(&DivergedError{Position: w.position() + 1, Recorded: fmt.Sprintf("%q (%s), with %d waves counted", "map:"+name, note.Shape, note.Waves), Asked: DescribeOp("map:"+name, op)})
		}
		wave := func(k int) (int, int) { return min(k*size, n), min((k+1)*size, n) }
		// The outcomes of the wave the task waited for, counted once: the
		// note says which waves are counted, and a run that stopped
		// before its suspension counts the same wave again from the same
		// note.
		if r := w.results; r != nil && r.Mode == lease.WaitChildren {
			from, to := wave(note.Waves)
			if from < to && len(r.Tasks) == to-from && r.Tasks[0].ID == ChildIDIn(w.held.TaskID, name, from) && r.Tasks[len(r.Tasks)-1].ID == ChildIDIn(w.held.TaskID, name, to-1) {
				for _, t := range r.Tasks {
					if t.Status == lease.StatusSucceeded {
						note.OK++
						continue
					}
					note.Failed++
					if len(note.Failures) < maxMapFailures {
						f := outcomeOf(t)
						f.Result, f.Error = nil, lease.Truncate(f.Error, 200)
						note.Failures = append(note.Failures, f)
					}
				}
				note.Waves++
			}
		}
		started, _ := wave(note.Waves)
		stopped := ""
		switch {
		case note.Failed > o.ToleratedFailures:
			stopped = MapStoppedFailures
		case o.MinSuccessful > 0 && note.OK >= o.MinSuccessful:
			stopped = MapStoppedMinSuccessful
		case started >= n:
			stopped = MapStoppedAll
		}
		if stopped != "" {
			return json.Marshal(MapSummary{Total: n, Started: started, Succeeded: note.OK, Failed: note.Failed, Stopped: stopped, Failures: note.Failures})
		}
		from, to := wave(note.Waves)
		children := make([]Child, to-from)
		ids := make([]string, to-from)
		for i := range children {
			c, err := item(from + i)
			if err != nil {
				return nil, &PermanentError{Err: fmt.Errorf("map %q: child %d: %w", name, from+i, err)}
			}
			children[i], ids[i] = c, ChildIDIn(w.held.TaskID, name, from+i)
		}
		b, err := json.Marshal(note)
		if err != nil {
			return nil, &PermanentError{Err: fmt.Errorf("map %q: progress: %w", name, err)}
		}
		return nil, &AwaitChildrenError{Children: children, IDs: ids, Note: string(b)}
	}, false)
	return out, w.wait(ctx, err, fmt.Sprintf("workflow.Map %q", name))
}

// ReadOutcomesOf reads the tasks ids from inside a handler (a map's
// children, say), 100 to a call (Attempt.ReadTasks: one BatchGetItem each
// on DynamoDB): their outcomes as JSON (as AllOf records them); a task
// that does not exist (expired) is EXPIRED. OutcomesOf reads a map's
// children a page at a time instead of all at once.
func ReadOutcomesOf(ctx context.Context, ids []string) ([]byte, error) {
	w, ok := ctx.Value(workflowKey{}).(*Workflow)
	if !ok {
		return nil, ErrNoWorkflow
	}
	tasks, err := w.att.ReadTasks(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]outcome, len(tasks))
	for i, t := range tasks {
		out[i] = outcomeOf(t)
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	return w.resolveOutcomes(ctx, b)
}

// StartedIDs are the ids of the tasks t started that t's item records,
// in the order they were started: the children of each finished All
// ("children:NAME") and Map ("map:NAME": ChildIDIn for each child it
// started), the children of the wait t is in (for a map, with those of
// its earlier waves), and the later links of t's chain. These tasks have
// no listing entry of their own unless they failed (lease.NewTask.Derived):
// they are listed under t. The children of an AwaitChildren that is over
// are not recorded on t, so not here.
func StartedIDs(t lease.Task) []string {
	var ids []string
	for _, st := range t.Steps {
		if name, ok := strings.CutPrefix(st.Name, "map:"); ok {
			var sum MapSummary
			if json.Unmarshal(st.Result, &sum) == nil {
				for i := range min(sum.Started, MaxMapChildren) {
					ids = append(ids, ChildIDIn(t.ID, name, i))
				}
			}
		} else if strings.HasPrefix(st.Name, "children:") {
			var outs []outcome
			if json.Unmarshal(st.Result, &outs) == nil {
				for _, o := range outs {
					ids = append(ids, o.ID)
				}
			}
		}
	}
	if _, _, sliding := ParseSlideNote(t.WaitNote); t.Wait == lease.WaitChildren && len(t.WaitFor) > 0 && !sliding {
		var note mapNote
		if json.Unmarshal([]byte(t.WaitNote), &note) == nil && note.Map != "" {
			// The map's earlier waves: the children before this one's first.
			prefix := childPrefix(t.ID, note.Map)
			if first, err := strconv.Atoi(strings.TrimPrefix(t.WaitFor[0], prefix)); err == nil && strings.HasPrefix(t.WaitFor[0], prefix) {
				for i := range min(first, MaxMapChildren) {
					ids = append(ids, prefix+strconv.Itoa(i))
				}
			}
		}
		ids = append(ids, t.WaitFor...)
	}
	for _, l := range t.Then {
		ids = append(ids, l.ID)
	}
	seen := make(map[string]bool, len(ids))
	return slices.DeleteFunc(ids, func(id string) bool {
		dup := seen[id]
		seen[id] = true
		return dup
	})
}

// mapInSpace is why a map may not run inside a child context or branch,
// and what to do instead.
const mapInSpace = "a map's children and a sliding map's counts are found by the map's name (children PARENT/NAME/i, counts kept under NAME), which a space's path does not fit; " +
	"run the map from the handler itself and pass its results in, or use workflow.All inside the space (its children's ids hold the space's path)"
