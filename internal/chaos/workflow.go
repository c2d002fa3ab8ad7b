package chaos

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
)

// Workflows describes the workflow tasks a run sent (docs/chaos.md,
// "Workflows"), for the checks.
type Workflows struct {
	// Fans maps each parent to its children's ids, in spawn order, and
	// ChildN each child to the n its payload carries (its result's n).
	Fans   map[string][]string
	ChildN map[string]int
	// After maps each task with dependencies to them.
	After map[string][]string
	// Callbacks names the tasks that wait for a callback.
	Callbacks map[string]bool
	// Answers are the callbacks the test sent.
	Answers []CallbackAnswer
}

// CallbackAnswer is one callback the test sent for a token.
type CallbackAnswer struct {
	Task  string
	Fence int64
	Via   string // "client" (Client.CompleteCallback) or "sqs" (a message on the work queue)
	// Client only: the call returned no error (accepted), or an error
	// matching leasehold.ErrBadCallback (rejected); neither: Err.
	Accepted, Rejected bool
	Err                string
}

// WorkflowReport is what the workflow checks found. BadResume, ChildMissed,
// EarlyDependent, CallbackDouble and CallbackLost are violations when
// non-zero; the rest is information.
type WorkflowReport struct {
	Parents, Children, Dependents, CallbackTasks int

	// BadResume: parents not resumed exactly once (one write took them
	// out of WAITING for their children), or whose handler ran again
	// without its children's outcomes after the suspension.
	BadResume int
	// ChildMissed: resumed runs of a parent that did not see every
	// child's final outcome (status, and the result of a success).
	ChildMissed int
	// EarlyDependent: runs of a task that started before every one of its
	// dependencies had SUCCEEDED, or that read a dependency not SUCCEEDED.
	EarlyDependent int
	// CallbackDouble: waits for a callback that accepted more than one.
	CallbackDouble int
	// CallbackLost: callbacks the client was told were accepted, but no
	// write ended that wait.
	CallbackLost int

	ResumedRuns int // runs of parents with their children's outcomes
	// KillsDuringFanIn counts the worker processes killed (or exited)
	// while some parent waited for its children.
	KillsDuringFanIn int
	Cancelled        int // dependents cancelled because a dependency failed
	CallbackWaits    int // suspensions for a callback
	CallbackSent     int // callbacks sent (every copy, both forms)
	CallbackAccept   int // callbacks accepted (applied writes ending a wait as SUCCEEDED)
	CallbackByCli    int // of those, landed by the client (the rest: by a worker, from a message)
	CallbackReject   int // callbacks the client was refused
	CallbackTimeout  int // waits that timed out
	CallbackErrors   int // client calls that ended otherwise (timeouts of the call)
	// ExitAfterFinish counts worker processes that exited right after a
	// write ended a task with waiters, before notifying them; of those,
	// ExitAfterChild ended a child of a parent.
	ExitAfterFinish, ExitAfterChild int
}

// checkWorkflows runs the workflow checks; flag records a violation.
func checkWorkflows(in Input, writesByTask map[string][]Write, flag func(kind, detail string)) WorkflowReport {
	wf := in.Workflows
	var r WorkflowReport
	starts := map[string][]HandlerEvent{}
	for _, e := range in.Handler {
		switch e.Event {
		case "start":
			starts[e.Task] = append(starts[e.Task], e)
		case "exit_after_finish":
			r.ExitAfterFinish++
			if _, isChild := wf.ChildN[e.Task]; isChild {
				r.ExitAfterChild++
			}
		}
	}

	// Fan-out/fan-in: one resume per parent; every resumed run saw every
	// child's outcome.
	type window struct{ from, to time.Time }
	var fanIns []window
	for _, parent := range slices.Sorted(maps.Keys(wf.Fans)) {
		kids := wf.Fans[parent]
		r.Parents++
		r.Children += len(kids)
		var resumes []Write
		suspendFence := int64(-1)
		for _, w := range writesByTask[parent] {
			switch {
			case w.FromWaiting && (w.Status == string(lease.StatusPending) || w.Status == string(lease.StatusRunning)):
				resumes = append(resumes, w)
			case !w.FromWaiting && w.Status == string(lease.StatusWaiting):
				suspendFence = max(suspendFence, w.Fence)
			}
		}
		var suspended time.Time
		for _, w := range writesByTask[parent] {
			if !w.FromWaiting && w.Status == string(lease.StatusWaiting) && (suspended.IsZero() || w.Answered.Before(suspended)) {
				suspended = w.Answered
			}
		}
		if len(resumes) > 0 && !suspended.IsZero() {
			fanIns = append(fanIns, window{suspended, resumes[0].Forwarded})
		}
		if len(resumes) != 1 {
			r.BadResume++
			flag("bad_resume", fmt.Sprintf("%s: resumed %d times: %s", parent, len(resumes), writesText(resumes)))
		}
		for _, e := range starts[parent] {
			switch e.Phase {
			case "spawn":
				if suspendFence >= 0 && e.Fence > suspendFence {
					r.BadResume++
					flag("bad_resume", fmt.Sprintf("%s: run under fence %d (by %s) did not get its children's outcomes, after the suspension under fence %d", parent, e.Fence, e.Worker, suspendFence))
				}
			case "resume":
				r.ResumedRuns++
				if msg := kidsProblem(e.Kids, kids, wf.ChildN, in.Records); msg != "" {
					r.ChildMissed++
					flag("child_missed", fmt.Sprintf("%s: run under fence %d (by %s): %s", parent, e.Fence, e.Worker, msg))
				}
			}
		}
	}

	for _, d := range in.Downs {
		for _, w := range fanIns {
			if d.After(w.from) && d.Before(w.to) {
				r.KillsDuringFanIn++
				break
			}
		}
	}

	// Dependencies: no run before every dependency SUCCEEDED.
	for _, id := range slices.Sorted(maps.Keys(wf.After)) {
		deps := wf.After[id]
		r.Dependents++
		if rec, ok := in.Records[id]; ok && rec.Status == lease.StatusCancelled {
			r.Cancelled++
			if !strings.Contains(rec.Error, "dependency") {
				r.EarlyDependent++ // not a violation of order, but of the reason
				flag("early_dependent", fmt.Sprintf("%s: cancelled without a dependency reason: %q", id, rec.Error))
			}
		}
		for _, e := range starts[id] {
			for _, dep := range deps {
				var done *Write
				for i, w := range writesByTask[dep] {
					if w.Status == string(lease.StatusSucceeded) {
						done = &writesByTask[dep][i]
						break
					}
				}
				switch {
				case done == nil:
					r.EarlyDependent++
					flag("early_dependent", fmt.Sprintf("%s: ran under fence %d (by %s at %s), but its dependency %s never SUCCEEDED", id, e.Fence, e.Worker, stamp(e.At()), dep))
				case e.At().Before(done.Forwarded):
					r.EarlyDependent++
					flag("early_dependent", fmt.Sprintf("%s: started at %s (by %s), before its dependency %s SUCCEEDED (write forwarded %s)", id, stamp(e.At()), e.Worker, dep, stamp(done.Forwarded)))
				}
			}
			if len(e.Deps) != len(deps) {
				r.EarlyDependent++
				flag("early_dependent", fmt.Sprintf("%s: run under fence %d read %d dependencies, want %d: %v", id, e.Fence, len(e.Deps), len(deps), e.Deps))
				continue
			}
			for i, d := range e.Deps {
				if d != deps[i]+" "+string(lease.StatusSucceeded) {
					r.EarlyDependent++
					flag("early_dependent", fmt.Sprintf("%s: run under fence %d read dependency %d as %q", id, e.Fence, i, d))
				}
			}
		}
	}

	// Callbacks: exactly one accepted per wait.
	type wait struct {
		task  string
		fence int64
	}
	clientAccepted := map[wait]int{}
	for _, a := range in.Workflows.Answers {
		r.CallbackSent++
		switch {
		case a.Via != "client":
		case a.Accepted:
			clientAccepted[wait{a.Task, a.Fence}]++
		case a.Rejected:
			r.CallbackReject++
		default:
			r.CallbackErrors++
		}
	}
	for _, id := range slices.Sorted(maps.Keys(wf.Callbacks)) {
		r.CallbackTasks++
		accepted := map[int64][]Write{}
		for _, w := range writesByTask[id] {
			switch {
			case !w.FromWaiting && w.Status == string(lease.StatusWaiting):
				r.CallbackWaits++
			case w.FromWaiting && w.Status == string(lease.StatusSucceeded):
				accepted[w.Fence] = append(accepted[w.Fence], w)
				r.CallbackAccept++
				if w.Worker == ClientName {
					r.CallbackByCli++
				}
			case w.FromWaiting && (w.Status == string(lease.StatusPending) || w.Status == string(lease.StatusFailed)):
				r.CallbackTimeout++
			}
		}
		for _, f := range slices.Sorted(maps.Keys(accepted)) {
			if ws := accepted[f]; len(ws) > 1 {
				r.CallbackDouble++
				flag("callback_double_accept", fmt.Sprintf("%s: the wait under fence %d accepted %d callbacks: %s", id, f, len(ws), writesText(ws)))
			}
		}
		for w, n := range clientAccepted {
			if w.task != id {
				continue
			}
			byClient := 0
			for _, x := range accepted[w.fence] {
				if x.Worker == ClientName {
					byClient++
				}
			}
			if n != byClient {
				r.CallbackLost++
				flag("callback_lost", fmt.Sprintf("%s: the client was told %d callback(s) to the wait under fence %d were accepted; the store applied %d of its", id, n, w.fence, byClient))
			}
		}
	}
	return r
}

// ClientName is the SDK app id of the test's own client, which answers
// callbacks through a proxy without faults so that its writes are recorded.
const ClientName = "chaostest"

// kidsProblem compares what a resumed parent read of its children with their
// final records; "" when it saw every one.
func kidsProblem(seen, kids []string, childN map[string]int, recs map[string]lease.Task) string {
	if len(seen) != len(kids) {
		return fmt.Sprintf("read %d children, spawned %d", len(seen), len(kids))
	}
	for i, s := range seen {
		f := strings.Fields(s)
		if len(f) != 3 || f[0] != kids[i] {
			return fmt.Sprintf("child %d read as %q, want %s", i, s, kids[i])
		}
		rec := recs[kids[i]]
		if f[1] != string(rec.Status) || !rec.Status.Terminal() {
			return fmt.Sprintf("child %s read as %s, its record ends %s", kids[i], f[1], rec.Status)
		}
		if rec.Status == lease.StatusSucceeded && f[2] != strconv.Itoa(childN[kids[i]]) {
			return fmt.Sprintf("child %s read with result n=%s, want %d", kids[i], f[2], childN[kids[i]])
		}
	}
	return ""
}
