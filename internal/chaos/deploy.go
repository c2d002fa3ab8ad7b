package chaos

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
)

// The changes the second version of the kind "deploy" makes, one per task
// (DeployPayload.Change; chaosworker/deploy.go has the code).
const (
	ChangeRename  = "rename"  // step s1 renamed "summary": diverges
	ChangeSleep   = "sleep"   // a sleep inserted before s1: diverges
	ChangeVersion = "version" // a step "audit" under workflow.Version: does not
)

// DeployPayload is the payload of a task of the kind "deploy".
type DeployPayload struct {
	N       int    `json:"n"`
	Change  string `json:"change"`
	WorkMS  int    `json:"work_ms"`
	SleepMS int    `json:"sleep_ms"`
}

// DeployResult is its result: the code version that finished it, the
// version workflow.Version gave it (0 unless it started under v2 with
// the change "version"), and its summary: the run id recorded for its
// summary step.
type DeployResult struct {
	N       int    `json:"n"`
	Code    string `json:"code"`
	Version int    `json:"version"`
	Summary string `json:"summary"`
}

// Deploys describes a run's version switch (docs/chaos.md, "Deploys").
type Deploys struct {
	// Tasks maps each task of the kind "deploy" to the change it meets;
	// Fresh names those sent after the switch to v2 (the others were all
	// asleep under v1 when it happened).
	Tasks map[string]string
	Fresh map[string]bool
	// ToV2 and ToV1 are when the fleet was switched to v2 and back (zero
	// when it was not); Skipped says why the switch did not happen.
	ToV2, ToV1 time.Time
	Skipped    string
}

// DeployReport is what the deploy check found. HeldWrong, Unheld,
// WrongSummary and WrongVersion are violations when non-zero; so is
// Diverged == 0 after a switch.
type DeployReport struct {
	Tasks int
	// Diverged: tasks with a run that met its history's divergence; Held:
	// those with a hold applied (a PENDING write whose error is the
	// divergence); Holds: such writes (one per check of a hold);
	// Resumed: held tasks that then SUCCEEDED under v1.
	Diverged, Held, Holds, Resumed int
	// DivergedRuns: runs that stopped at a divergence; HoldsLost: such
	// runs whose fence saw no later write (the worker died before its
	// hold landed: the task was taken over later).
	DivergedRuns, HoldsLost int
	// HeldWrong: holds whose error does not name the change the task's
	// code made, or holds of a task whose change is guarded by Version.
	HeldWrong int
	// Unheld: diverged runs whose fence ended otherwise than held.
	Unheld int
	// WrongSummary: tasks whose result does not hold the run id recorded
	// for their summary step, or whose recorded steps are not those of
	// one code path; WrongVersion: results whose code or version is not
	// the one the task's history says.
	WrongSummary, WrongVersion int
	// V2Runs: runs under v2 (information).
	V2Runs int
}

// heldPrefix starts the error of a held task (lifecycle's hold).
const heldPrefix = "held: diverged from its history at operation "

// checkDeploys checks the tasks of the kind "deploy" across the switch.
func checkDeploys(in Input, writesByTask map[string][]Write, flag func(kind, detail string)) DeployReport {
	d := in.Workflows.Deploys
	var r DeployReport
	if d == nil {
		return r
	}
	type runKey struct {
		task  string
		fence int64
	}
	divergedAt := map[runKey]time.Time{}
	for _, e := range in.Handler {
		if _, ok := d.Tasks[e.Task]; !ok {
			continue
		}
		switch {
		case e.Event == "start" && e.Phase == "v2":
			r.V2Runs++
		case e.Event == "end" && strings.Contains(e.Cause, "diverged from its history"):
			r.DivergedRuns++
			divergedAt[runKey{e.Task, e.Fence}] = e.At()
		}
	}
	diverged := map[string]bool{}
	for k := range divergedAt {
		diverged[k.task] = true
	}
	for _, id := range slices.Sorted(maps.Keys(d.Tasks)) {
		r.Tasks++
		change := d.Tasks[id]
		held := false
		for _, w := range writesByTask[id] {
			// (The claim that checks a held task again keeps its error
			// until the run ends: only a PENDING write is a hold.)
			if !isHold(w) {
				continue
			}
			r.Holds++
			held = true
			if !strings.Contains(w.Error, heldReason(change)) {
				r.HeldWrong++
				flag("held_wrong", fmt.Sprintf("%s (change %s): held under fence %d with %q, want %q", id, change, w.Fence, w.Error, heldReason(change)))
			}
		}
		if held || diverged[id] {
			r.Diverged++
		}
		if held {
			r.Held++
		}
		rec, ok := in.Records[id]
		if !ok || rec.Status != lease.StatusSucceeded {
			continue // stuck or wrong_end
		}
		var res DeployResult
		if json.Unmarshal(rec.Result, &res) != nil {
			r.WrongSummary++
			flag("wrong_summary", fmt.Sprintf("%s: result %s does not decode", id, rec.Result))
			continue
		}
		if held && res.Code == "v1" {
			r.Resumed++
		}
		if p := deployProblem(id, change, d.Fresh[id], held || diverged[id], rec, res); p != "" {
			kind := "wrong_version"
			if strings.HasPrefix(p, "summary") || strings.HasPrefix(p, "steps") {
				kind = "wrong_summary"
				r.WrongSummary++
			} else {
				r.WrongVersion++
			}
			flag(kind, id+": "+p)
		}
	}
	// A diverged run ends held: its fence's next write that is not a
	// renewal is the hold, or there is none (the worker died first).
	for _, k := range slices.SortedFunc(maps.Keys(divergedAt), func(a, b runKey) int { return strings.Compare(a.task+fmt.Sprint(a.fence), b.task+fmt.Sprint(b.fence)) }) {
		var next *Write
		for i, w := range writesByTask[k.task] {
			if w.Fence == k.fence && w.Status != string(lease.StatusRunning) && w.Forwarded.After(divergedAt[k]) && (next == nil || w.Forwarded.Before(next.Forwarded)) {
				next = &writesByTask[k.task][i]
			}
		}
		switch {
		case next == nil:
			r.HoldsLost++
		case !isHold(*next):
			r.Unheld++
			flag("unheld", fmt.Sprintf("%s: the run of fence %d diverged, and its fence's next write left it %s with %q", k.task, k.fence, next.Status, next.Error))
		}
	}
	if !d.ToV2.IsZero() && r.Diverged == 0 {
		flag("diverged", "the workers switched to v2 while the deploy tasks slept, but no task diverged: the deploy check saw nothing")
	}
	if d.Skipped != "" {
		flag("deploy_skipped", d.Skipped)
	}
	return r
}

// isHold reports whether w held its task: PENDING, with a divergence as
// its error.
func isHold(w Write) bool {
	return w.Status == string(lease.StatusPending) && strings.HasPrefix(w.Error, heldPrefix)
}

// heldReason is what a hold's error must say for a task whose v2 code
// made change: the operation recorded and the one v2 asked for instead.
func heldReason(change string) string {
	switch change {
	case ChangeRename:
		return `at operation 2: recorded step main.StepResult "s1", the code asked for step main.StepResult "summary"`
	case ChangeSleep:
		return `at operation 2: recorded step main.StepResult "s1", the code asked for "sleep#1" (sleep)`
	}
	return "(no hold: the change is guarded by workflow.Version)"
}

// deployProblem says what is wrong with a SUCCEEDED deploy task's result
// and recorded steps, or "".
func deployProblem(id, change string, fresh, diverged bool, rec lease.Task, res DeployResult) string {
	var names []string
	runs := map[string]string{}
	for _, st := range rec.Steps {
		names = append(names, st.Name)
		var sr struct {
			Run string `json:"run"`
		}
		if json.Unmarshal(st.Result, &sr) == nil {
			runs[st.Name] = sr.Run
		}
	}
	want := []string{"s0", "s1", "sleep#1", "s2"}
	wantVersion := 0
	if fresh {
		want, wantVersion = []string{"s0", "version:audit", "audit", "s1", "sleep#1", "s2"}, 1
	}
	switch {
	case !slices.Equal(names, want):
		return fmt.Sprintf("steps %v recorded, want %v", names, want)
	case res.Summary == "" || res.Summary != runs["s1"]:
		return fmt.Sprintf("summary %q, but step s1 recorded run %q", res.Summary, runs["s1"])
	case res.N != nOfDeploy(id):
		return fmt.Sprintf("summary n %d, want %d", res.N, nOfDeploy(id))
	case res.Version != wantVersion:
		return fmt.Sprintf("version %d (code %s), want %d", res.Version, res.Code, wantVersion)
	case fresh && res.Code != "v2":
		return fmt.Sprintf("started under v2, finished by %s", res.Code)
	case diverged && change != ChangeVersion && res.Code != "v1":
		return fmt.Sprintf("diverged under v2, finished by %s", res.Code)
	}
	return ""
}

// nOfDeploy is the n a deploy task's id carries ("d007" has 7).
func nOfDeploy(id string) int {
	var n int
	_, _ = fmt.Sscanf(id, "d%d", &n)
	return n
}
