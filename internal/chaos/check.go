package chaos

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
)

// MaxAttempts is every chaos task's max_attempts, children and chain
// links included: the most a task may ask for (lease.MaxAttemptsLimit; the tokens in the tests write it as 100), so
// that the chaos alone cannot exhaust a task. At 20, CI-size runs failed
// now and then (one task in 800) with every attempt's lease expired: the
// harness kills or stops a worker every 2 to 5 s, so a process lives about
// 6 s, and a task of 2 to 4 s under a paused worker lost 20 in a row.
const MaxAttempts = lease.MaxAttemptsLimit

// DeadLetter is one message found on the work queue's dead-letter queue.
type DeadLetter struct {
	Body   string
	Reason string // the leasehold-reason attribute; empty when absent
}

// Input is everything the checks look at once the run is over.
type Input struct {
	// Valid lists the ids of the valid tasks sent.
	Valid []string
	// Records holds the final task records by id (read from the table).
	Records map[string]lease.Task
	// Writes are the applied writes to the table, from the proxies.
	Writes []Write
	// Handler and Metrics are the workers' own evidence.
	Handler []HandlerEvent
	Metrics []MetricEvent
	// Malformed lists the bodies of the malformed messages sent; DLQ what
	// the dead-letter queue held at the end.
	Malformed []string
	DLQ       []DeadLetter
	// Deliveries and Deletions are the work queue's messages as the
	// workers received and deleted them, from the proxies.
	Deliveries []Delivery
	Deletions  []Deletion
	// Fates says, per worker, when it was killed, paused and resumed.
	Fates map[string][]string
	// Stderr maps each worker process to what it wrote on stderr.
	Stderr map[string]string
	// Now is when the records were read; it dates the stuck report.
	Now time.Time
	// Expect is the status each valid task must end in; a task not named
	// must end SUCCEEDED.
	Expect map[string]lease.Status
	// Workflows describes the workflow tasks among Valid; nil when none
	// were sent.
	Workflows *Workflows
	// Downs are the instants worker processes were killed or exited.
	Downs []time.Time
}

// Report is what the checks found. Counters named in the summary line are
// violations when non-zero, except those listed as information.
type Report struct {
	Tasks, Succeeded, Stuck int
	WrongEnd                int // terminal, but not in the status the task must end in
	DoubleFinish            int // tasks with more than one accepted finish
	Overlaps                int // pairs of executions of one task whose held leases certainly overlapped
	StaleAccepted           int // accepted finishes under a fence older than the task's latest
	FinishWithoutRun        int // accepted finishes with no completed handler run of that fence
	FalseSuccess            int // the worker reported success but the store holds another outcome
	BadHistory              int // task records whose history contradicts the writes
	MalformedOK, Malformed  int
	Panics, Races           int

	// Information, not violations.
	Executions       int // handler starts
	Takeovers        int // claims beyond the first of each task
	LeaseLost        int // attempts the workers reported as lease_lost
	HandlerPastLease int // handler runs that ended after their lease had ended (SIGSTOP)
	RedrivenValid    int // valid tokens found on the DLQ without a reason (redrive policy)
	UnobservedFences int // fences in the records that no observed write carried
	// FencedOutDeletes counts messages of a task deleted by a worker while
	// another worker's newer execution held the task: that holder is left
	// without a message, and if it dies the task waits for a sweeper.
	FencedOutDeletes int

	// Workflow checks and counts (workflow.go).
	Workflow WorkflowReport

	// Violations explains each non-zero violation counter, task by task.
	Violations []string
}

// Failed reports whether any invariant was violated.
func (r *Report) Failed() bool { return len(r.Violations) > 0 }

// maxListed bounds the tasks listed per kind of violation.
const maxListed = 25

// execution is what the writes say about one fence of one task.
type execution struct {
	fence int64
	// claimBy: the claim was certainly applied by then (the earliest
	// answer of a write that left the task RUNNING under this fence).
	claimBy time.Time
	// leaseUntil: the latest lease_until the store accepted for it.
	leaseUntil time.Time
	// endAfter: the write that ended it (finish or release) was certainly
	// applied after this (its forwarding time); zero when none was.
	endAfter time.Time
	endings  []Write
	worker   string // the worker that claimed it
}

// heldUntil is until when the store certainly still held the lease.
func (x *execution) heldUntil() time.Time {
	if !x.endAfter.IsZero() && x.endAfter.Before(x.leaseUntil) {
		return x.endAfter
	}
	return x.leaseUntil
}

func executionsOf(ws []Write) map[int64]*execution {
	xs := map[int64]*execution{}
	for _, w := range ws {
		x := xs[w.Fence]
		if x == nil {
			x = &execution{fence: w.Fence}
			xs[w.Fence] = x
		}
		if w.Status == string(lease.StatusRunning) {
			if x.claimBy.IsZero() || w.Answered.Before(x.claimBy) {
				x.claimBy = w.Answered
			}
			if x.worker == "" {
				x.worker, _, _ = strings.Cut(w.Owner, "/")
			}
			if w.LeaseUntil.After(x.leaseUntil) {
				x.leaseUntil = w.LeaseUntil
			}
			continue
		}
		x.endings = append(x.endings, w)
		if x.endAfter.IsZero() || w.Forwarded.Before(x.endAfter) {
			x.endAfter = w.Forwarded
		}
	}
	return xs
}

// Check runs every check on in.
func Check(in Input) *Report {
	r := &Report{Tasks: len(in.Valid)}
	violations := map[string][]string{}
	flag := func(kind, detail string) {
		violations[kind] = append(violations[kind], detail)
	}

	writesByTask := map[string][]Write{}
	for _, w := range in.Writes {
		writesByTask[w.Task] = append(writesByTask[w.Task], w)
	}
	type key struct {
		task  string
		fence int64
	}
	ends := map[key][]HandlerEvent{}
	for _, e := range in.Handler {
		switch e.Event {
		case "start":
			r.Executions++
		case "end":
			ends[key{e.Task, e.Fence}] = append(ends[key{e.Task, e.Fence}], e)
		}
	}
	workerSays := map[string][]MetricEvent{}
	for _, m := range in.Metrics {
		workerSays[m.Task] = append(workerSays[m.Task], m)
		if m.Outcome == "lease_lost" {
			r.LeaseLost++
		}
	}
	dlqBodies := map[string][]DeadLetter{}
	for _, d := range in.DLQ {
		dlqBodies[d.Body] = append(dlqBodies[d.Body], d)
	}
	for _, d := range in.DLQ {
		if d.Reason == "" {
			r.RedrivenValid++
		}
	}

	byHandle := map[string]Delivery{}
	deliveriesOf := map[string][]Delivery{}
	for _, d := range in.Deliveries {
		byHandle[d.ReceiptHandle] = d
		if d.Task != "" {
			deliveriesOf[d.Task] = append(deliveriesOf[d.Task], d)
		}
	}
	deletionsOf := map[string][]Deletion{}
	for _, d := range in.Deletions {
		if m, ok := byHandle[d.ReceiptHandle]; ok && m.Task != "" {
			deletionsOf[m.Task] = append(deletionsOf[m.Task], d)
		}
	}

	// The children of a cancelled parent may end in any status, or never
	// be created; the cancel check judges them (workflow.go).
	free := in.Workflows.freeEnds(in.Records)
	ids := slices.Sorted(slices.Values(in.Valid))
	for _, id := range ids {
		rec, ok := in.Records[id]
		ws := writesByTask[id]
		xs := executionsOf(ws)
		fences := make([]int64, 0, len(xs))
		for f := range xs {
			fences = append(fences, f)
		}
		slices.Sort(fences)
		trail, fencedOut := messageTrail(id, xs, fences, deliveriesOf[id], deletionsOf[id], byHandle)
		r.FencedOutDeletes += fencedOut

		// 1. Every valid task ended, in the status it must end in
		// (SUCCEEDED unless Expect says otherwise).
		want := lease.StatusSucceeded
		if s, named := in.Expect[id]; named {
			want = s
		}
		switch {
		case free[id] && (!ok || rec.Status.Terminal()):
			if ok && rec.Status == lease.StatusSucceeded {
				r.Succeeded++
			}
		case !ok:
			r.Stuck++
			flag("stuck", fmt.Sprintf("%s: no task record%s messages=%s", id, dlqNote(id, in.DLQ), trail))
		case rec.Status.Terminal() && rec.Status != want:
			r.WrongEnd++
			flag("wrong_end", fmt.Sprintf("%s: ended %s, want %s: %s", id, rec.Status, want, stuckLine(rec, in.Now, ws, in.DLQ)))
		case rec.Status.Terminal() && rec.Status != lease.StatusSucceeded:
			// Ended as it must (a planned failure, a cancelled dependent).
		case rec.Status != lease.StatusSucceeded:
			r.Stuck++
			line := stuckLine(rec, in.Now, ws, in.DLQ) + " messages=" + trail
			if holder, _, _ := strings.Cut(rec.LeaseOwner, "/"); holder != "" && len(in.Fates[holder]) > 0 {
				line += fmt.Sprintf(" holder %s: %s", holder, strings.Join(in.Fates[holder], ", "))
			}
			flag("stuck", line)
		default:
			r.Succeeded++
		}
		claims := 0
		for _, f := range fences {
			if !xs[f].claimBy.IsZero() {
				claims++
			}
		}
		if claims > 1 {
			r.Takeovers += claims - 1
		}

		// 2. Exactly one accepted finish, under the latest fence.
		var finishes []Write
		for _, w := range ws {
			if w.Status == string(lease.StatusSucceeded) {
				finishes = append(finishes, w)
			}
		}
		if len(finishes) > 1 {
			r.DoubleFinish++
			flag("double_finish", fmt.Sprintf("%s: %d finish writes accepted: %s", id, len(finishes), writesText(finishes)))
		}
		maxFence := int64(0)
		if len(fences) > 0 {
			maxFence = fences[len(fences)-1]
		}
		if ok && rec.Fence > maxFence {
			maxFence = rec.Fence
		}
		for _, f := range finishes {
			if f.Fence < maxFence {
				r.StaleAccepted++
				flag("stale_accepted", fmt.Sprintf("%s: finish under fence %d accepted, but fence %d exists (record fence %d)", id, f.Fence, maxFence, rec.Fence))
			}
			// The accepted result came from a handler run of that fence
			// that completed (a callback's answer too is read by a run
			// of the handler, which finishes the task).
			completed := false
			for _, e := range ends[key{id, f.Fence}] {
				completed = completed || e.Outcome == "ok"
			}
			if !completed {
				r.FinishWithoutRun++
				flag("finish_without_run", fmt.Sprintf("%s: finish under fence %d accepted, but no handler run of fence %d completed (evidence: %d end lines)", id, f.Fence, f.Fence, len(ends[key{id, f.Fence}])))
			}
		}
		// Other stale results: a write ending an attempt (a failure, a
		// retry, a cancellation) accepted under a fence after a newer fence
		// had certainly been claimed.
		for _, f := range fences {
			for _, e := range xs[f].endings {
				if e.Status == string(lease.StatusSucceeded) {
					continue // judged above
				}
				for _, g := range fences {
					if newer := xs[g]; g > f && !newer.claimBy.IsZero() && newer.claimBy.Before(e.Forwarded) {
						r.StaleAccepted++
						flag("stale_accepted", fmt.Sprintf("%s: %s write under fence %d accepted after fence %d was claimed (%s)", id, e.Status, f, g, stamp(newer.claimBy)))
						break
					}
				}
			}
		}
		if ok && rec.Status == lease.StatusSucceeded {
			if len(finishes) == 0 {
				r.BadHistory++
				flag("bad_history", fmt.Sprintf("%s: record SUCCEEDED under fence %d, but no accepted finish write was observed", id, rec.Fence))
			}
			for _, f := range finishes {
				if f.Fence != rec.Fence {
					r.BadHistory++
					flag("bad_history", fmt.Sprintf("%s: record fence %d, accepted finish under fence %d", id, rec.Fence, f.Fence))
				}
			}
		}
		if ok {
			if msg := historyProblem(rec, xs); msg != "" {
				r.BadHistory++
				flag("bad_history", id+": "+msg)
			}
			for f := int64(1); f <= rec.Fence; f++ {
				if _, seen := xs[f]; !seen {
					r.UnobservedFences++
				}
			}
		}
		// The worker's own view: an attempt it reports as succeeded is the
		// one the store recorded.
		for _, m := range workerSays[id] {
			if m.Outcome == "succeeded" && (!ok || rec.Status != lease.StatusSucceeded || rec.Attempt != m.Attempt) {
				r.FalseSuccess++
				flag("false_success", fmt.Sprintf("%s: worker %s reports attempt %d succeeded; record: %s at attempt %d", id, m.Worker, m.Attempt, rec.Status, rec.Attempt))
			}
		}

		// 3. No two executions of the task held the lease at once. An
		// execution holds it from when its claim was applied until its
		// lease ran out or the write ending it was applied, whichever came
		// first; apply instants are known only within [forwarded,
		// answered], so only certain overlaps count.
		for i, f := range fences {
			older := xs[f]
			if older.leaseUntil.IsZero() {
				continue // never held as far as the writes show
			}
			for _, g := range fences[i+1:] {
				newer := xs[g]
				if newer.claimBy.IsZero() {
					continue
				}
				if newer.claimBy.Before(older.heldUntil()) {
					r.Overlaps++
					flag("overlap", fmt.Sprintf("%s: fence %d claimed by %s while fence %d held its lease until %s (lease_until %s, end write after %s)",
						id, g, stamp(newer.claimBy), f, stamp(older.heldUntil()), stamp(older.leaseUntil), stamp(older.endAfter)))
				}
			}
			// Information: the handler of this fence ran on after its lease
			// had ended (a paused process); its writes are fenced.
			for _, e := range ends[key{id, f}] {
				if e.At().After(older.heldUntil()) {
					r.HandlerPastLease++
				}
			}
		}
	}

	// Workflows: resumes, children's outcomes, dependency order, callbacks.
	if in.Workflows != nil {
		r.Workflow = checkWorkflows(in, writesByTask, flag)
	}

	// 4. Every malformed message is on the DLQ with the reason.
	r.Malformed = len(in.Malformed)
	for _, body := range in.Malformed {
		found := false
		for _, d := range dlqBodies[body] {
			found = found || d.Reason != ""
		}
		if found {
			r.MalformedOK++
			continue
		}
		flag("malformed", fmt.Sprintf("%q: not on the DLQ with a leasehold-reason (%d copies without)", body, len(dlqBodies[body])))
	}

	// 5. No panics, no data races.
	names := make([]string, 0, len(in.Stderr))
	for n := range in.Stderr {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		s := in.Stderr[n]
		// Go panics and fatal runtime errors (such as concurrent map
		// writes), and handler panics the worker recovered from and logged.
		if c := strings.Count(s, "panic:") + strings.Count(s, "fatal error:") + strings.Count(s, `"handler panicked"`); c > 0 {
			r.Panics += c
			flag("panic", fmt.Sprintf("worker %s: %d panic(s): %s", n, c, excerpt(s, "panic")))
		}
		if c := strings.Count(s, "WARNING: DATA RACE"); c > 0 {
			r.Races += c
			flag("race", fmt.Sprintf("worker %s: %d data race(s): %s", n, c, excerpt(s, "WARNING: DATA RACE")))
		}
	}

	kinds := make([]string, 0, len(violations))
	for k := range violations {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		list := violations[k]
		for i, d := range list {
			if i == maxListed {
				r.Violations = append(r.Violations, fmt.Sprintf("%s: ... and %d more", k, len(list)-maxListed))
				break
			}
			r.Violations = append(r.Violations, k+": "+d)
		}
	}
	return r
}

// messageTrail describes what happened to the messages of task id: per
// message, how often it was delivered (the highest receive count) and by
// whom it was deleted. A deletion is marked "fenced out" when, as it was
// made, a newer execution by another worker certainly held the task (its
// claim was answered before the delete was forwarded, and no write had
// ended it before the delete was answered). It returns the text and the
// number of such deletions.
func messageTrail(id string, xs map[int64]*execution, fences []int64, ds []Delivery, dels []Deletion, byHandle map[string]Delivery) (string, int) {
	type msg struct {
		deliveries, maxCount int
		last                 string
		deletes              []string
	}
	msgs := map[string]*msg{}
	var order []string
	for _, d := range ds {
		m := msgs[d.MessageID]
		if m == nil {
			m = &msg{}
			msgs[d.MessageID] = m
			order = append(order, d.MessageID)
		}
		m.deliveries++
		m.maxCount = max(m.maxCount, d.ReceiveCount)
		m.last = d.Worker
	}
	fencedOut := 0
	for _, del := range dels {
		d := byHandle[del.ReceiptHandle]
		note := fmt.Sprintf("deleted by %s at %s", del.Worker, stamp(del.Answered))
		// The newest execution certainly claimed before the delete.
		var holder *execution
		for _, f := range fences {
			x := xs[f]
			if !x.claimBy.IsZero() && x.claimBy.Before(del.Forwarded) {
				holder = x
			}
		}
		if holder != nil && holder.worker != del.Worker &&
			(holder.endAfter.IsZero() || holder.endAfter.After(del.Answered)) {
			fencedOut++
			note += fmt.Sprintf(" (fenced out: fence %d held by %s)", holder.fence, holder.worker)
		}
		if m := msgs[d.MessageID]; m != nil {
			m.deletes = append(m.deletes, note)
		}
	}
	parts := make([]string, 0, len(order))
	for _, mid := range order {
		m := msgs[mid]
		p := fmt.Sprintf("%s: %d deliveries (receive count up to %d, last to %s)", short(mid), m.deliveries, m.maxCount, m.last)
		if len(m.deletes) > 0 {
			p += ", " + strings.Join(m.deletes, ", ")
		} else {
			p += ", never deleted"
		}
		parts = append(parts, p)
	}
	return "[" + strings.Join(parts, "; ") + "]", fencedOut
}

func short(s string) string {
	if len(s) > 8 {
		return s[:8]
	}
	return s
}

// historyProblem checks a record's history against itself and the writes:
// fences strictly increase and never pass the record's; each entry matches
// an applied ending write of its fence; a terminal record ends with an entry
// of its status.
func historyProblem(rec lease.Task, xs map[int64]*execution) string {
	var last int64
	succeeded := 0
	for i, h := range rec.History {
		// A wait for a callback is ended under the fence that suspended
		// the task: its end follows the WAITING entry with the same fence.
		// A task cancelled while PENDING (or WAITING) gets a CANCELLED
		// entry under the fence of its last attempt.
		sameWait := i > 0 && h.Fence == last && (rec.History[i-1].Status == lease.StatusWaiting ||
			(rec.History[i-1].Status == lease.StatusPending && h.Status == lease.StatusCancelled))
		if h.Fence <= last && !sameWait {
			return fmt.Sprintf("history entry %d has fence %d after fence %d", i, h.Fence, last)
		}
		last = h.Fence
		if h.Fence > rec.Fence {
			return fmt.Sprintf("history entry %d has fence %d beyond the record's %d", i, h.Fence, rec.Fence)
		}
		if h.Status == lease.StatusSucceeded {
			succeeded++
		}
		if x := xs[h.Fence]; x != nil && len(x.endings) > 0 {
			match := false
			for _, w := range x.endings {
				match = match || w.Status == string(h.Status)
			}
			if !match {
				return fmt.Sprintf("history entry %d (fence %d) says %s; the applied ending writes say %s", i, h.Fence, h.Status, writesText(x.endings))
			}
		}
	}
	if succeeded > 1 {
		return fmt.Sprintf("history holds %d SUCCEEDED entries", succeeded)
	}
	if rec.Status == lease.StatusCancelled && rec.Fence == 0 && len(rec.History) == 0 {
		// Cancelled before it ever ran (a dependent whose dependency
		// failed): no attempt, so no history.
		return ""
	}
	if rec.Status.Terminal() {
		if n := len(rec.History); n == 0 || rec.History[n-1].Status != rec.Status || rec.History[n-1].Fence != rec.Fence {
			return fmt.Sprintf("record %s under fence %d, but the last history entry is %s", rec.Status, rec.Fence, historyText(rec.History))
		}
	}
	return ""
}

func stuckLine(rec lease.Task, now time.Time, ws []Write, dlq []DeadLetter) string {
	held := "none"
	if !rec.LeaseUntil.IsZero() {
		held = fmt.Sprintf("%s until %s (%s ago)", rec.LeaseOwner, stamp(rec.LeaseUntil), now.Sub(rec.LeaseUntil).Round(time.Millisecond))
	}
	last := ws
	if len(last) > 4 {
		last = last[len(last)-4:]
	}
	return fmt.Sprintf("%s: status=%s attempt=%d/%d fence=%d lease=%s error=%q history=%s last_writes=%s%s",
		rec.ID, rec.Status, rec.Attempt, rec.MaxAttempts, rec.Fence, held, lease.Truncate(rec.Error, 120), historyText(rec.History), writesText(last), dlqNote(rec.ID, dlq))
}

// dlqNote says whether a token naming id sits on the DLQ.
func dlqNote(id string, dlq []DeadLetter) string {
	needle := `"id":"` + id + `"`
	for _, d := range dlq {
		if strings.Contains(d.Body, needle) {
			if d.Reason == "" {
				return " [its token is on the DLQ without a reason: moved by the redrive policy]"
			}
			return fmt.Sprintf(" [its token is on the DLQ: %s]", d.Reason)
		}
	}
	return ""
}

func historyText(hs []lease.Attempt) string {
	parts := make([]string, len(hs))
	for i, h := range hs {
		parts[i] = fmt.Sprintf("%d/f%d:%s", h.Attempt, h.Fence, h.Status)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func writesText(ws []Write) string {
	parts := make([]string, len(ws))
	for i, w := range ws {
		s := fmt.Sprintf("%s f%d %s@%s", w.Op, w.Fence, w.Status, stamp(w.Answered))
		if w.Owner != "" {
			s += " by " + w.Owner
		}
		if w.Worker == ClientName {
			s += " by the test's client"
		}
		if w.CancelRequested {
			s += " [cancel requested]"
		}
		if w.Dropped {
			s += " (answer dropped)"
		}
		parts[i] = s
	}
	return "[" + strings.Join(parts, "; ") + "]"
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("15:04:05.000")
}

func excerpt(s, marker string) string {
	i := strings.Index(s, marker)
	if i < 0 {
		return ""
	}
	end := min(len(s), i+400)
	return strings.ReplaceAll(s[i:end], "\n", " | ")
}
