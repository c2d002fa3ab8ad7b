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

// Workflows describes the workflow tasks a run sent (docs/chaos.md,
// "Workflows"), for the checks.
type Workflows struct {
	// Fans maps each parent to its children's ids, in spawn order, and
	// ChildN each child to the n its payload carries (its result's n).
	Fans   map[string][]string
	ChildN map[string]int
	// After maps each task with dependencies to them (a chain's link known
	// at enqueue, to its predecessor); AfterAny names those that run once
	// every dependency has ended, whatever its outcome.
	After    map[string][]string
	AfterAny map[string]bool
	// Callbacks names the tasks that wait for a callback ("cb":
	// workflow.WaitForCallback named "approval").
	Callbacks map[string]bool
	// Answers are the callbacks the test sent.
	Answers []CallbackAnswer
	// Steps maps each task written as workflow.Step calls to its number
	// of steps.
	Steps map[string]int
	// Sleeps maps the step tasks that sleep (workflow.Sleep) to the step
	// after which they do.
	Sleeps map[string]int
	// Cancels are the cancels of parents (Fans) the test made.
	Cancels []CancelCall
	// Maps are the workflow.Map parents ("mapper"), by id.
	Maps map[string]MapPlan
	// Orders maps each task with several awaits in one handler ("order":
	// steps s0-s2 in Steps, its sleep in Sleeps) to the children it awaits
	// with workflow.All, in spawn order (their n in ChildN).
	Orders map[string][]string
	// Deploys is the version switch and the tasks it met (deploy.go);
	// nil when the run made none.
	Deploys *Deploys
	// Branches names the "branches" tasks (workflow.Parallel); Races maps
	// each "racer" (a callback raced against a timer) to how the test
	// answers it; Inboxes maps each "inbox" to the topics of its
	// receives, in order, and Sends are the messages the test sent them
	// (opscheck.go).
	Branches map[string]bool
	Races    map[string]RacePlan
	Inboxes  map[string][]string
	Sends    []MessageSend
}

// CancelCall is one Client.Cancel of a parent by the test (the last try,
// when it was retried after an error).
type CancelCall struct {
	Task string
	// Sent and Returned bracket the call; Status is the status it
	// returned (CANCELLED for a parent cancelled while it waited, RUNNING
	// for one only marked), Err its error.
	Sent, Returned time.Time
	Status         string
	Err            string
	// Finished: Err matches leasehold.ErrFinished (the parent had ended).
	Finished bool
}

// cancelledParents returns the cancel call of each parent that ended
// CANCELLED by a cancel of the test that returned without an error.
func (wf *Workflows) cancelledParents(recs map[string]lease.Task) map[string]CancelCall {
	out := map[string]CancelCall{}
	if wf == nil {
		return out
	}
	for _, c := range wf.Cancels {
		if rec, ok := recs[c.Task]; ok && c.Err == "" && rec.Status == lease.StatusCancelled {
			out[c.Task] = c
		}
	}
	return out
}

// freeEnds names the tasks whose end the cancel check judges rather than
// Expect: the children of a cancelled parent (any end, or no record when
// they were never created), and the parents whose cancel did not find them
// waiting (it only marked a running parent, which may finish first).
func (wf *Workflows) freeEnds(recs map[string]lease.Task) map[string]bool {
	out := map[string]bool{}
	if wf == nil {
		return out
	}
	for parent := range wf.cancelledParents(recs) {
		for _, kid := range wf.Fans[parent] {
			out[kid] = true
		}
	}
	for _, c := range wf.Cancels {
		if c.Status != string(lease.StatusCancelled) {
			out[c.Task] = true
		}
	}
	return out
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
// EarlyDependent, CallbackDouble, CallbackNoToken and CallbackLost are
// violations when non-zero; the rest is information.
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
	// CallbackNoToken: answers accepted for a wait whose attempt wrote no
	// callback line (handed out no token).
	CallbackNoToken int
	// CallbackLost: callbacks the client was told were accepted, but no
	// write ended that wait.
	CallbackLost int
	// ChildAfterCancel: children of a cancelled parent that started a
	// handler run under a fence claimed after the cancel returned, or that
	// ended other than CANCELLED under such a fence. CancelFailed: cancels
	// that returned an error other than "already finished".
	ChildAfterCancel, CancelFailed int
	// StepTwice: tasks whose steps list names a step more than once.
	// StepRerun: runs of a step's function that started after a write
	// recording that step had certainly been applied. StepUnrun: recorded
	// steps whose result no completed run of the function made, and
	// succeeded step tasks missing a step.
	StepTwice, StepRerun, StepUnrun int
	// EarlyWake: step tasks whose step after a sleep ran before the
	// sleep's recorded wake-up. Slept: sleeping step tasks that
	// SUCCEEDED, every step after the sleep run after its wake-up.
	EarlyWake, Slept int

	ResumedRuns int // runs of parents with their children's outcomes
	// KillsDuringFanIn counts the worker processes killed (or exited)
	// while some parent waited for its children.
	KillsDuringFanIn int
	Cancelled        int // dependents cancelled because a dependency failed
	CallbackWaits    int // suspensions for a callback
	CallbackSent     int // callbacks sent (every copy, both forms)
	CallbackAccept   int // callbacks accepted (applied writes recording the answer, out of WAITING)
	CallbackByCli    int // of those, landed by the client (the rest: by a worker, from a message)
	CallbackReject   int // callbacks the client was refused
	CallbackTimeout  int // waits that timed out
	CallbackErrors   int // client calls that ended otherwise (timeouts of the call)
	// ExitAfterFinish counts worker processes that exited right after a
	// write ended a task with waiters, before notifying them; of those,
	// ExitAfterChild ended a child of a parent. ExitBesideStale counts those
	// exits beside an older holder of the task (its lease taken over while
	// it was frozen or cut off) whose handler returned after the exit: the
	// stale holder's end then finds the task ended by the exited worker,
	// and must tell the task's waiters before it acknowledges its message.
	ExitAfterFinish, ExitAfterChild, ExitBesideStale int

	// Cancels of parents: calls made, parents that ended CANCELLED by
	// them, calls that found the parent finished; of the cancelled
	// parents' children: ended CANCELLED, never created (no record), ended
	// otherwise from a run claimed before the cancel returned.
	CancelCalls, CancelledParents, CancelLate     int
	KidsCancelled, KidsNeverCreated, KidsRanFirst int
	// Step tasks; runs of step functions (started), transient failures of
	// them, and runs beyond the first completed one of a step (their
	// checkpoint did not land: a lost lease).
	StepTasks, StepRuns, StepFailures, StepRedone int
	// Map: the sliding maps (mapcheck.go).
	Map MapReport
	// Orders: tasks with several awaits in one handler; OrdersDone: of
	// those, SUCCEEDED with their children's outcomes and the callback's
	// answer each recorded once. OrderResumes: their runs with their
	// children's outcomes (a "packed" line).
	Orders, OrdersDone, OrderResumes int
	// StepCheckpoints: writes that recorded a step (its item holds more
	// steps than the write before); StepLostAnswers: of those, the ones
	// whose answer the proxy dropped (the case that can record a step
	// twice).
	StepCheckpoints, StepLostAnswers int
	// Deploy: the version switch (checkDeploys).
	Deploy DeployReport
	// Ops: the branches, races and messages (checkOps).
	Ops OpsReport
}

// checkWorkflows runs the workflow checks; flag records a violation.
func checkWorkflows(in Input, writesByTask map[string][]Write, flag func(kind, detail string)) WorkflowReport {
	wf := in.Workflows
	var r WorkflowReport
	starts := map[string][]HandlerEvent{}
	handlerEnds := map[string][]HandlerEvent{}
	var exits []HandlerEvent
	for _, e := range in.Handler {
		switch e.Event {
		case "start":
			starts[e.Task] = append(starts[e.Task], e)
		case "end":
			handlerEnds[e.Task] = append(handlerEnds[e.Task], e)
		case "exit_after_finish":
			exits = append(exits, e)
			r.ExitAfterFinish++
			if _, isChild := wf.ChildN[e.Task]; isChild {
				r.ExitAfterChild++
			}
		}
	}
	for _, x := range exits {
		for _, e := range handlerEnds[x.Task] {
			if e.Fence < x.Fence && e.At().After(x.At()) {
				r.ExitBesideStale++
				break
			}
		}
	}

	// Fan-out/fan-in: one resume per parent; every resumed run saw every
	// child's outcome.
	cancelled := wf.cancelledParents(in.Records)
	// firstEnd is the first applied write that ended a task.
	firstEnd := func(id string) *Write {
		for i, w := range writesByTask[id] {
			if lease.Status(w.Status).Terminal() {
				return &writesByTask[id][i]
			}
		}
		return nil
	}
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
		_, wasCancelled := cancelled[parent]
		switch {
		case wasCancelled && len(resumes) <= 1:
			// Cancelled while it waited (no resume), or marked after its
			// resume.
		case len(resumes) != 1:
			r.BadResume++
			flag("bad_resume", fmt.Sprintf("%s: resumed %d times: %s", parent, len(resumes), writesText(resumes)))
		}
		if len(resumes) > 0 {
			for _, kid := range kids {
				// (A child whose ending write was not observed is judged
				// by child_missed, from what the resumed run read.)
				if end := firstEnd(kid); end != nil && resumes[0].Answered.Before(end.Forwarded) {
					r.BadResume++
					flag("bad_resume", fmt.Sprintf("%s: resumed by a write answered at %s, before its child %s ended (write forwarded at %s)",
						parent, stamp(resumes[0].Answered), kid, stamp(end.Forwarded)))
				}
			}
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
		anyEnd := wf.AfterAny[id]
		r.Dependents++
		if rec, ok := in.Records[id]; ok && rec.Status == lease.StatusCancelled && !anyEnd {
			r.Cancelled++
			if !strings.Contains(rec.Error, "dependency") && !strings.HasPrefix(rec.Error, "chain: ") {
				r.EarlyDependent++ // not a violation of order, but of the reason
				flag("early_dependent", fmt.Sprintf("%s: cancelled without a dependency reason: %q", id, rec.Error))
			}
		}
		for _, e := range starts[id] {
			for _, dep := range deps {
				// The write that let it run: the dependency's success,
				// or with after-any its end, whatever it was.
				want := "SUCCEEDED"
				var done *Write
				if anyEnd {
					want, done = "ended", firstEnd(dep)
				} else {
					for i, w := range writesByTask[dep] {
						if w.Status == string(lease.StatusSucceeded) {
							done = &writesByTask[dep][i]
							break
						}
					}
				}
				switch {
				case done == nil:
					r.EarlyDependent++
					flag("early_dependent", fmt.Sprintf("%s: ran under fence %d (by %s at %s), but its dependency %s never %s", id, e.Fence, e.Worker, stamp(e.At()), dep, want))
				case e.At().Before(done.Forwarded):
					r.EarlyDependent++
					flag("early_dependent", fmt.Sprintf("%s: started at %s (by %s), before its dependency %s %s (write forwarded %s)", id, stamp(e.At()), e.Worker, dep, want, stamp(done.Forwarded)))
				}
			}
			if len(e.Deps) != len(deps) {
				r.EarlyDependent++
				flag("early_dependent", fmt.Sprintf("%s: run under fence %d read %d dependencies, want %d: %v", id, e.Fence, len(e.Deps), len(deps), e.Deps))
				continue
			}
			for i, d := range e.Deps {
				want := lease.StatusSucceeded
				if anyEnd {
					want = in.Records[deps[i]].Status // its end, read as it is
				}
				if d != deps[i]+" "+string(want) || !want.Terminal() {
					r.EarlyDependent++
					flag("early_dependent", fmt.Sprintf("%s: run under fence %d read dependency %d as %q", id, e.Fence, i, d))
				}
			}
		}
	}

	// Callbacks: exactly one accepted per wait.
	type wait = callbackWait
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
	handedOut := map[wait]bool{}
	for _, e := range in.Handler {
		if e.Event == "callback" {
			handedOut[wait{e.Task, e.Fence}] = true
		}
	}
	for _, id := range slices.Sorted(maps.Keys(wf.Callbacks)) {
		r.CallbackTasks++
		// A "cb" task waits with workflow.WaitForCallback("approval"):
		// an answer is the write out of WAITING that records the step
		// callback:approval (the task PENDING, to run again and read it);
		// any other write out of WAITING is the timeout.
		accepted := map[int64][]Write{}
		for _, w := range writesByTask[id] {
			switch {
			case !w.FromWaiting && w.Status == string(lease.StatusWaiting):
				r.CallbackWaits++
			case w.FromWaiting && w.Status == string(lease.StatusPending) && slices.Contains(w.Steps, "callback:approval"):
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
			if !handedOut[wait{id, f}] {
				r.CallbackNoToken++
				flag("callback_without_token", fmt.Sprintf("%s: the wait under fence %d accepted an answer, but no run of that fence handed out a token", id, f))
			}
			if ws := accepted[f]; len(ws) > 1 {
				r.CallbackDouble++
				flag("callback_double_accept", fmt.Sprintf("%s: the wait under fence %d accepted %d callbacks: %s", id, f, len(ws), writesText(ws)))
			}
		}
		var all []Write
		for _, ws := range accepted {
			all = append(all, ws...)
		}
		checkClientAnswers(id, all, clientAccepted, &r, flag)
	}

	checkCancels(in, writesByTask, starts, &r, flag)
	checkSteps(in, writesByTask, &r, flag)
	checkOrders(in, writesByTask, clientAccepted, &r, flag)
	r.Map = checkMaps(in, writesByTask, flag)
	r.Deploy = checkDeploys(in, writesByTask, flag)
	r.Ops = checkOps(in, writesByTask, clientAccepted, &r, flag)
	return r
}

// checkOrders: a task with several awaits in one handler resumed from its
// children's wait once, every run after the fan-in saw every child's final
// outcome, the callback's answer was recorded by exactly one write (and by
// the client's whenever the client was told it was accepted), and a
// SUCCEEDED order holds each await's step once.
func checkOrders(in Input, writesByTask map[string][]Write, clientAccepted map[callbackWait]int, r *WorkflowReport, flag func(kind, detail string)) {
	wf := in.Workflows
	for _, e := range in.Handler {
		if e.Event != "packed" {
			continue
		}
		kids, ok := wf.Orders[e.Task]
		if !ok {
			continue
		}
		r.OrderResumes++
		if msg := kidsProblem(e.Kids, kids, wf.ChildN, in.Records); msg != "" {
			r.ChildMissed++
			flag("child_missed", fmt.Sprintf("%s: run under fence %d (by %s): %s", e.Task, e.Fence, e.Worker, msg))
		}
	}
	for _, id := range slices.Sorted(maps.Keys(wf.Orders)) {
		r.Orders++
		var resumes, answers []Write
		for _, w := range writesByTask[id] {
			switch {
			case w.FromWaiting && w.Status == string(lease.StatusRunning):
				resumes = append(resumes, w)
			case w.FromWaiting && w.Status == string(lease.StatusPending) && slices.Contains(w.Steps, "callback:approval"):
				answers = append(answers, w)
			}
		}
		rec, ok := in.Records[id]
		if !ok || rec.Status != lease.StatusSucceeded {
			continue // judged as any task: stuck, or its expected end
		}
		if len(resumes) != 1 {
			r.BadResume++
			flag("bad_resume", fmt.Sprintf("%s: resumed from its children's wait %d times: %s", id, len(resumes), writesText(resumes)))
		}
		if len(answers) != 1 {
			r.CallbackDouble++
			flag("callback_double_accept", fmt.Sprintf("%s: %d writes recorded the callback's answer: %s", id, len(answers), writesText(answers)))
		}
		checkClientAnswers(id, answers, clientAccepted, r, flag)
		count := map[string]int{}
		for _, st := range rec.Steps {
			count[st.Name]++
		}
		if count["children:pack"] != 1 || count["callback:approval"] != 1 {
			r.StepUnrun++
			flag("step_unrun", fmt.Sprintf("%s: SUCCEEDED with children:pack recorded %d times and callback:approval %d times, want once each", id, count["children:pack"], count["callback:approval"]))
		} else {
			r.OrdersDone++
		}
	}
}

// checkCancels: no child of a cancelled parent starts a handler run after
// the cancel returned, and every such child ends CANCELLED, was never
// created, or ended from a run that began before the cancel returned (one
// that ended before the cancel, or finished before its worker saw the
// cancel at its next renewal). A run "began after the cancel" when the
// write that claimed its fence was forwarded after the cancel call
// returned: the store let it start although its parent had ended.
func checkCancels(in Input, writesByTask map[string][]Write, starts map[string][]HandlerEvent, r *WorkflowReport, flag func(kind, detail string)) {
	wf := in.Workflows
	// claimOf is the first applied write that left id RUNNING under fence.
	claimOf := func(id string, fence int64) *Write {
		for i, w := range writesByTask[id] {
			if w.Fence == fence && w.Status == string(lease.StatusRunning) {
				return &writesByTask[id][i]
			}
		}
		return nil
	}
	cancelled := wf.cancelledParents(in.Records)
	for _, c := range wf.Cancels {
		r.CancelCalls++
		switch {
		case c.Finished:
			r.CancelLate++
		case c.Err != "":
			r.CancelFailed++
			flag("cancel_failed", fmt.Sprintf("%s: cancel sent at %s returned %s", c.Task, stamp(c.Sent), c.Err))
		}
	}
	for _, parent := range slices.Sorted(maps.Keys(cancelled)) {
		c := cancelled[parent]
		r.CancelledParents++
		for _, kid := range wf.Fans[parent] {
			var problems []string
			for _, e := range starts[kid] {
				cl := claimOf(kid, e.Fence)
				switch {
				case cl != nil && cl.Forwarded.After(c.Returned):
					problems = append(problems, fmt.Sprintf("started a run under fence %d (by %s at %s), claimed by a write forwarded at %s",
						e.Fence, e.Worker, stamp(e.At()), stamp(cl.Forwarded)))
				case cl == nil && e.At().After(c.Returned):
					problems = append(problems, fmt.Sprintf("started a run under fence %d (by %s at %s; its claim was not observed)", e.Fence, e.Worker, stamp(e.At())))
				}
			}
			rec, ok := in.Records[kid]
			switch {
			case !ok:
				if len(starts[kid]) == 0 {
					r.KidsNeverCreated++
				}
			case rec.Status == lease.StatusCancelled:
				r.KidsCancelled++
			case rec.Status.Terminal():
				if cl := claimOf(kid, rec.Fence); cl == nil || cl.Forwarded.After(c.Returned) {
					problems = append(problems, fmt.Sprintf("ended %s under fence %d, not claimed before the cancel returned", rec.Status, rec.Fence))
				} else {
					r.KidsRanFirst++
				}
			}
			if len(problems) > 0 {
				r.ChildAfterCancel++
				flag("child_after_cancel", fmt.Sprintf("%s: its parent %s was cancelled by a call sent at %s, returned at %s (%s), yet it %s; its writes: %s",
					kid, parent, stamp(c.Sent), stamp(c.Returned), c.Status, strings.Join(problems, "; "), writesText(writesByTask[kid])))
			}
		}
	}
}

// checkSteps: no step is recorded twice in a task's item, no step's function
// runs once its result is recorded, and every recorded result comes from a
// completed run of the function.
func checkSteps(in Input, writesByTask map[string][]Write, r *WorkflowReport, flag func(kind, detail string)) {
	wf := in.Workflows
	ev := collectSteps(in.Handler, "step", func(string) bool { return true })
	runs, done := ev.runs, ev.done
	r.StepRuns += ev.nRuns
	r.StepFailures += ev.nFails
	for _, id := range slices.Sorted(maps.Keys(wf.Steps)) {
		r.StepTasks++
		rec, ok := in.Records[id]
		if !ok {
			continue // stuck
		}
		seen := map[string]int{}
		var twice []string
		wake := time.Time{} // the sleep's recorded wake-up
		for _, st := range rec.Steps {
			if strings.HasPrefix(st.Name, "children:") || strings.HasPrefix(st.Name, "callback:") {
				continue // an await's outcome (checkOrders)
			}
			if strings.HasPrefix(st.Name, "version:") {
				continue // a workflow.Version's choice (checkDeploys)
			}
			if strings.HasPrefix(st.Name, "sleep#") {
				ms, err := strconv.ParseInt(string(st.Result), 10, 64)
				if err != nil || !wake.IsZero() {
					r.StepUnrun++
					flag("step_unrun", fmt.Sprintf("%s: sleep step %s=%s: want one, holding a time", id, st.Name, st.Result))
				}
				wake = time.UnixMilli(ms)
				continue
			}
			seen[st.Name]++
			if seen[st.Name] == 2 {
				twice = append(twice, st.Name)
			}
			var res struct {
				Run   string `json:"run"`
				Fence int64  `json:"fence"`
			}
			if json.Unmarshal(st.Result, &res) != nil || !done[stepKey{id, st.Name}][res.Run] {
				r.StepUnrun++
				flag("step_unrun", fmt.Sprintf("%s: step %s recorded with result %s, which no completed run of its function returned", id, st.Name, st.Result))
			}
		}
		if len(twice) > 0 {
			r.StepTwice++
			names := make([]string, len(rec.Steps))
			for i, st := range rec.Steps {
				names[i] = st.Name + "=" + string(st.Result)
			}
			flag("step_twice", fmt.Sprintf("%s: steps %v recorded more than once: %v", id, twice, names))
		}
		if rec.Status == lease.StatusSucceeded && len(seen) != wf.Steps[id] {
			r.StepUnrun++
			flag("step_unrun", fmt.Sprintf("%s: SUCCEEDED with %d distinct steps recorded, want %d", id, len(seen), wf.Steps[id]))
		}
		if after, sleeps := wf.Sleeps[id]; sleeps && rec.Status == lease.StatusSucceeded {
			early := false
			for i := after + 1; i < wf.Steps[id]; i++ {
				for _, e := range runs[stepKey{id, fmt.Sprintf("s%d", i)}] {
					if wake.IsZero() || e.At().Before(wake) {
						early = true
						flag("early_wake", fmt.Sprintf("%s: step s%d ran at %s, before the sleep's wake-up %s", id, i, stamp(e.At()), stamp(wake)))
					}
				}
			}
			if early {
				r.EarlyWake++
			} else {
				r.Slept++
			}
		}
		// When each step was certainly recorded: the first write whose
		// item holds it was answered.
		recorded := map[string]time.Time{}
		byAnswer := slices.Clone(writesByTask[id])
		slices.SortStableFunc(byAnswer, func(a, b Write) int { return a.Answered.Compare(b.Answered) })
		had := 0
		for _, w := range byAnswer {
			if len(w.Steps) > had {
				r.StepCheckpoints++
				if w.Dropped {
					r.StepLostAnswers++
				}
			}
			had = len(w.Steps)
		}
		for _, w := range writesByTask[id] {
			for _, name := range w.Steps {
				if t, ok := recorded[name]; !ok || w.Answered.Before(t) {
					recorded[name] = w.Answered
				}
			}
		}
		for _, name := range slices.Sorted(maps.Keys(seen)) {
			k := stepKey{id, name}
			if n := len(done[k]); n > 1 {
				r.StepRedone += n - 1
			}
			t, ok := recorded[name]
			if !ok {
				continue
			}
			for _, e := range runs[k] {
				if e.At().After(t) {
					r.StepRerun++
					flag("step_rerun", fmt.Sprintf("%s: step %s's function ran again under fence %d (by %s at %s), after a write recording it was answered at %s",
						id, name, e.Fence, e.Worker, stamp(e.At()), stamp(t)))
				}
			}
		}
	}
}

// checkClientAnswers: for every wait of task id the client was told
// accepted n callbacks, the store applied n of the client's writes among
// answers (the writes that ended a wait of id with an answer).
func checkClientAnswers(id string, answers []Write, clientAccepted map[callbackWait]int, r *WorkflowReport, flag func(kind, detail string)) {
	for w, n := range clientAccepted {
		if w.task != id {
			continue
		}
		byClient := 0
		for _, a := range answers {
			if a.Worker == ClientName && a.Fence == w.fence {
				byClient++
			}
		}
		if n != byClient {
			r.CallbackLost++
			flag("callback_lost", fmt.Sprintf("%s: the client was told %d callback(s) to the wait under fence %d were accepted; the store applied %d of its", id, n, w.fence, byClient))
		}
	}
}

// callbackWait names one wait for a callback: its task and the fence of
// its attempt.
type callbackWait struct {
	task  string
	fence int64
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

// stepKey names a step body of a task in the handlers' evidence.
type stepKey struct{ task, step string }

// stepEvents is the handlers' evidence of step bodies, by task and step.
type stepEvents struct {
	runs          map[stepKey][]HandlerEvent  // each start of a body
	done          map[stepKey]map[string]bool // run ids that returned a result
	nRuns, nFails int
}

// collectSteps gathers the evidence lines of kind event (run, done, fail)
// of the tasks that keep accepts.
func collectSteps(handler []HandlerEvent, event string, keep func(task string) bool) stepEvents {
	ev := stepEvents{runs: map[stepKey][]HandlerEvent{}, done: map[stepKey]map[string]bool{}}
	for _, e := range handler {
		if e.Event != event || !keep(e.Task) {
			continue
		}
		k := stepKey{e.Task, e.Step}
		switch e.Phase {
		case "run":
			ev.nRuns++
			ev.runs[k] = append(ev.runs[k], e)
		case "done":
			if ev.done[k] == nil {
				ev.done[k] = map[string]bool{}
			}
			ev.done[k][e.Run] = true
		case "fail":
			ev.nFails++
		}
	}
	return ev
}
