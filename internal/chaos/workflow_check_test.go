package chaos

import (
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

	accept := Write{Task: "c", Op: "UpdateItem", Status: "SUCCEEDED", Fence: 1, FromWaiting: true, Worker: ClientName, Forwarded: at(700), Answered: at(705)}
	add(lease.Task{ID: "c", Status: lease.StatusSucceeded, Fence: 1, Attempt: 1, MaxAttempts: 20,
		History: []lease.Attempt{entry(1, lease.StatusWaiting), entry(1, lease.StatusSucceeded)}},
		[]Write{claim("c", 1, 0, 3000), ending("c", 1, "WAITING", 100), accept},
		[]HandlerEvent{
			{Event: "start", Task: "c", Fence: 1, AtUS: at(20).UnixMicro()},
			{Event: "callback", Task: "c", Fence: 1, Token: "lhcb1.x", AtUS: at(25).UnixMicro()},
			{Event: "end", Task: "c", Fence: 1, Outcome: "await", AtUS: at(30).UnixMicro()},
		})
	in.Expect = map[string]lease.Status{"p/1": lease.StatusFailed, "h": lease.StatusFailed, "d": lease.StatusCancelled}
	in.Workflows = &Workflows{
		Fans:      map[string][]string{"p": {"p/0", "p/1"}},
		ChildN:    map[string]int{"p/0": 7, "p/1": 8},
		After:     map[string][]string{"y": {"x"}, "d": {"h"}},
		Callbacks: map[string]bool{"c": true},
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
	if w.Parents != 1 || w.Children != 2 || w.ResumedRuns != 1 || w.Dependents != 2 || w.Cancelled != 1 ||
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
			in.Writes = append(in.Writes, Write{Task: "c", Op: "UpdateItem", Status: "SUCCEEDED", Fence: 1, FromWaiting: true, Worker: "w1g1", Forwarded: at(710), Answered: at(715)})
		}, []string{"callback_double_accept", "double_finish"}},
		{"a task ended otherwise than planned", func(in *Input) {
			in.Expect["h"] = lease.StatusCancelled // it ended FAILED
		}, []string{"wrong_end"}},
		{"callback task finished without its token handed out", func(in *Input) {
			var hs []HandlerEvent
			for _, h := range in.Handler {
				if !(h.Task == "c" && h.Event == "callback") {
					hs = append(hs, h)
				}
			}
			in.Handler = hs
		}, []string{"finish_without_run"}},
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
