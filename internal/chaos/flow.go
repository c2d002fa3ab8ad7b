package chaos

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"
)

// Flow control under chaos (docs/chaos.md, "Flow control"): a queue's rate
// limit and a kind's concurrency limit hold while workers die and freeze,
// their calls fail and the queue is paused and resumed.

// FlowInput is what the flow-control checks look at, besides Input.
type FlowInput struct {
	// StartsPerWindow is the queue's rate limit: starts in each window.
	StartsPerWindow int
	// Windows holds each rate window item of the table at the end: its
	// count of starts.
	Windows map[string]int
	// Starts are the starts the rate windows gave, from the proxies.
	Starts []Start
	// Limited names the tasks of the kind with a concurrency limit of
	// KindLimit attempts at once.
	Limited   map[string]bool
	KindLimit int
	// Paused lists the times the queue was paused: [0] paused, [1] resumed.
	Paused [][2]time.Time
	// PauseLag is how old a worker's reading of the pause may be.
	PauseLag time.Duration
}

// FlowReport is what the flow-control checks found: counters are
// violations when non-zero, except those marked as information.
type FlowReport struct {
	// Unmatched: handler starts with no start of a rate window of their
	// own (taken by their worker between their claim and their handler's
	// start): a task ran without being counted.
	Unmatched int
	// OverWindow: windows that gave more starts than the limit (counted
	// by the proxies, or in the table).
	OverWindow int
	// OverLimit: moments when more attempts of the limited kind ran,
	// holding their lease, than its limit.
	OverLimit int

	// Information.
	HandlerStarts int // handler starts, every one a start
	Counted       int // starts the windows gave
	Windows       int // windows that gave a start
	FullWindows   int // windows that gave as many starts as the limit
	MaxRunning    int // most attempts of the limited kind running at once
	// RanWhilePaused counts handler starts while the queue was paused of
	// a message received after the pause had had time to be seen: a
	// worker whose reading of the queue's tags failed polls on (it counts
	// a failed reading as not paused, and says so once).
	RanWhilePaused int

	Violations []string
}

// attempt is one run of a handler as the evidence and the writes show it.
type attempt struct {
	task       string
	fence      int64
	worker     string
	start, end time.Time // end: the handler's return, or when its lease certainly ended
	claimed    time.Time // when its claim was forwarded (zero: not seen)
}

// CheckFlow runs the flow-control checks.
func CheckFlow(in Input, f FlowInput) *FlowReport {
	r := &FlowReport{}
	flag := func(what string) { r.Violations = append(r.Violations, what) }
	atts := attemptsOf(in)
	r.HandlerStarts = len(atts)

	// 1. Every handler start took a start of its own from a window, by its
	// worker, after its claim and before it began.
	r.Counted = len(f.Starts)
	byWorker := map[string][]Start{}
	perWindow := map[string]int{}
	for _, s := range f.Starts {
		byWorker[s.Worker] = append(byWorker[s.Worker], s)
		perWindow[s.Window]++
	}
	need := map[string][]*attempt{}
	for _, a := range atts {
		need[a.worker] = append(need[a.worker], a)
	}
	for w, as := range need {
		for _, a := range unmatched(as, byWorker[w]) {
			r.Unmatched++
			if r.Unmatched <= maxListed {
				flag(fmt.Sprintf("unmatched: %s fence %d started its handler on %s at %s with no start of a rate window taken by %s since its claim (%s)",
					a.task, a.fence, a.worker, stamp(a.start), a.worker, stamp(a.claimed)))
			}
		}
	}

	// 2. No window gave more than the limit: as the proxies saw the
	// starts, and as the table counts them.
	windows := map[string]bool{}
	for w := range perWindow {
		windows[w] = true
	}
	for w := range f.Windows {
		windows[w] = true
	}
	for _, w := range slices.Sorted(maps.Keys(windows)) {
		seen, kept := perWindow[w], f.Windows[w]
		if max(seen, kept) > f.StartsPerWindow {
			r.OverWindow++
			flag(fmt.Sprintf("over_window: window %q gave %d starts (the table counts %d); the limit is %d", w, seen, kept, f.StartsPerWindow))
		}
		if max(seen, kept) >= f.StartsPerWindow {
			r.FullWindows++
		}
	}
	r.Windows = len(windows)

	// 3. At most KindLimit attempts of the limited kind ran at once, each
	// counted from its handler's start until it returned or its lease
	// certainly ended (a worker killed or frozen holds its slot until its
	// lease has run out, and no longer).
	var limited []*attempt
	for _, a := range atts {
		if f.Limited[a.task] {
			limited = append(limited, a)
		}
	}
	for _, a := range limited {
		running := 1
		for _, b := range limited {
			if b != a && !b.start.After(a.start) && a.start.Before(b.end) {
				running++
			}
		}
		r.MaxRunning = max(r.MaxRunning, running)
		if running > f.KindLimit {
			r.OverLimit++
			if r.OverLimit <= maxListed {
				flag(fmt.Sprintf("over_limit: %d attempts of the limited kind ran at %s (the limit is %d) when %s fence %d started on %s",
					running, stamp(a.start), f.KindLimit, a.task, a.fence, a.worker))
			}
		}
	}

	// Information: handlers of messages received once a pause had had time
	// to be seen.
	for _, a := range atts {
		d, ok := lastDelivery(in.Deliveries, a)
		if !ok {
			continue
		}
		for _, p := range f.Paused {
			if a.start.After(p[0]) && a.start.Before(p[1]) && d.Answered.After(p[0].Add(f.PauseLag)) {
				r.RanWhilePaused++
				break
			}
		}
	}
	return r
}

// attemptsOf pairs the handlers' start and end lines into attempts, each
// ending no later than its lease certainly ended (from the writes).
func attemptsOf(in Input) []*attempt {
	type key struct {
		task  string
		fence int64
	}
	byTask := map[string][]Write{}
	for _, w := range in.Writes {
		byTask[w.Task] = append(byTask[w.Task], w)
	}
	xs := map[string]map[int64]*execution{}
	claimed := map[key]time.Time{}
	for task, ws := range byTask {
		xs[task] = executionsOf(ws)
		for _, w := range ws {
			k := key{task, w.Fence}
			if w.Status == "RUNNING" && (claimed[k].IsZero() || w.Forwarded.Before(claimed[k])) {
				claimed[k] = w.Forwarded
			}
		}
	}
	ends := map[key]time.Time{}
	for _, e := range in.Handler {
		if e.Event == "end" {
			ends[key{e.Task, e.Fence}] = e.At()
		}
	}
	var out []*attempt
	for _, e := range in.Handler {
		if e.Event != "start" {
			continue
		}
		k := key{e.Task, e.Fence}
		a := &attempt{task: e.Task, fence: e.Fence, worker: e.Worker, start: e.At(), claimed: claimed[k],
			end: time.Unix(1<<40, 0)}
		if end, ok := ends[k]; ok {
			a.end = end
		}
		if x := xs[e.Task][e.Fence]; x != nil && !x.leaseUntil.IsZero() && x.heldUntil().Before(a.end) {
			a.end = x.heldUntil()
		}
		out = append(out, a)
	}
	return out
}

// unmatched pairs each attempt of one worker with a start of that worker
// forwarded after its claim and before its handler began, no start twice,
// and returns the attempts left without one. Taking the attempts by the
// time their handlers began, each with the earliest start it may have,
// pairs as many as any pairing can.
func unmatched(as []*attempt, starts []Start) []*attempt {
	sort.Slice(as, func(i, j int) bool { return as[i].start.Before(as[j].start) })
	sort.Slice(starts, func(i, j int) bool { return starts[i].Forwarded.Before(starts[j].Forwarded) })
	used := make([]bool, len(starts))
	var left []*attempt
	for _, a := range as {
		found := false
		for i, s := range starts {
			if used[i] || s.Forwarded.Before(a.claimed) {
				continue
			}
			if s.Forwarded.After(a.start) {
				break
			}
			used[i], found = true, true
			break
		}
		if !found {
			left = append(left, a)
		}
	}
	return left
}

// lastDelivery is the last delivery of a's task to a's worker before a's
// handler began.
func lastDelivery(ds []Delivery, a *attempt) (Delivery, bool) {
	var last Delivery
	ok := false
	for _, d := range ds {
		if d.Task == a.task && d.Worker == a.worker && d.Answered.Before(a.start) && (!ok || d.Answered.After(last.Answered)) {
			last, ok = d, true
		}
	}
	return last, ok
}
