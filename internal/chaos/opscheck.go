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

// The branches, races and messages of a run (docs/chaos.md, "Branches,
// races and messages"): the chaosworker's kinds "branches" (three
// branches of two steps under workflow.Parallel "legs"), "racer" (a
// callback raced against a timer, workflow.Race "decision") and "inbox"
// (workflow.Receive, each message recorded by a step "got-i").

// BranchNames are a "branches" task's branches, and BranchSteps each
// branch's steps.
var (
	BranchNames = []string{"a", "b", "c"}
	BranchSteps = []string{"s0", "s1"}
)

// BranchResult is a "branches" task's result: the run id each branch's
// step returned to its branch, by "BRANCH/STEP".
type BranchResult struct {
	Runs map[string]string `json:"runs"`
}

// branchOp is the name under which a branch's step is recorded: the
// parallel's space, then the branch's.
func branchOp(b, step string) string { return "@legs/@" + b + "/" + step }

// RaceWinner names the future of index i of a racer's Race: its callback
// (0) or its timer (1).
func RaceWinner(i int) string {
	if i == 0 {
		return "callback"
	}
	return "timer"
}

// InboxMessage is the payload of every message the test sends an inbox:
// its id, its topic and its place among the topic's messages to that
// task (from 0), in the order the test sent them.
type InboxMessage struct {
	ID    string `json:"id"`
	Topic string `json:"topic"`
	K     int    `json:"k"`
}

// InboxResult is an "inbox" task's result: the ids of the messages it
// received, in order.
type InboxResult struct {
	IDs []string `json:"ids"`
}

// RacePlan is how the test answers a racer's callback: Answer "early" (as
// soon as the token is handed out), "late" (after the timer's deadline),
// or "never".
type RacePlan struct {
	Answer  string
	TimerMS int
}

// MessageSend is one message the test sent to an inbox.
type MessageSend struct {
	Task, Topic, ID string
	K               int
	// Via: "send" (Client.Send), "once" (Client.SendOnce) or "sqs" (the
	// message form on the work queue); Copy counts the copies of one id
	// (from 0: a copy is a sender's retry).
	Via  string
	Copy int
	// Seq is the number the client said the message took in its topic;
	// Err the error of the call (or of SQS's send), "" when none.
	Seq int64
	Err string
}

// OpsReport is what the checks of branches, races and messages found.
// BranchTwice, BranchRerun, BranchUnrun, RaceTwice, RaceChanged,
// RaceLateAccepted, MsgTwice, MsgLost, MsgOrder, MsgUnsent and
// MsgSeqChanged are violations when non-zero; the rest is information.
type OpsReport struct {
	// BranchTasks and BranchDone: "branches" tasks, and those that
	// SUCCEEDED with every branch step recorded once.
	BranchTasks, BranchDone int
	// BranchTwice: tasks whose history records a branch step more than
	// once, or whose result carries another result of a step than the
	// one recorded. BranchRerun: runs of a branch step's function that
	// started after a write recording it had certainly been applied.
	// BranchUnrun: recorded branch steps whose result no completed run
	// made, and succeeded tasks missing one.
	BranchTwice, BranchRerun, BranchUnrun int
	// BranchRuns: runs of branch steps' functions; BranchRedone: runs
	// beyond the first completed one of a step (its attempt died before
	// recording it); BranchFailures: planned transient failures.
	BranchRuns, BranchRedone, BranchFailures int

	// RaceTasks; RaceByCallback and RaceByTimer: races decided by each.
	RaceTasks, RaceByCallback, RaceByTimer int
	// RaceTwice: races whose outcome is recorded more than once.
	// RaceChanged: runs after the outcome was certainly recorded that saw
	// another winner, and results that name another. RaceLateAccepted:
	// answers the client was told were accepted for a race the timer won.
	RaceTwice, RaceChanged, RaceLateAccepted int
	// RaceRuns: runs that got the race's outcome; RaceLateRejected:
	// answers to a race the timer won that the client was refused, as it
	// must be.
	RaceRuns, RaceLateRejected int

	// InboxTasks; MsgSent: distinct message ids sent; MsgReceived: of
	// those, received; MsgDupSends: copies of an id sent again; MsgViaSQS:
	// ids sent as the message form; MsgRedone: runs of a "got-i" step's
	// function beyond the first.
	InboxTasks, MsgSent, MsgReceived, MsgDupSends, MsgViaSQS, MsgRedone int
	// MsgTwice: messages received more than once (two steps, or a result
	// that disagrees with the history). MsgLost: messages sent to an
	// inbox that SUCCEEDED and never received. MsgOrder: topics of a task
	// whose messages were received, or numbered, out of the order the
	// client sent them. MsgUnsent: messages received that the test never
	// sent. MsgSeqChanged: copies of a SendOnce given another number than
	// the first.
	MsgTwice, MsgLost, MsgOrder, MsgUnsent, MsgSeqChanged int
}

// recordedAt maps each step name of ws (one task's writes) to when a
// write recording it was certainly applied: the earliest answer of a
// write whose item held it.
func recordedAt(ws []Write) map[string]time.Time {
	out := map[string]time.Time{}
	for _, w := range ws {
		for _, name := range w.Steps {
			if t, ok := out[name]; !ok || w.Answered.Before(t) {
				out[name] = w.Answered
			}
		}
	}
	return out
}

// checkOps runs the checks of branches, races and messages.
func checkOps(in Input, writesByTask map[string][]Write, clientAccepted map[callbackWait]int, r *WorkflowReport, flag func(kind, detail string)) OpsReport {
	var o OpsReport
	checkBranches(in, writesByTask, &o, flag)
	checkRaces(in, writesByTask, clientAccepted, r, &o, flag)
	checkInboxes(in, &o, flag)
	return o
}

// checkBranches: every branch step of a "branches" task is recorded once,
// by a completed run of its function, no function runs once its step is
// certainly recorded, the result carries what was recorded, and a task
// that SUCCEEDED holds all of them.
func checkBranches(in Input, writesByTask map[string][]Write, o *OpsReport, flag func(kind, detail string)) {
	wf := in.Workflows
	// Steps are named "b/s0": branch, then step.
	ev := collectSteps(in.Handler, "bstep", func(task string) bool { return wf.Branches[task] })
	runs, done := ev.runs, ev.done
	o.BranchRuns += ev.nRuns
	o.BranchFailures += ev.nFails
	for _, id := range slices.Sorted(maps.Keys(wf.Branches)) {
		o.BranchTasks++
		rec, ok := in.Records[id]
		if !ok {
			continue // stuck
		}
		recorded := map[string][]string{} // "b/s0" -> the run ids recorded
		for _, st := range rec.Steps {
			for _, b := range BranchNames {
				for _, s := range BranchSteps {
					if st.Name != branchOp(b, s) {
						continue
					}
					var res struct {
						Run string `json:"run"`
					}
					_ = json.Unmarshal(st.Result, &res)
					recorded[b+"/"+s] = append(recorded[b+"/"+s], res.Run)
				}
			}
		}
		var result BranchResult
		if rec.Status == lease.StatusSucceeded {
			_ = json.Unmarshal(rec.Result, &result)
		}
		at := recordedAt(writesByTask[id])
		twice, unrun := false, false
		for _, b := range BranchNames {
			for _, s := range BranchSteps {
				name, k := b+"/"+s, stepKey{id, b + "/" + s}
				got := recorded[name]
				switch {
				case len(got) > 1:
					twice = true
					flag("branch_step_twice", fmt.Sprintf("%s: branch step %s recorded %d times: %v", id, name, len(got), got))
				case len(got) == 1 && rec.Status == lease.StatusSucceeded && result.Runs[name] != got[0]:
					twice = true
					flag("branch_step_twice", fmt.Sprintf("%s: branch step %s recorded with run %s, but the branch returned run %q", id, name, got[0], result.Runs[name]))
				}
				switch {
				case len(got) == 0 && rec.Status == lease.StatusSucceeded:
					unrun = true
					flag("branch_step_unrun", fmt.Sprintf("%s: SUCCEEDED without branch step %s recorded", id, name))
				case len(got) > 0 && !done[k][got[0]]:
					unrun = true
					flag("branch_step_unrun", fmt.Sprintf("%s: branch step %s recorded with run %q, which no completed run of its function returned", id, name, got[0]))
				}
				if n := len(done[k]); n > 1 {
					o.BranchRedone += n - 1
				}
				t, ok := at[branchOp(b, s)]
				if !ok {
					continue
				}
				for _, e := range runs[k] {
					if e.At().After(t) {
						o.BranchRerun++
						flag("branch_step_rerun", fmt.Sprintf("%s: branch step %s's function ran again under fence %d (by %s at %s), after a write recording it was answered at %s",
							id, name, e.Fence, e.Worker, stamp(e.At()), stamp(t)))
					}
				}
			}
		}
		if twice {
			o.BranchTwice++
		}
		if unrun {
			o.BranchUnrun++
		}
		if !twice && !unrun && rec.Status == lease.StatusSucceeded {
			o.BranchDone++
		}
	}
}

// checkRaces: each racer's outcome ("race:decision") is recorded once;
// every run that got the outcome after it was certainly recorded saw the
// recorded winner, as does the task's result; no answer is accepted for a
// race the timer won; and the client's accepted answers landed.
func checkRaces(in Input, writesByTask map[string][]Write, clientAccepted map[callbackWait]int, r *WorkflowReport, o *OpsReport, flag func(kind, detail string)) {
	wf := in.Workflows
	lines := map[string][]HandlerEvent{}
	for _, e := range in.Handler {
		if e.Event == "race" && wf.Races[e.Task].Answer != "" {
			lines[e.Task] = append(lines[e.Task], e)
			o.RaceRuns++
		}
	}
	late := map[string]int{}
	for _, a := range wf.Answers {
		if _, ok := wf.Races[a.Task]; ok && a.Via == "client" && a.Rejected {
			late[a.Task]++
		}
	}
	for _, id := range slices.Sorted(maps.Keys(wf.Races)) {
		o.RaceTasks++
		rec, ok := in.Records[id]
		if !ok {
			continue // stuck
		}
		var outcomes []string
		for _, st := range rec.Steps {
			if st.Name == "race:decision" {
				outcomes = append(outcomes, string(st.Result))
			}
		}
		if len(outcomes) > 1 {
			o.RaceTwice++
			flag("race_twice", fmt.Sprintf("%s: the race's outcome recorded %d times: %v", id, len(outcomes), outcomes))
		}
		if len(outcomes) == 0 {
			continue // not decided: judged by its end (stuck, or wrong_end)
		}
		var c struct {
			Order []int `json:"order"`
		}
		if json.Unmarshal([]byte(outcomes[0]), &c) != nil || len(c.Order) == 0 {
			o.RaceChanged++
			flag("race_changed", fmt.Sprintf("%s: the race's recorded outcome %s names no winner", id, outcomes[0]))
			continue
		}
		winner := RaceWinner(c.Order[0])
		if winner == "callback" {
			o.RaceByCallback++
		} else {
			o.RaceByTimer++
		}
		changed := false
		if t, ok := recordedAt(writesByTask[id])["race:decision"]; ok {
			for _, e := range lines[id] {
				if e.At().After(t) && e.Phase != winner {
					changed = true
					flag("race_changed", fmt.Sprintf("%s: the run under fence %d (by %s at %s) saw the %s win, after the outcome (the %s) was recorded at %s",
						id, e.Fence, e.Worker, stamp(e.At()), e.Phase, winner, stamp(t)))
				}
			}
		}
		var res struct {
			N int `json:"n"`
		}
		if rec.Status == lease.StatusSucceeded && (json.Unmarshal(rec.Result, &res) != nil || RaceWinner(res.N) != winner) {
			changed = true
			flag("race_changed", fmt.Sprintf("%s: SUCCEEDED with result %s, but the recorded winner is the %s", id, rec.Result, winner))
		}
		if changed {
			o.RaceChanged++
		}
		if winner == "timer" {
			o.RaceLateRejected += late[id]
			for w, n := range clientAccepted {
				if w.task == id && n > 0 {
					o.RaceLateAccepted++
					flag("race_late_accepted", fmt.Sprintf("%s: the timer won, yet the client was told %d answer(s) to the wait under fence %d were accepted", id, n, w.fence))
				}
			}
			continue
		}
		var answers []Write
		for _, w := range writesByTask[id] {
			if w.FromWaiting && w.Status == string(lease.StatusPending) && slices.Contains(w.Steps, "callback:approval") {
				answers = append(answers, w)
			}
		}
		checkClientAnswers(id, answers, clientAccepted, r, flag)
	}
}

// checkInboxes: every message the test sent an inbox is received once
// (by message id), in the order the client sent those of a topic, under
// the numbers the client was given, and an inbox that SUCCEEDED lost none.
func checkInboxes(in Input, o *OpsReport, flag func(kind, detail string)) {
	wf := in.Workflows
	type msgKey struct{ task, id string }
	sent := map[msgKey]MessageSend{} // the first copy of each id
	seqs := map[msgKey][]int64{}
	for _, s := range wf.Sends {
		k := msgKey{s.Task, s.ID}
		if s.Copy > 0 {
			o.MsgDupSends++
		}
		if s.Via != "sqs" && s.Err == "" {
			seqs[k] = append(seqs[k], s.Seq)
		}
		if first, ok := sent[k]; !ok || (first.Err != "" && s.Err == "") {
			if !ok && s.Via == "sqs" {
				o.MsgViaSQS++
			}
			sent[k] = s
		}
	}
	o.MsgSent = len(sent)
	for _, k := range slices.SortedFunc(maps.Keys(seqs), func(a, b msgKey) int { return strings.Compare(a.task+" "+a.id, b.task+" "+b.id) }) {
		if ns := seqs[k]; slices.Min(ns) != slices.Max(ns) {
			o.MsgSeqChanged++
			flag("msg_seq_changed", fmt.Sprintf("%s: message %s was given the numbers %v by its copies", k.task, k.id, ns))
		}
	}
	runs := map[msgKey]int{}
	for _, e := range in.Handler {
		if e.Event == "recv" && wf.Inboxes[e.Task] != nil {
			runs[msgKey{e.Task, e.Run}]++
		}
	}
	for _, n := range runs {
		o.MsgRedone += n - 1
	}
	for _, id := range slices.Sorted(maps.Keys(wf.Inboxes)) {
		o.InboxTasks++
		rec, ok := in.Records[id]
		if !ok {
			continue // stuck
		}
		// The messages the history holds, by receive: the steps "got-i".
		got := map[int]InboxMessage{}
		for _, st := range rec.Steps {
			n, ok := strings.CutPrefix(st.Name, "got-")
			if !ok {
				continue
			}
			i, err := strconv.Atoi(n)
			var m InboxMessage
			if err != nil || json.Unmarshal(st.Result, &m) != nil {
				o.MsgUnsent++
				flag("msg_unsent", fmt.Sprintf("%s: step %s holds %s, not a message of the test", id, st.Name, st.Result))
				continue
			}
			if _, dup := got[i]; dup {
				o.MsgTwice++
				flag("msg_twice", fmt.Sprintf("%s: step %s recorded twice", id, st.Name))
			}
			got[i] = m
		}
		order := slices.Sorted(maps.Keys(got))
		seen := map[string]int{}
		lastK := map[string]int{}     // topic -> K of the last client-sent message received
		lastSeq := map[string]int64{} // topic -> its number
		for _, i := range order {
			m := got[i]
			seen[m.ID]++
			if seen[m.ID] == 2 {
				o.MsgTwice++
				flag("msg_twice", fmt.Sprintf("%s: message %s received more than once (receive %d)", id, m.ID, i))
			}
			s, ok := sent[msgKey{id, m.ID}]
			if !ok {
				o.MsgUnsent++
				flag("msg_unsent", fmt.Sprintf("%s: receive %d got message %s, which the test never sent", id, i, m.ID))
				continue
			}
			if s.Topic != wf.Inboxes[id][min(i, len(wf.Inboxes[id])-1)] {
				o.MsgOrder++
				flag("msg_order", fmt.Sprintf("%s: receive %d (topic %s) got message %s of topic %s", id, i, wf.Inboxes[id][min(i, len(wf.Inboxes[id])-1)], m.ID, s.Topic))
			}
			if s.Via == "sqs" || s.Err != "" {
				continue
			}
			if k, ok := lastK[s.Topic]; ok && (s.K < k || s.Seq <= lastSeq[s.Topic]) {
				o.MsgOrder++
				flag("msg_order", fmt.Sprintf("%s: topic %s: message %s (sent %d-th, number %d) received after message %d-th (number %d)", id, s.Topic, m.ID, s.K, s.Seq, k, lastSeq[s.Topic]))
			}
			lastK[s.Topic], lastSeq[s.Topic] = s.K, s.Seq
		}
		if rec.Status != lease.StatusSucceeded {
			continue
		}
		var res InboxResult
		_ = json.Unmarshal(rec.Result, &res)
		want := make([]string, len(order))
		for j, i := range order {
			want[j] = got[i].ID
		}
		if !slices.Equal(res.IDs, want) {
			o.MsgTwice++
			flag("msg_twice", fmt.Sprintf("%s: SUCCEEDED with messages %v, but its history holds %v", id, res.IDs, want))
		}
		for _, k := range slices.SortedFunc(maps.Keys(sent), func(a, b msgKey) int { return strings.Compare(a.id, b.id) }) {
			if k.task != id {
				continue
			}
			if seen[k.id] > 0 {
				o.MsgReceived++
				continue
			}
			if sent[k].Err == "" {
				o.MsgLost++
				flag("msg_lost", fmt.Sprintf("%s: message %s (topic %s, via %s) was sent, and the inbox SUCCEEDED without it", id, k.id, sent[k].Topic, sent[k].Via))
			}
		}
	}
}
