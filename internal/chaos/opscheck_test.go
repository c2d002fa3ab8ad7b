package chaos

import (
	"fmt"
	"slices"
	"testing"

	"github.com/leasehold/leasehold/internal/lease"
)

// cleanOps is the evidence of a run with one "branches" task (br), one
// racer the timer won (rt) and one the callback won (rc), and one inbox
// (ib), all as they should be. br's step b/s1 ran twice: its first run's
// attempt died before recording it (fence 1), the second (fence 2)
// recorded it.
func cleanOps() Input {
	in := Input{Records: map[string]lease.Task{}, Expect: map[string]lease.Status{}, Workflows: &Workflows{
		Branches: map[string]bool{"br": true}, Races: map[string]RacePlan{"rt": {Answer: "late"}, "rc": {Answer: "early"}},
		Inboxes: map[string][]string{"ib": {"a", "a", "b"}},
	}}
	add := func(rec lease.Task, ws []Write, hs []HandlerEvent) {
		in.Valid = append(in.Valid, rec.ID)
		in.Records[rec.ID] = rec
		in.Writes = append(in.Writes, ws...)
		in.Handler = append(in.Handler, hs...)
	}

	// br: every step run (and done) at 100 + 10 i under fence 2, recorded
	// by its checkpoint at 400; b/s1 also ran under fence 1 at 20.
	br := lease.Task{ID: "br", Status: lease.StatusSucceeded, Fence: 2, Attempt: 1, MaxAttempts: 20}
	var hs []HandlerEvent
	var names []string
	result := `{"runs":{`
	i := 0
	for _, b := range BranchNames {
		for _, s := range BranchSteps {
			run := fmt.Sprintf("run-%s-%s", b, s)
			hs = append(hs, HandlerEvent{Event: "bstep", Task: "br", Fence: 2, Step: b + "/" + s, Run: run, Phase: "run", AtUS: at(100 + 10*i).UnixMicro()},
				HandlerEvent{Event: "bstep", Task: "br", Fence: 2, Step: b + "/" + s, Run: run, Phase: "done", AtUS: at(105 + 10*i).UnixMicro()})
			br.Steps = append(br.Steps, lease.Step{Name: branchOp(b, s), Result: []byte(`{"run":"` + run + `","fence":2}`)})
			names = append(names, branchOp(b, s))
			if i > 0 {
				result += ","
			}
			result += fmt.Sprintf("%q:%q", b+"/"+s, run)
			i++
		}
	}
	br.Result = []byte(result + "}}")
	hs = append(hs, HandlerEvent{Event: "bstep", Task: "br", Fence: 1, Step: "b/s1", Run: "lost", Phase: "run", AtUS: at(20).UnixMicro()},
		HandlerEvent{Event: "bstep", Task: "br", Fence: 1, Step: "b/s1", Run: "lost", Phase: "done", AtUS: at(25).UnixMicro()})
	checkpoint := Write{Task: "br", Op: "UpdateItem", Status: "RUNNING", Fence: 2, Steps: names, Forwarded: at(395), Answered: at(400), LeaseUntil: at(3000)}
	add(br, []Write{claim("br", 1, 0, 3000), claim("br", 2, 90, 3090), checkpoint, ending("br", 2, "SUCCEEDED", 500)}, hs)

	// rt: the timer won, recorded at 300; the client's answer after it was
	// refused.
	rt := lease.Task{ID: "rt", Status: lease.StatusSucceeded, Fence: 2, Attempt: 1, MaxAttempts: 20, Result: []byte(`{"n":1}`),
		Steps: []lease.Step{{Name: "sleep#1", Result: []byte("1")}, {Name: "callback:approval", Result: []byte(`{}`)}, {Name: "race:decision", Result: []byte(`{"order":[1,0]}`)}, {Name: "seen", Result: []byte("1")}}}
	add(rt, []Write{claim("rt", 2, 200, 3200), {Task: "rt", Op: "UpdateItem", Status: "RUNNING", Fence: 2, Steps: []string{"sleep#1", "callback:approval", "race:decision"}, Forwarded: at(295), Answered: at(300), LeaseUntil: at(3200)}},
		[]HandlerEvent{{Event: "race", Task: "rt", Fence: 2, Phase: "timer", AtUS: at(250).UnixMicro()}, {Event: "race", Task: "rt", Fence: 3, Phase: "timer", AtUS: at(900).UnixMicro()}})
	in.Workflows.Answers = append(in.Workflows.Answers, CallbackAnswer{Task: "rt", Fence: 1, Via: "client", Rejected: true})

	// rc: the callback won: the client's answer landed (fence 1).
	rc := lease.Task{ID: "rc", Status: lease.StatusSucceeded, Fence: 2, Attempt: 1, MaxAttempts: 20, Result: []byte(`{"n":0}`),
		Steps: []lease.Step{{Name: "sleep#1", Result: []byte("1")}, {Name: "callback:approval", Result: []byte(`{}`)}, {Name: "race:decision", Result: []byte(`{"order":[0]}`)}}}
	add(rc, []Write{claim("rc", 1, 0, 3000), ending("rc", 1, "WAITING", 100),
		{Task: "rc", Op: "UpdateItem", Status: "PENDING", Fence: 1, FromWaiting: true, Worker: ClientName, Steps: []string{"sleep#1", "callback:approval"}, Forwarded: at(200), Answered: at(205)},
		claim("rc", 2, 300, 3300), ending("rc", 2, "SUCCEEDED", 400)},
		[]HandlerEvent{{Event: "callback", Task: "rc", Fence: 1, Token: "lhcb1.x", AtUS: at(20).UnixMicro()}, {Event: "race", Task: "rc", Fence: 2, Phase: "callback", AtUS: at(350).UnixMicro()}})
	in.Workflows.Answers = append(in.Workflows.Answers, CallbackAnswer{Task: "rc", Fence: 1, Via: "client", Accepted: true})

	// ib: m1 (SendOnce, sent twice), m2 (Send) on a; m3 as a message on b.
	in.Workflows.Sends = []MessageSend{
		{Task: "ib", Topic: "a", ID: "m1", K: 0, Via: "once", Seq: 1},
		{Task: "ib", Topic: "a", ID: "m1", K: 0, Via: "once", Copy: 1, Seq: 1},
		{Task: "ib", Topic: "a", ID: "m2", K: 1, Via: "send", Seq: 2},
		{Task: "ib", Topic: "b", ID: "m3", K: 0, Via: "sqs"},
	}
	ib := lease.Task{ID: "ib", Status: lease.StatusSucceeded, Fence: 3, Attempt: 1, MaxAttempts: 20, Result: []byte(`{"ids":["m1","m2","m3"]}`),
		Steps: []lease.Step{
			{Name: "recv:a#1"}, {Name: "got-0", Result: []byte(`{"id":"m1","topic":"a","k":0}`)},
			{Name: "recv:a#2"}, {Name: "got-1", Result: []byte(`{"id":"m2","topic":"a","k":1}`)},
			{Name: "recv:b#1"}, {Name: "got-2", Result: []byte(`{"id":"m3","topic":"b","k":0}`)},
		}}
	add(ib, nil, []HandlerEvent{{Event: "recv", Task: "ib", Fence: 1, Step: "got-0", Run: "m1", AtUS: at(10).UnixMicro()}})
	return in
}

func runOpsCheck(in Input) (OpsReport, map[string][]string) {
	byTask := map[string][]Write{}
	for _, w := range in.Writes {
		byTask[w.Task] = append(byTask[w.Task], w)
	}
	accepted := map[callbackWait]int{}
	for _, a := range in.Workflows.Answers {
		if a.Via == "client" && a.Accepted {
			accepted[callbackWait{a.Task, a.Fence}]++
		}
	}
	got := map[string][]string{}
	var r WorkflowReport
	o := checkOps(in, byTask, accepted, &r, func(kind, detail string) { got[kind] = append(got[kind], detail) })
	return o, got
}

func TestCheckOpsClean(t *testing.T) {
	o, got := runOpsCheck(cleanOps())
	if len(got) > 0 {
		t.Fatalf("violations on a clean run: %v", got)
	}
	want := OpsReport{BranchTasks: 1, BranchDone: 1, BranchRuns: 7, BranchRedone: 1,
		RaceTasks: 2, RaceByCallback: 1, RaceByTimer: 1, RaceRuns: 3, RaceLateRejected: 1,
		InboxTasks: 1, MsgSent: 3, MsgReceived: 3, MsgDupSends: 1, MsgViaSQS: 1}
	if o != want {
		t.Fatalf("report\n got %+v\nwant %+v", o, want)
	}
	// And through Check, which reports it with the other workflow checks.
	in := cleanOps()
	in.Now = at(5000)
	if rep := Check(in); rep.Workflow.Ops != want {
		t.Fatalf("Check: ops %+v, want %+v", rep.Workflow.Ops, want)
	}
}

func TestCheckOpsViolations(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(in *Input)
		want   string
	}{
		{"a branch step recorded twice", func(in *Input) {
			rec := in.Records["br"]
			rec.Steps = append(rec.Steps, rec.Steps[0])
			in.Records["br"] = rec
		}, "branch_step_twice"},
		{"a branch returned another result than the recorded one", func(in *Input) {
			rec := in.Records["br"]
			rec.Result = []byte(`{"runs":{"a/s0":"other"}}`)
			in.Records["br"] = rec
		}, "branch_step_twice"},
		{"a branch step's function ran after its record", func(in *Input) {
			in.Handler = append(in.Handler, HandlerEvent{Event: "bstep", Task: "br", Fence: 3, Step: "a/s1", Run: "late", Phase: "run", AtUS: at(450).UnixMicro()})
		}, "branch_step_rerun"},
		{"a branch step recorded from no completed run", func(in *Input) {
			rec := in.Records["br"]
			rec.Steps = slices.Clone(rec.Steps)
			rec.Steps[2] = lease.Step{Name: branchOp("b", "s0"), Result: []byte(`{"run":"ghost"}`)}
			in.Records["br"] = rec
		}, "branch_step_unrun"},
		{"a branches task succeeded without a step", func(in *Input) {
			rec := in.Records["br"]
			rec.Steps = rec.Steps[:5]
			in.Records["br"] = rec
		}, "branch_step_unrun"},
		{"a race decided twice", func(in *Input) {
			rec := in.Records["rt"]
			rec.Steps = append(slices.Clone(rec.Steps), lease.Step{Name: "race:decision", Result: []byte(`{"order":[0]}`)})
			in.Records["rt"] = rec
		}, "race_twice"},
		{"a run after the record saw another winner", func(in *Input) {
			in.Handler = append(in.Handler, HandlerEvent{Event: "race", Task: "rt", Fence: 4, Phase: "callback", AtUS: at(1000).UnixMicro()})
		}, "race_changed"},
		{"the result names another winner", func(in *Input) {
			rec := in.Records["rc"]
			rec.Result = []byte(`{"n":1}`)
			in.Records["rc"] = rec
		}, "race_changed"},
		{"an answer accepted for a race the timer won", func(in *Input) {
			in.Workflows.Answers = append(in.Workflows.Answers, CallbackAnswer{Task: "rt", Fence: 2, Via: "client", Accepted: true})
		}, "race_late_accepted"},
		{"an accepted answer that never landed", func(in *Input) {
			in.Workflows.Answers = append(in.Workflows.Answers, CallbackAnswer{Task: "rc", Fence: 1, Via: "client", Accepted: true})
		}, "callback_lost"},
		{"a message received twice", func(in *Input) {
			rec := in.Records["ib"]
			rec.Steps = slices.Clone(rec.Steps)
			rec.Steps[5] = lease.Step{Name: "got-2", Result: []byte(`{"id":"m1","topic":"a","k":0}`)}
			rec.Result = []byte(`{"ids":["m1","m2","m1"]}`)
			in.Records["ib"] = rec
		}, "msg_twice"},
		{"a message lost", func(in *Input) {
			in.Workflows.Sends = append(in.Workflows.Sends, MessageSend{Task: "ib", Topic: "b", ID: "m4", K: 1, Via: "once", Seq: 2})
		}, "msg_lost"},
		{"messages received out of their send order", func(in *Input) {
			in.Workflows.Sends[0].Seq, in.Workflows.Sends[1].Seq, in.Workflows.Sends[2].Seq = 2, 2, 1
			in.Workflows.Sends[0].K, in.Workflows.Sends[1].K, in.Workflows.Sends[2].K = 1, 1, 0
		}, "msg_order"},
		{"a message the test never sent", func(in *Input) {
			rec := in.Records["ib"]
			rec.Steps = slices.Clone(rec.Steps)
			rec.Steps[5] = lease.Step{Name: "got-2", Result: []byte(`{"id":"forged","topic":"b","k":0}`)}
			in.Records["ib"] = rec
		}, "msg_unsent"},
		{"a SendOnce copy given another number", func(in *Input) {
			in.Workflows.Sends[1].Seq = 3
		}, "msg_seq_changed"},
		{"the result disagrees with the history", func(in *Input) {
			rec := in.Records["ib"]
			rec.Result = []byte(`{"ids":["m1","m3","m2"]}`)
			in.Records["ib"] = rec
		}, "msg_twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := cleanOps()
			tc.change(&in)
			_, got := runOpsCheck(in)
			if len(got[tc.want]) == 0 {
				t.Fatalf("want a %s violation, got %v", tc.want, got)
			}
		})
	}
}
