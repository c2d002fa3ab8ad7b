package chaos

import (
	"strconv"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
)

// cleanWorkflows is the evidence of a run with one parent of two children,
// a chain of two, a chain whose failed head cancelled its dependent, and a
// callback task, all as they should be.
func cleanWorkflows() Input {
	in := clean()
	add := func(rec lease.Task, ws []Write, hs []HandlerEvent) {
		in.Valid = append(in.Valid, rec.ID)
		in.Records[rec.ID] = rec
		in.Writes = append(in.Writes, ws...)
		in.Handler = append(in.Handler, hs...)
	}
	resume := Write{Task: "p", Op: "UpdateItem", Status: "PENDING", Fence: 1, FromWaiting: true, Forwarded: at(400), Answered: at(405)}
	add(lease.Task{ID: "p", Status: lease.StatusSucceeded, Fence: 2, Attempt: 1, MaxAttempts: 20,
		History: []lease.Attempt{entry(1, lease.StatusWaiting), entry(2, lease.StatusSucceeded)}},
		[]Write{claim("p", 1, 0, 3000), ending("p", 1, "WAITING", 100), ending("p", 1, "WAITING", 300), resume,
			claim("p", 2, 500, 3500), ending("p", 2, "SUCCEEDED", 600)},
		[]HandlerEvent{
			{Event: "start", Task: "p", Fence: 1, Phase: "spawn", AtUS: at(20).UnixMicro()},
			{Event: "end", Task: "p", Fence: 1, Outcome: "await", AtUS: at(30).UnixMicro()},
			{Event: "start", Task: "p", Fence: 2, Phase: "resume", Kids: []string{"p/0 SUCCEEDED 7", "p/1 FAILED -1"}, AtUS: at(520).UnixMicro()},
			{Event: "end", Task: "p", Fence: 2, Outcome: "ok", AtUS: at(580).UnixMicro()},
		})
	add(succeeded("p/0", 1, entry(1, lease.StatusSucceeded)),
		[]Write{claim("p/0", 1, 150, 3000), ending("p/0", 1, "SUCCEEDED", 250)}, ran("p/0", 1, 240))
	add(lease.Task{ID: "p/1", Status: lease.StatusFailed, Fence: 1, Attempt: 1, MaxAttempts: 20, History: []lease.Attempt{entry(1, lease.StatusFailed)}},
		[]Write{claim("p/1", 1, 150, 3000), ending("p/1", 1, "FAILED", 280)}, nil)

	add(succeeded("x", 1, entry(1, lease.StatusSucceeded)), []Write{claim("x", 1, 0, 3000), ending("x", 1, "SUCCEEDED", 200)}, ran("x", 1, 190))
	y := ran("y", 1, 400) // starts at 350, after x's finish at 200
	y[0].Deps = []string{"x SUCCEEDED"}
	add(succeeded("y", 1, entry(1, lease.StatusSucceeded)), []Write{claim("y", 1, 300, 3300), ending("y", 1, "SUCCEEDED", 410)}, y)
	add(lease.Task{ID: "h", Status: lease.StatusFailed, Fence: 1, Attempt: 1, MaxAttempts: 20, History: []lease.Attempt{entry(1, lease.StatusFailed)}},
		[]Write{claim("h", 1, 0, 3000), ending("h", 1, "FAILED", 100)}, nil)
	add(lease.Task{ID: "d", Status: lease.StatusCancelled, MaxAttempts: 20, Error: "dependency h ended FAILED: planned"},
		[]Write{{Task: "d", Op: "UpdateItem", Status: "CANCELLED", FromWaiting: true, Forwarded: at(150), Answered: at(155)}}, nil)

	// c waits for a callback (WaitForCallback): the answer records the
	// step and leaves it PENDING; the run under fence 2 reads it and
	// finishes.
	accept := Write{Task: "c", Op: "UpdateItem", Status: "PENDING", Fence: 1, FromWaiting: true, Worker: ClientName,
		Steps: []string{"callback:approval"}, Forwarded: at(700), Answered: at(705)}
	add(lease.Task{ID: "c", Status: lease.StatusSucceeded, Fence: 2, Attempt: 1, MaxAttempts: 20,
		History: []lease.Attempt{entry(1, lease.StatusWaiting), entry(2, lease.StatusSucceeded)}},
		[]Write{claim("c", 1, 0, 3000), ending("c", 1, "WAITING", 100), accept, claim("c", 2, 800, 3800), ending("c", 2, "SUCCEEDED", 900)},
		[]HandlerEvent{
			{Event: "start", Task: "c", Fence: 1, AtUS: at(20).UnixMicro()},
			{Event: "callback", Task: "c", Fence: 1, Token: "lhcb1.x", AtUS: at(25).UnixMicro()},
			{Event: "end", Task: "c", Fence: 1, Outcome: "await", AtUS: at(30).UnixMicro()},
			{Event: "start", Task: "c", Fence: 2, AtUS: at(820).UnixMicro()},
			{Event: "end", Task: "c", Fence: 2, Outcome: "ok", AtUS: at(880).UnixMicro()},
		})
	// z runs after h whatever its outcome (after-any).
	z := ran("z", 1, 400)
	z[0].Deps = []string{"h FAILED"}
	add(succeeded("z", 1, entry(1, lease.StatusSucceeded)), []Write{claim("z", 1, 300, 3300), ending("z", 1, "SUCCEEDED", 410)}, z)

	// q is cancelled by the test while it waits (call sent at 1000,
	// returned at 1010): q/0 had ended before, q/1 was running and ended
	// CANCELLED, q/2 had no item yet and never got one, q/3 was running and
	// finished before its worker saw the cancel.
	cancelWrite := Write{Task: "q", Op: "UpdateItem", Status: "CANCELLED", Fence: 1, FromWaiting: true, Worker: ClientName, Forwarded: at(1002), Answered: at(1005)}
	add(lease.Task{ID: "q", Status: lease.StatusCancelled, Fence: 1, Attempt: 1, MaxAttempts: 20, Error: "cancelled on request",
		History: []lease.Attempt{entry(1, lease.StatusWaiting), entry(1, lease.StatusCancelled)}},
		[]Write{claim("q", 1, 800, 3800), ending("q", 1, "WAITING", 900), cancelWrite},
		[]HandlerEvent{
			{Event: "start", Task: "q", Fence: 1, Phase: "spawn", AtUS: at(820).UnixMicro()},
			{Event: "end", Task: "q", Fence: 1, Outcome: "await", AtUS: at(830).UnixMicro()},
		})
	add(succeeded("q/0", 1, entry(1, lease.StatusSucceeded)),
		[]Write{claim("q/0", 1, 850, 3850), ending("q/0", 1, "SUCCEEDED", 960)}, ran("q/0", 1, 950))
	q1 := ran("q/1", 1, 1900)
	q1[1].Outcome = "cancelled"
	add(lease.Task{ID: "q/1", Status: lease.StatusCancelled, Fence: 1, Attempt: 1, MaxAttempts: 20, Error: "cancelled on request",
		History: []lease.Attempt{entry(1, lease.StatusCancelled)}},
		[]Write{claim("q/1", 1, 990, 3990), ending("q/1", 1, "CANCELLED", 1950)}, q1)
	add(succeeded("q/3", 1, entry(1, lease.StatusSucceeded)),
		[]Write{claim("q/3", 1, 995, 3995), ending("q/3", 1, "SUCCEEDED", 1500)}, ran("q/3", 1, 1450))
	in.Valid = append(in.Valid, "q/2")
	// q/4 had been released for a retry (PENDING) and was cancelled so:
	// its CANCELLED entry carries the fence of its last attempt.
	add(lease.Task{ID: "q/4", Status: lease.StatusCancelled, Fence: 1, Attempt: 1, MaxAttempts: 20, Error: "cancelled while pending",
		History: []lease.Attempt{entry(1, lease.StatusPending), entry(1, lease.StatusCancelled)}},
		[]Write{claim("q/4", 1, 850, 3850), ending("q/4", 1, "PENDING", 900),
			{Task: "q/4", Op: "UpdateItem", Status: "CANCELLED", Fence: 1, Attempt: 1, Worker: ClientName, Forwarded: at(1006), Answered: at(1008)}},
		nil)

	// s runs two steps; s1 fails transiently in attempt 1, so attempt 2
	// takes s0's recorded result and runs s1 only.
	withSteps := func(w Write, steps ...string) Write { w.Steps = steps; return w }
	dropped := func(w Write) Write { w.Dropped = true; return w }
	stepLine := func(f int64, step, phase, run string, ms int) HandlerEvent {
		return HandlerEvent{Event: "step", Task: "s", Fence: f, Attempt: int(f), Step: step, Phase: phase, Run: run, AtUS: at(ms).UnixMicro()}
	}
	add(lease.Task{ID: "s", Status: lease.StatusSucceeded, Fence: 2, Attempt: 2, MaxAttempts: 20,
		History: []lease.Attempt{entry(1, lease.StatusPending), entry(2, lease.StatusSucceeded)},
		Steps:   []lease.Step{{Name: "s0", Result: []byte(`{"run":"r1","fence":1}`)}, {Name: "s1", Result: []byte(`{"run":"r3","fence":2}`)}}},
		[]Write{claim("s", 1, 0, 3000), withSteps(claim("s", 1, 100, 3000), "s0"), withSteps(ending("s", 1, "PENDING", 200), "s0"),
			withSteps(claim("s", 2, 300, 3300), "s0"), withSteps(dropped(claim("s", 2, 360, 3300)), "s0", "s1"), withSteps(ending("s", 2, "SUCCEEDED", 400), "s0", "s1")},
		[]HandlerEvent{
			{Event: "start", Task: "s", Fence: 1, Attempt: 1, AtUS: at(10).UnixMicro()},
			stepLine(1, "s0", "run", "r1", 20), stepLine(1, "s0", "done", "r1", 90),
			stepLine(1, "s1", "run", "r2", 110), stepLine(1, "s1", "fail", "r2", 150),
			{Event: "end", Task: "s", Fence: 1, Attempt: 1, Outcome: "error", AtUS: at(160).UnixMicro()},
			{Event: "start", Task: "s", Fence: 2, Attempt: 2, AtUS: at(310).UnixMicro()},
			stepLine(2, "s1", "run", "r3", 320), stepLine(2, "s1", "done", "r3", 350),
			{Event: "end", Task: "s", Fence: 2, Attempt: 2, Outcome: "ok", AtUS: at(390).UnixMicro()},
		})

	in.Expect = map[string]lease.Status{"p/1": lease.StatusFailed, "h": lease.StatusFailed, "d": lease.StatusCancelled, "q": lease.StatusCancelled}
	in.Workflows = &Workflows{
		Fans:      map[string][]string{"p": {"p/0", "p/1"}, "q": {"q/0", "q/1", "q/2", "q/3", "q/4"}},
		ChildN:    map[string]int{"p/0": 7, "p/1": 8, "q/0": 0, "q/1": 1, "q/2": 2, "q/3": 3, "q/4": 4},
		After:     map[string][]string{"y": {"x"}, "d": {"h"}, "z": {"h"}},
		AfterAny:  map[string]bool{"z": true},
		Callbacks: map[string]bool{"c": true},
		Steps:     map[string]int{"s": 2},
		Cancels:   []CancelCall{{Task: "q", Sent: at(1000), Returned: at(1010), Status: "CANCELLED"}},
		Answers: []CallbackAnswer{
			{Task: "c", Fence: 1, Via: "client", Accepted: true},
			{Task: "c", Fence: 1, Via: "client", Rejected: true},
			{Task: "c", Fence: 1, Via: "sqs"},
			{Task: "c", Fence: 1, Via: "sqs"},
		},
	}
	in.Handler = append(in.Handler, HandlerEvent{Event: "exit_after_finish", Task: "p/0", Fence: 1, Status: "SUCCEEDED"})
	in.Downs = []time.Time{at(50), at(260), at(900)} // one during p's fan-in (105..400)
	return in
}

func TestCheckWorkflowsClean(t *testing.T) {
	t.Parallel()
	r := Check(cleanWorkflows())
	wantOnly(t, r)
	w := r.Workflow
	if w.CancelCalls != 1 || w.CancelledParents != 1 || w.KidsCancelled != 2 || w.KidsNeverCreated != 1 || w.KidsRanFirst != 2 ||
		w.StepTasks != 1 || w.StepRuns != 3 || w.StepFailures != 1 || w.StepRedone != 0 || w.StepCheckpoints != 2 || w.StepLostAnswers != 1 {
		t.Errorf("report = %+v", w)
	}
	if w.Parents != 2 || w.Children != 7 || w.ResumedRuns != 1 || w.Dependents != 3 || w.Cancelled != 1 ||
		w.CallbackAccept != 1 || w.CallbackByCli != 1 || w.CallbackReject != 1 || w.CallbackSent != 4 || w.ExitAfterChild != 1 || w.KillsDuringFanIn != 1 {
		t.Errorf("report = %+v", w)
	}
}

func TestCheckWorkflowsViolations(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		fault func(in *Input)
		want  []string
	}{
		{"resumed twice", func(in *Input) {
			in.Writes = append(in.Writes, Write{Task: "p", Op: "UpdateItem", Status: "RUNNING", Fence: 2, FromWaiting: true, Forwarded: at(450), Answered: at(455)})
		}, []string{"bad_resume"}},
		{"never resumed", func(in *Input) {
			var ws []Write
			for _, w := range in.Writes {
				if !(w.Task == "p" && w.FromWaiting) {
					ws = append(ws, w)
				}
			}
			in.Writes = ws
		}, []string{"bad_resume"}},
		{"ran again without its children", func(in *Input) {
			in.Handler = append(in.Handler, HandlerEvent{Event: "start", Task: "p", Fence: 2, Phase: "spawn", AtUS: at(510).UnixMicro()})
		}, []string{"bad_resume"}},
		{"missed a child", func(in *Input) {
			in.Handler = append(in.Handler, HandlerEvent{Event: "start", Task: "p", Fence: 3, Phase: "resume", Kids: []string{"p/0 SUCCEEDED 7"}})
		}, []string{"child_missed"}},
		{"read a child still running", func(in *Input) {
			in.Handler = append(in.Handler, HandlerEvent{Event: "start", Task: "p", Fence: 3, Phase: "resume", Kids: []string{"p/0 RUNNING -1", "p/1 FAILED -1"}})
		}, []string{"child_missed"}},
		{"dependent ran before its dependency finished", func(in *Input) {
			in.Handler = append(in.Handler, HandlerEvent{Event: "start", Task: "y", Fence: 1, Deps: []string{"x SUCCEEDED"}, AtUS: at(150).UnixMicro()})
		}, []string{"early_dependent"}},
		{"dependent of a failed task ran", func(in *Input) {
			in.Handler = append(in.Handler, HandlerEvent{Event: "start", Task: "d", Fence: 1, Deps: []string{"h FAILED"}, AtUS: at(150).UnixMicro()})
		}, []string{"early_dependent"}},
		{"dependent left waiting", func(in *Input) {
			d := in.Records["d"]
			d.Status, d.Error = lease.StatusWaiting, ""
			in.Records["d"] = d
		}, []string{"stuck"}},
		{"callback accepted twice", func(in *Input) {
			in.Writes = append(in.Writes, Write{Task: "c", Op: "UpdateItem", Status: "PENDING", Fence: 1, FromWaiting: true, Worker: "w1g1",
				Steps: []string{"callback:approval"}, Forwarded: at(710), Answered: at(715)})
		}, []string{"callback_double_accept"}},
		{"a task ended otherwise than planned", func(in *Input) {
			in.Expect["h"] = lease.StatusCancelled // it ended FAILED
		}, []string{"wrong_end"}},
		{"callback answered without its token handed out", func(in *Input) {
			var hs []HandlerEvent
			for _, h := range in.Handler {
				if !(h.Task == "c" && h.Event == "callback") {
					hs = append(hs, h)
				}
			}
			in.Handler = hs
		}, []string{"callback_without_token"}},
		{"parent resumed before a child ended", func(in *Input) {
			for i, w := range in.Writes {
				if w.Task == "p/1" && w.Status == "FAILED" {
					in.Writes[i].Forwarded, in.Writes[i].Answered = at(500), at(505)
				}
			}
		}, []string{"bad_resume"}},
		{"after-any dependent ran before its dependency ended", func(in *Input) {
			in.Handler = append(in.Handler, HandlerEvent{Event: "start", Task: "z", Fence: 1, Deps: []string{"h FAILED"}, AtUS: at(50).UnixMicro()})
		}, []string{"early_dependent"}},
		{"after-any dependent read its dependency wrong", func(in *Input) {
			in.Handler = append(in.Handler, HandlerEvent{Event: "start", Task: "z", Fence: 1, Deps: []string{"h SUCCEEDED"}, AtUS: at(350).UnixMicro()})
		}, []string{"early_dependent"}},
		{"child created and run after its parent's cancel", func(in *Input) {
			// Issue 18, item 1: the queued token of a child with no item
			// yet created it and ran it to SUCCEEDED.
			in.Records["q/2"] = succeeded("q/2", 1, entry(1, lease.StatusSucceeded))
			in.Writes = append(in.Writes, claim("q/2", 1, 1100, 4100), ending("q/2", 1, "SUCCEEDED", 1300))
			in.Handler = append(in.Handler, ran("q/2", 1, 1250)...)
		}, []string{"child_after_cancel"}},
		{"child taken over after its parent's cancel ran again", func(in *Input) {
			// q/1's worker died; the next claim ran the handler instead of
			// ending it CANCELLED.
			q1 := in.Records["q/1"]
			q1.Fence, q1.Attempt, q1.History = 2, 2, []lease.Attempt{entry(2, lease.StatusCancelled)}
			in.Records["q/1"] = q1
			var ws []Write
			for _, w := range in.Writes {
				if !(w.Task == "q/1" && w.Status == "CANCELLED") {
					ws = append(ws, w)
				}
			}
			in.Writes = append(ws, claim("q/1", 2, 4000, 7000), ending("q/1", 2, "CANCELLED", 4500))
			in.Handler = append(in.Handler, HandlerEvent{Event: "start", Task: "q/1", Fence: 2, Attempt: 2, AtUS: at(4010).UnixMicro()})
		}, []string{"child_after_cancel"}},
		{"cancel failed", func(in *Input) {
			in.Workflows.Cancels = append(in.Workflows.Cancels, CancelCall{Task: "p", Sent: at(100), Returned: at(200), Err: "cancel p: its child p/1: timeout"})
		}, []string{"cancel_failed"}},
		{"a step recorded twice", func(in *Input) {
			// Issue 18, item 2: the SDK's retry of a checkpoint whose
			// answer was lost appended the step again.
			s := in.Records["s"]
			s.Steps = append(s.Steps, s.Steps[1])
			in.Records["s"] = s
		}, []string{"step_twice"}},
		{"a recorded step ran again", func(in *Input) {
			in.Handler = append(in.Handler, HandlerEvent{Event: "step", Task: "s", Fence: 2, Attempt: 2, Step: "s0", Phase: "run", Run: "r4", AtUS: at(330).UnixMicro()})
		}, []string{"step_rerun"}},
		{"a step recorded without its run", func(in *Input) {
			s := in.Records["s"]
			s.Steps = []lease.Step{s.Steps[0], {Name: "s1", Result: []byte(`{"run":"r9","fence":2}`)}}
			in.Records["s"] = s
		}, []string{"step_unrun"}},
		{"a step task succeeded without a step", func(in *Input) {
			s := in.Records["s"]
			s.Steps = s.Steps[:1]
			in.Records["s"] = s
		}, []string{"step_unrun"}},
		{"a sleep woke its task on time", func(in *Input) {
			sleepBetween(in, at(105))
		}, nil},
		{"a step after a sleep ran before its wake-up", func(in *Input) {
			sleepBetween(in, at(315)) // s1's first run was at 110
		}, []string{"early_wake"}},
		{"client told accepted, nothing landed", func(in *Input) {
			in.Workflows.Answers = append(in.Workflows.Answers, CallbackAnswer{Task: "c", Fence: 1, Via: "client", Accepted: true})
		}, []string{"callback_lost"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := cleanWorkflows()
			tc.fault(&in)
			wantOnly(t, Check(in), tc.want...)
		})
	}
}

// sleepBetween makes the step task s sleep between its steps s0 and s1,
// with the wake-up its sleep step records.
func sleepBetween(in *Input, wake time.Time) {
	s := in.Records["s"]
	s.Steps = []lease.Step{s.Steps[0], {Name: "sleep#1", Result: []byte(strconv.FormatInt(wake.UnixMilli(), 10))}, s.Steps[1]}
	in.Records["s"] = s
	in.Workflows.Sleeps = map[string]int{"s": 0}
}

// TestCheckOrders: the order checks pass a clean order and flag each way
// one can go wrong.
func TestCheckOrders(t *testing.T) {
	t.Parallel()
	steps := func(names ...string) []lease.Step {
		out := make([]lease.Step, len(names))
		for i, n := range names {
			out[i] = lease.Step{Name: n, Result: []byte(`1`)}
		}
		return out
	}
	clean := func() (Input, map[string][]Write) {
		in := Input{Records: map[string]lease.Task{
			"o":        {ID: "o", Status: lease.StatusSucceeded, Steps: steps("s0", "children:pack", "s1", "callback:approval", "sleep#1", "s2")},
			"o/pack/0": {ID: "o/pack/0", Status: lease.StatusSucceeded},
			"o/pack/1": {ID: "o/pack/1", Status: lease.StatusFailed},
		}}
		in.Workflows = &Workflows{Orders: map[string][]string{"o": {"o/pack/0", "o/pack/1"}}, ChildN: map[string]int{"o/pack/0": 5, "o/pack/1": 6},
			Answers: []CallbackAnswer{{Task: "o", Fence: 2, Via: "client", Accepted: true}}}
		in.Handler = []HandlerEvent{{Event: "packed", Task: "o", Fence: 2, Kids: []string{"o/pack/0 SUCCEEDED 5", "o/pack/1 FAILED -1"}}}
		ws := map[string][]Write{"o": {
			{Task: "o", Status: "RUNNING", Fence: 2, FromWaiting: true},
			{Task: "o", Status: "PENDING", Fence: 2, FromWaiting: true, Worker: ClientName, Steps: []string{"s0", "children:pack", "s1", "callback:approval"}},
		}}
		return in, ws
	}
	run := func(in Input, ws map[string][]Write) (WorkflowReport, []string) {
		var flagged []string
		clientAccepted := map[callbackWait]int{}
		for _, a := range in.Workflows.Answers {
			if a.Via == "client" && a.Accepted {
				clientAccepted[callbackWait{a.Task, a.Fence}]++
			}
		}
		var r WorkflowReport
		checkOrders(in, ws, clientAccepted, &r, func(kind, _ string) { flagged = append(flagged, kind) })
		return r, flagged
	}
	if r, flagged := run(clean()); len(flagged) > 0 || r.Orders != 1 || r.OrdersDone != 1 || r.OrderResumes != 1 {
		t.Fatalf("clean order: flagged %v, report %+v", flagged, r)
	}
	for _, tc := range []struct {
		name  string
		fault func(in *Input, ws map[string][]Write)
		want  string
	}{
		{"resumed twice from its children", func(_ *Input, ws map[string][]Write) {
			ws["o"] = append(ws["o"], Write{Task: "o", Status: "RUNNING", Fence: 3, FromWaiting: true})
		}, "bad_resume"},
		{"answer recorded twice", func(_ *Input, ws map[string][]Write) {
			ws["o"] = append(ws["o"], Write{Task: "o", Status: "PENDING", Fence: 2, FromWaiting: true, Worker: "w1", Steps: []string{"callback:approval"}})
		}, "callback_double_accept"},
		{"client told accepted, a worker's write landed", func(_ *Input, ws map[string][]Write) {
			ws["o"][1].Worker = "w1"
		}, "callback_lost"},
		{"missed a child", func(in *Input, _ map[string][]Write) {
			in.Handler[0].Kids = in.Handler[0].Kids[:1]
		}, "child_missed"},
		{"an await's step twice", func(in *Input, _ map[string][]Write) {
			o := in.Records["o"]
			o.Steps = append(o.Steps, lease.Step{Name: "children:pack"})
			in.Records["o"] = o
		}, "step_unrun"},
	} {
		in, ws := clean()
		tc.fault(&in, ws)
		if _, flagged := run(in, ws); len(flagged) != 1 || flagged[0] != tc.want {
			t.Errorf("%s: flagged %v, want [%s]", tc.name, flagged, tc.want)
		}
	}
}
