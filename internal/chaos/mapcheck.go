package chaos

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
)

// The sliding map under chaos (docs/chaos.md, "The sliding map"): at most
// MaxConcurrency children run at once, counted from the writes; each
// child ends once; the parent ends with the children's counts; and it is
// not resumed once per child.

// MapPlan is one map: N children (Kids, in index order: "PARENT/items/i"),
// Conc at a time. The children that must fail are in Input.Expect.
type MapPlan struct {
	N, Conc int
	Kids    []string
}

// MapSummary is what a mapper's result says of its map (the worker's copy
// of workflow.MapResult).
type MapSummary struct {
	Succeeded int `json:"n"`
	Total     int `json:"total"`
	Started   int `json:"started"`
	Failed    int `json:"failed"`
}

// MapReport is what the map checks found. OverConc, ChildTwice,
// BadSummary and PerChild are violations when non-zero.
type MapReport struct {
	// OverConc: children that began while Conc others certainly ran.
	OverConc int
	// ChildTwice: children ended twice, run again after their end, or
	// outside the map's n.
	ChildTwice int
	// BadSummary: SUCCEEDED maps whose result disagrees with their
	// children's ends.
	BadSummary int
	// PerChild: maps whose parent was resumed at least once per ten
	// children (a sliding map's parent runs once per batch of items).
	PerChild int

	// Information.
	Children int // children planned
	Done     int // maps SUCCEEDED with a clean report
	// MaxRunning: most children certainly running at once;
	// MaxRunningLoose: the same counted with each write's whole
	// uncertainty (applied as early, and ended as late, as it may have).
	MaxRunning, MaxRunningLoose int
	// MaxHandlers: most children's handlers running at once while their
	// lease held, from the handlers' lines (each from its start line to
	// its end line or the end of its lease, whichever came first, as
	// over_limit counts a kind's attempts).
	MaxHandlers int
	Conc        int // the largest map's MaxConcurrency
	// ParentRuns: runs of the parents' handler (start lines); Resumes:
	// writes that took a parent out of WAITING.
	ParentRuns, Resumes int
	// ChildRuns: handler starts of the children (more than Children when
	// a run was killed, frozen or lost its lease and was taken over).
	ChildRuns int
	// Failed: children that ended FAILED, as planned.
	Failed int
	// Exits: workers that exited right after a child's end was written,
	// before it started the child's successor (exit_after_finish lines).
	Exits int
}

// span is when one child ran: certainly from from to to (the claim
// answered, the end not yet forwarded); at most from loose[0] to loose[1].
type span struct {
	id       string
	from, to time.Time
	loose    [2]time.Time
	terminal bool
}

// never is the end of a child with no ending write (stuck: judged there).
var never = time.Unix(1<<40, 0)

// checkMaps runs the map checks over every map of the run.
func checkMaps(in Input, writesByTask map[string][]Write, flag func(kind, detail string)) MapReport {
	var r MapReport
	if in.Workflows == nil {
		return r
	}
	for _, id := range slices.Sorted(maps.Keys(in.Workflows.Maps)) {
		plan := in.Workflows.Maps[id]
		r.Children += plan.N
		r.Conc = max(r.Conc, plan.Conc)
		clean := checkMap(in, id, plan, writesByTask, &r, flag)
		if rec, ok := in.Records[id]; clean && ok && rec.Status == lease.StatusSucceeded {
			r.Done++
		}
	}
	return r
}

// checkMap checks one map and reports whether it found nothing wrong.
func checkMap(in Input, id string, plan MapPlan, writesByTask map[string][]Write, r *MapReport, flag func(kind, detail string)) bool {
	before := r.OverConc + r.ChildTwice + r.BadSummary + r.PerChild
	kids := map[string]bool{}
	for _, k := range plan.Kids {
		kids[k] = true
	}
	// (b) Each child once: one ending write, nothing after it, no handler
	// run under a fence after the one that ended it; no child beyond n.
	prefix := id + "/items/"
	for task := range writesByTask {
		rest, ok := strings.CutPrefix(task, prefix)
		if _, err := strconv.Atoi(rest); ok && err == nil && !kids[task] {
			r.ChildTwice++
			flag("map_child_twice", fmt.Sprintf("%s: child %s written, outside the map's %d children", id, task, plan.N))
		}
	}
	var spans []span
	ends := map[string]int64{} // the fence that ended each child
	for _, kid := range plan.Kids {
		s, endFence, problem := childSpan(kid, writesByTask[kid])
		if problem != "" {
			r.ChildTwice++
			flag("map_child_twice", fmt.Sprintf("%s: child %s %s", id, kid, problem))
		}
		if s.terminal {
			ends[kid] = endFence
		}
		if !s.from.IsZero() {
			spans = append(spans, s)
		}
	}
	for _, e := range in.Handler {
		if e.Event == "exit_after_finish" && kids[e.Task] {
			r.Exits++
		}
		if e.Event != "start" {
			continue
		}
		if e.Task == id {
			r.ParentRuns++
			continue
		}
		if !kids[e.Task] {
			continue
		}
		r.ChildRuns++
		if f, ended := ends[e.Task]; ended && e.Fence > f {
			r.ChildTwice++
			flag("map_child_twice", fmt.Sprintf("%s: child %s ran again under fence %d (by %s at %s) after fence %d ended it", id, e.Task, e.Fence, e.Worker, stamp(e.At()), f))
		}
	}

	// (a) At most Conc at once, certain overlaps only.
	most, over := maxRunning(spans, plan.Conc, func(s span) (time.Time, time.Time) { return s.from, s.to })
	r.MaxRunning = max(r.MaxRunning, most)
	loose, _ := maxRunning(spans, plan.Conc, func(s span) (time.Time, time.Time) { return s.loose[0], s.loose[1] })
	r.MaxRunningLoose = max(r.MaxRunningLoose, loose)
	for i, o := range over {
		r.OverConc++
		if i < maxListed {
			flag("map_over_conc", fmt.Sprintf("%s: child %s began at %s while %d others certainly ran (MaxConcurrency %d): %s",
				id, o.span.id, stamp(o.span.from), o.live, plan.Conc, strings.Join(o.others, " ")))
		}
	}

	var runs []span
	for _, a := range attemptsOf(in) {
		if kids[a.task] {
			runs = append(runs, span{id: a.task, from: a.start, to: a.end})
		}
	}
	handlers, _ := maxRunning(runs, plan.Conc, func(s span) (time.Time, time.Time) { return s.from, s.to })
	r.MaxHandlers = max(r.MaxHandlers, handlers)

	// (d) Not resumed once per child.
	resumes := countResumes(writesByTask[id])
	r.Resumes += resumes
	if resumes*10 >= plan.N {
		r.PerChild++
		flag("map_per_child", fmt.Sprintf("%s: its parent was resumed %d times for %d children (a sliding map's parent runs once per batch of items)", id, resumes, plan.N))
	}

	// (c) Nothing stuck: the parent's summary is its children's ends.
	if rec, ok := in.Records[id]; ok && rec.Status == lease.StatusSucceeded {
		succeeded, failed := 0, 0
		for _, kid := range plan.Kids {
			switch in.Records[kid].Status {
			case lease.StatusSucceeded:
				succeeded++
			case lease.StatusFailed:
				failed++
				r.Failed++
			}
		}
		var got MapSummary
		want := MapSummary{Succeeded: succeeded, Total: plan.N, Started: plan.N, Failed: failed}
		if err := json.Unmarshal(rec.Result, &got); err != nil || got != want || succeeded+failed != plan.N {
			r.BadSummary++
			flag("map_summary", fmt.Sprintf("%s: result %s, want %+v (its children's records: %d SUCCEEDED, %d FAILED of %d)", id, rec.Result, want, succeeded, failed, plan.N))
		}
	}
	return r.OverConc+r.ChildTwice+r.BadSummary+r.PerChild == before
}

// countResumes counts the writes that took a task out of WAITING into a
// run (PENDING or RUNNING).
func countResumes(ws []Write) int {
	n := 0
	for _, w := range ws {
		if w.FromWaiting && (w.Status == string(lease.StatusPending) || w.Status == string(lease.StatusRunning)) {
			n++
		}
	}
	return n
}

// childSpan is when a child ran, from its writes: from its first write
// (the create-and-claim; a creation that left it PENDING counts too) to
// its first write that ended it, a span that holds every takeover (a
// killed holder's child still occupies its slot until another ends it).
// problem says what was wrong: ended twice, or written after its end.
func childSpan(id string, ws []Write) (s span, endFence int64, problem string) {
	s = span{id: id, to: never, loose: [2]time.Time{{}, never}}
	var end *Write
	endings := 0
	for i := range ws {
		w := &ws[i]
		if s.from.IsZero() || w.Answered.Before(s.from) {
			s.from = w.Answered
		}
		if s.loose[0].IsZero() || w.Forwarded.Before(s.loose[0]) {
			s.loose[0] = w.Forwarded
		}
		if lease.Status(w.Status).Terminal() {
			endings++
			if end == nil || w.Forwarded.Before(end.Forwarded) {
				end = w
			}
		}
	}
	if end == nil {
		return s, 0, ""
	}
	s.terminal, s.to, s.loose[1] = true, end.Forwarded, end.Answered
	if endings > 1 {
		problem = fmt.Sprintf("ended by %d writes (the first %s under fence %d by %s at %s)", endings, end.Status, end.Fence, end.Worker, stamp(end.Forwarded))
	}
	for _, w := range ws {
		if !lease.Status(w.Status).Terminal() && w.Forwarded.After(end.Answered) {
			problem = fmt.Sprintf("written %s under fence %d by %s at %s, after its end (%s under fence %d, answered %s)",
				w.Status, w.Fence, w.Worker, stamp(w.Forwarded), end.Status, end.Fence, stamp(end.Answered))
			break
		}
	}
	return s, end.Fence, problem
}

// overrun is a child that began while limit others ran.
type overrun struct {
	span   span
	live   int
	others []string
}

// maxRunning is the most spans live at one instant (each from its begin,
// inclusive, to its end, exclusive, as bounds gives them), and the spans
// that began while limit or more others were live.
func maxRunning(spans []span, limit int, bounds func(span) (time.Time, time.Time)) (int, []overrun) {
	type edge struct {
		at    time.Time
		delta int
		i     int
	}
	var edges []edge
	for i, s := range spans {
		from, to := bounds(s)
		if !from.Before(to) {
			continue // no instant certainly running
		}
		edges = append(edges, edge{from, 1, i}, edge{to, -1, i})
	}
	// Ends before begins at the same instant: a successor claimed as its
	// predecessor's end lands does not overlap it.
	slices.SortFunc(edges, func(a, b edge) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.delta - b.delta
	})
	live := map[int]bool{}
	most := 0
	var over []overrun
	for _, e := range edges {
		if e.delta < 0 {
			delete(live, e.i)
			continue
		}
		if len(live) >= limit {
			o := overrun{span: spans[e.i], live: len(live)}
			for _, j := range slices.Sorted(maps.Keys(live)) {
				o.others = append(o.others, spans[j].id)
			}
			if len(o.others) > 8 {
				o.others = append(o.others[:8], fmt.Sprintf("(and %d more)", len(live)-8))
			}
			over = append(over, o)
		}
		live[e.i] = true
		most = max(most, len(live))
	}
	return most, over
}
