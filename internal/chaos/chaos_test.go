package chaos_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/internal/chaos"
	"github.com/leasehold/leasehold/internal/lease"
)

// Worker timing: short leases so that takeovers happen within seconds.
// receiveVisibility is the chaosworker's default CHAOS_RECEIVE_VISIBILITY.
const (
	receiveVisibility = 10 * time.Second
	leaseDuration     = 3 * time.Second
	renewBefore       = 1 * time.Second // renewal 2s after each claim or renewal
	clockSkew         = 500 * time.Millisecond
	callTimeout       = 30 * time.Second
)

// params are the knobs of one run, from LEASEHOLD_CHAOS_* variables.
type params struct {
	tasks, workers   int
	factor           float64
	faults           chaos.Faults
	pauseEvery       time.Duration
	seed             uint64
	dir              string
	keepDir          bool
	workerRace       bool
	dupEvery         int // every dupEvery-th valid token is sent twice
	stall, bound     time.Duration
	killMin, killMax time.Duration
	pauseFor         time.Duration
	// pauseLong is how long a child's holder is frozen
	// (freezeChildHolders): longer than the workers' receive visibility
	// plus a lease, so that the child is taken over before it wakes.
	pauseLong         time.Duration
	graceStop         time.Duration
	invocationTimeout time.Duration
	// workflows: send fan-outs, chains and callbacks too
	// (LEASEHOLD_CHAOS_WORKFLOWS=0 leaves them out); exitAfterFinish: the
	// probability that a worker exits right after ending a task somebody
	// waits for, before notifying (LEASEHOLD_CHAOS_EXIT_AFTER_FINISH).
	workflows       bool
	exitAfterFinish float64
	// freezeChildren: freeze the workers that claim children, 14 s at a
	// time, and have the worker that takes such a child over exit right
	// after its finish (CHAOS_DOOMED; LEASEHOLD_CHAOS_FREEZE_CHILDREN=0
	// leaves it out).
	freezeChildren bool
	// deploys: switch the workers to v2 of the kind "deploy" while its
	// tasks sleep, and back (LEASEHOLD_CHAOS_DEPLOY=0 leaves it out).
	deploys bool
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return n
}

func envFloat(t *testing.T, name string, def float64) float64 {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 {
		t.Fatalf("%s=%q: want a non-negative number", name, s)
	}
	return f
}

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive duration", name, s)
	}
	return d
}

func scaled(d time.Duration, f float64) time.Duration { return time.Duration(float64(d) * f) }

func readParams(t *testing.T) params {
	p := params{
		tasks:   envInt(t, "LEASEHOLD_CHAOS_TASKS", 200),
		workers: envInt(t, "LEASEHOLD_CHAOS_WORKERS", 4),
		factor:  envFloat(t, "LEASEHOLD_CHAOS_TIME_FACTOR", 1),
		faults: chaos.Faults{
			ResetBefore: envFloat(t, "LEASEHOLD_CHAOS_RESET_BEFORE", 0.03),
			ResetAfter:  envFloat(t, "LEASEHOLD_CHAOS_RESET_AFTER", 0.03),
			Delay:       envFloat(t, "LEASEHOLD_CHAOS_DELAY", 0.25),
			MaxDelay:    envDuration(t, "LEASEHOLD_CHAOS_MAX_DELAY", 150*time.Millisecond),
		},
		killMin:           2 * time.Second,
		killMax:           5 * time.Second,
		pauseFor:          2 * leaseDuration,
		pauseLong:         receiveVisibility + leaseDuration + time.Second,
		dupEvery:          25,
		workerRace:        raceEnabled,
		graceStop:         45 * time.Second,
		invocationTimeout: 30 * time.Second,
	}
	if p.factor == 0 {
		p.factor = 1
	}
	p.workflows = os.Getenv("LEASEHOLD_CHAOS_WORKFLOWS") != "0"
	// A full-size run has some 160 children: 0.1 still fires a dozen times
	// or more, without restarting workers every few seconds.
	defExit := 0.3
	if p.tasks >= 1000 {
		defExit = 0.1
	}
	p.exitAfterFinish = envFloat(t, "LEASEHOLD_CHAOS_EXIT_AFTER_FINISH", defExit)
	if p.exitAfterFinish > 1 {
		t.Fatalf("LEASEHOLD_CHAOS_EXIT_AFTER_FINISH=%v: want a probability", p.exitAfterFinish)
	}
	p.freezeChildren = p.workflows && os.Getenv("LEASEHOLD_CHAOS_FREEZE_CHILDREN") != "0"
	p.deploys = p.workflows && os.Getenv("LEASEHOLD_CHAOS_DEPLOY") != "0"
	if err := p.faults.Validate(); err != nil {
		t.Fatal(err)
	}
	// A full-size run pauses a worker every ~20s; a CI-size run is shorter,
	// so it pauses more often to see several pauses.
	defPause := 10 * time.Second
	if p.tasks >= 1000 {
		defPause = 20 * time.Second
	}
	p.pauseEvery = envDuration(t, "LEASEHOLD_CHAOS_PAUSE_EVERY", defPause)
	if s := os.Getenv("LEASEHOLD_CHAOS_WORKER_RACE"); s != "" {
		p.workerRace = s == "1"
	}
	p.seed = rand.Uint64()
	if s := os.Getenv("LEASEHOLD_CHAOS_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("LEASEHOLD_CHAOS_SEED=%q: %v", s, err)
		}
		p.seed = n
	}
	// Waits are bounded by conditions: the run ends once every valid task
	// is terminal, or when nothing has progressed for stall, or at bound.
	// The stall outlasts the longest quiet a healthy run can have: a task
	// held a second time after a deploy waits two minutes
	// (lifecycle.MinDivergedHold doubled) with nothing else left to move.
	p.stall = scaled(3*time.Minute, p.factor)
	p.bound = scaled(max(5*time.Minute, time.Duration(p.tasks)*500*time.Millisecond), p.factor)
	if p.workflows {
		// The sliding map's slots each run their share of its children
		// (twice the run's tasks) one after another, 50-150 ms of work
		// each plus the claims, finishes and reports through the faults,
		// the kills and the pauses (a killed holder's child waits for its
		// message to come back): allow 15 s per child on a slot, and a
		// minute more. (A full-size run measured about 20 s a child on a
		// slot while the rest of the run went on, and met the old 5 s
		// bound, 12m40s, with the map three quarters done and no
		// violation; the stall check still ends a run that stops moving.)
		p.bound += scaled(time.Minute+time.Duration(mapChildren(p.tasks)/mapConc)*15*time.Second, p.factor)
	}
	p.dir = os.Getenv("LEASEHOLD_CHAOS_DIR")
	if p.dir != "" {
		p.keepDir = true
		abs, err := filepath.Abs(filepath.Join(p.dir, time.Now().UTC().Format("20060102-150405")))
		if err != nil {
			t.Fatal(err)
		}
		p.dir = abs
		if err := os.MkdirAll(p.dir, 0o755); err != nil {
			t.Fatal(err)
		}
	} else {
		p.dir = t.TempDir()
	}
	return p
}

// TestChaos sends tasks through a fleet of worker processes that are killed,
// paused and restarted while a proxy delays and resets their AWS calls, and
// checks that nothing is lost: see docs/chaos.md.
func TestChaos(t *testing.T) {
	needChaos(t)
	cfg := awstest.Config(t)
	p := readParams(t)
	t.Logf("chaos: seed=%d tasks=%d workers=%d faults=%+v dir=%s", p.seed, p.tasks, p.workers, p.faults, p.dir)

	r := startRig(t, cfg, p)
	table, queues, ddb, sq, ledger, fleet := r.table, r.queues, r.ddb, r.sq, r.ledger, r.fleet

	// The callbacks the workers hand out are answered as they come, several
	// times each, through the client and as messages.
	// The test's client (callbacks, cancels) records its writes too.
	client := callbackClient(t, cfg, strings.TrimRight(os.Getenv("AWS_ENDPOINT_URL_DYNAMODB"), "/"), ledger, table, queues.Work)
	plan := makePlan(p)
	ans := &answerer{t: t, dir: p.dir, sq: sq, queue: queues.Work, answered: map[string]bool{}, offsets: map[string]int{}, client: client,
		races: plan.workflows.wf.Races}
	ansCtx, stopAnswers := context.WithCancel(context.Background())
	ansDone := make(chan struct{})
	go func() {
		defer close(ansDone)
		ans.run(ansCtx)
	}()
	endAnswers := func() {
		stopAnswers()
		<-ansDone
	}
	t.Cleanup(endAnswers)

	// Each inbox gets its messages once it has started, across the
	// kills and pauses.
	msgCtx, stopMessages := context.WithCancel(context.Background())
	msgsDone := make(chan []chaos.MessageSend, 1)
	go func() {
		m := &messenger{client: client, sq: sq, queue: queues.Work, seed: p.seed ^ 31}
		msgsDone <- m.run(msgCtx, ledger, plan.workflows.wf.Inboxes)
	}()
	var sends []chaos.MessageSend
	msgsEnded := false
	endMessages := func() {
		if !msgsEnded {
			msgsEnded = true
			stopMessages()
			sends = <-msgsDone
		}
	}
	t.Cleanup(endMessages)
	// Every other parent's suspension kills a worker while its children run.
	fanInCtx, stopFanIn := context.WithCancel(context.Background())
	fanInKills := make(chan int, 1)
	go func() { fanInKills <- killDuringFanIn(fanInCtx, t, ledger, fleet, plan.workflows.wf.Fans, p.seed) }()
	fanInKilled := -1
	endFanIn := func() {
		if fanInKilled < 0 {
			stopFanIn()
			fanInKilled = <-fanInKills
		}
	}
	t.Cleanup(endFanIn)
	// Workers that claim a child are frozen until another worker takes
	// the child over (and may exit right after finishing it).
	freezeCtx, stopFreezes := context.WithCancel(context.Background())
	freezes := make(chan int, 1)
	go func() {
		if !p.freezeChildren {
			freezes <- 0
			return
		}
		freezes <- freezeChildHolders(freezeCtx, ledger, fleet, doomedFile(p), p.pauseLong, 2*p.pauseLong)
	}()
	childFreezes := -1
	endFreezes := func() {
		if childFreezes < 0 {
			stopFreezes()
			childFreezes = <-freezes
		}
	}
	t.Cleanup(endFreezes)
	// Some parents are cancelled once suspended, at once or while their
	// children run.
	cancelCtx, stopCancels := context.WithCancel(context.Background())
	cancelsDone := make(chan []chaos.CancelCall, 1)
	go func() { cancelsDone <- cancelParents(cancelCtx, ledger, client, plan.workflows.cancel) }()
	var cancels []chaos.CancelCall
	cancelsEnded := false
	endCancels := func() {
		if !cancelsEnded {
			cancelsEnded = true
			stopCancels()
			cancels = <-cancelsDone
		}
	}
	t.Cleanup(endCancels)

	// The deploy tasks go first, so that they are asleep early; the
	// fleet switches to v2 under them and back.
	var dp deployPlan
	deploysDone := make(chan chaos.Deploys, 1)
	deployCtx, stopDeploys := context.WithCancel(context.Background())
	if p.deploys {
		dp = makeDeploys(p, rand.New(rand.NewPCG(p.seed, p.seed^99)))
		plan.valid = append(plan.valid, dp.valid...)
		go func() { deploysDone <- runDeploys(deployCtx, t, ledger, fleet, sq, queues.Work, dp) }()
	}
	var deploys *chaos.Deploys
	endDeploys := func() {
		stopDeploys()
		if p.deploys && deploys == nil {
			d := <-deploysDone
			deploys = &d
		}
	}
	t.Cleanup(endDeploys)

	started := time.Now()
	sendAll(t, sq, queues.Work, dp.inflight)
	sendAll(t, sq, queues.Work, plan.messages)
	wp := plan.workflows
	t.Logf("chaos: sent %d messages (%d valid tasks, %d duplicates, %d malformed; workflows: %d parents (%d to cancel), %d children, %d dependents (%d after-any), %d callback tasks, %d step tasks) in %s",
		len(plan.messages), len(plan.valid), plan.duplicates, len(plan.malformed), len(wp.wf.Fans), len(wp.cancel), len(wp.wf.ChildN),
		len(wp.wf.After), len(wp.wf.AfterAny), len(wp.wf.Callbacks), len(wp.wf.Steps), time.Since(started).Round(time.Millisecond))

	cancelledKids := map[string]string{}
	for parent := range wp.cancel {
		for _, kid := range wp.wf.Fans[parent] {
			cancelledKids[kid] = parent
		}
	}
	waitTerminal(t, ddb, table, plan.valid, cancelledKids, p)
	endAnswers()
	endMessages()
	endCancels()
	endFanIn()
	endFreezes()
	endDeploys()
	r.end()
	duration := time.Since(started)

	ev := r.gather(t, plan.valid, plan.malformed)
	records, dlq, writes, deliveries, deletions := ev.in.Records, ev.in.DLQ, ev.in.Writes, ev.in.Deliveries, ev.in.Deletions
	rejected, unknown, cut := ev.rejected, ev.unknown, ev.cut
	in := ev.in
	in.Expect = wp.expect
	if p.workflows {
		wf := wp.wf
		wf.Answers = ans.result()
		wf.Cancels = cancels
		wf.Deploys = deploys
		wf.Sends = sends
		if deploys != nil {
			// Their steps are checked as the step tasks' are: s0, s1 (and
			// "audit" under version 1), the sleep, s2.
			for id := range deploys.Tasks {
				wf.Steps[id], wf.Sleeps[id] = 3, 1
				if deploys.Fresh[id] {
					wf.Steps[id] = 4
				}
			}
		}
		in.Workflows = &wf
		// A parent the cancel found waiting must end CANCELLED; one it
		// only marked (resumed already) may finish first (freeEnds).
		for _, c := range cancels {
			if c.Err == "" && c.Status == string(lease.StatusCancelled) {
				in.Expect[c.Task] = lease.StatusCancelled
			}
		}
	}
	rep := chaos.Check(in)
	w := rep.Workflow
	// The listing: every single task listed once, no task twice.
	listed, err := listings(t.Context(), ddb, table)
	if err != nil {
		rep.Violations = append(rep.Violations, "listing: could not list every task: "+err.Error())
	}
	var unlisted, twice []string
	for _, id := range plan.singles {
		if _, ok := records[id]; ok && listed[id] != 1 {
			unlisted = append(unlisted, fmt.Sprintf("%s (%d times)", id, listed[id]))
		}
	}
	for id, n := range listed {
		if n > 1 {
			twice = append(twice, id)
		}
	}
	if len(unlisted) > 0 {
		rep.Violations = append(rep.Violations, fmt.Sprintf("unlisted: %d single tasks not listed once: %v", len(unlisted), unlisted[:min(len(unlisted), 25)]))
	}
	if len(twice) > 0 {
		rep.Violations = append(rep.Violations, fmt.Sprintf("listed_twice: %d tasks listed more than once: %v", len(twice), twice[:min(len(twice), 25)]))
	}
	if p.workflows && fanInKilled == 0 {
		rep.Violations = append(rep.Violations, "kills_during_fan_in: no parent's suspension was seen, so no worker was killed during a fan-in")
	}
	if p.workflows && w.CancelledParents == 0 {
		rep.Violations = append(rep.Violations, "cancelled_parents: no parent was cancelled while it waited: the cancel check saw nothing")
	}
	if p.workflows && w.Slept == 0 {
		rep.Violations = append(rep.Violations, "slept: no step task slept and succeeded: the sleep check saw nothing")
	}
	if p.workflows && w.Map.Done == 0 {
		rep.Violations = append(rep.Violations, "maps_done: the sliding map did not succeed with its children counted: the map check saw nothing")
	}
	if p.workflows && w.OrdersDone == 0 {
		rep.Violations = append(rep.Violations, "orders_done: no order (several awaits in one handler) succeeded: the order check saw nothing")
	}
	if o := w.Ops; p.workflows && (o.BranchDone == 0 || o.RaceByCallback == 0 || o.RaceByTimer == 0 || o.MsgReceived == 0) {
		rep.Violations = append(rep.Violations, fmt.Sprintf("ops_seen: want branches done, races won by a callback and by a timer, and messages received, each at least once: %d, %d, %d, %d: a check saw nothing",
			o.BranchDone, o.RaceByCallback, o.RaceByTimer, o.MsgReceived))
	}
	if p.workflows && p.exitAfterFinish > 0 && w.ExitAfterChild == 0 {
		rep.Violations = append(rep.Violations, "exit_after_child: no worker exited after a child's finish and before its notify: the fault never fired")
	}
	if p.freezeChildren && p.tasks >= 1000 && w.ExitBesideStale == 0 {
		// (A CI-size run freezes a few child holders only: it may see none.)
		rep.Violations = append(rep.Violations, "exits_beside_stale: no worker exited after finishing a child it took over from a frozen holder: the interleaving never happened")
	}

	kills, stops := fleet.Counts()
	wfPart, dw, o := "", w.Deploy, w.Ops
	if p.workflows {
		sqsRejected := 0
		for _, d := range dlq {
			if d.Reason != "" && strings.Contains(d.Body, `"callback":`) {
				sqsRejected++
			}
		}
		wfPart = fmt.Sprintf("parents=%d children=%d bad_resume=%d child_missed=%d resumed_runs=%d kills_during_fan_in=%d(on_suspension=%d) dependents=%d early_dependent=%d cancelled_dependents=%d "+
			"callback_tasks=%d callback_waits=%d callback_sent=%d callback_accepted=%d(client=%d) callback_double_accept=%d callback_lost=%d callback_rejected_client=%d callback_rejected_sqs=%d(dlq copies) callback_timeouts=%d callback_errors=%d "+
			"cancel_calls=%d cancelled_parents=%d cancel_late=%d cancel_failed=%d child_after_cancel=%d kids_cancelled=%d kids_never_created=%d kids_ran_first=%d "+
			"step_tasks=%d step_twice=%d step_rerun=%d step_unrun=%d step_runs=%d step_failures=%d step_redone=%d step_checkpoints=%d(lost_answers=%d) slept=%d early_wake=%d "+
			"orders=%d orders_done=%d order_resumes=%d map_children=%d maps_done=%d map_conc=%d map_max_running=%d(loose=%d,handlers=%d) map_over_conc=%d map_child_twice=%d map_summary=%d map_failed=%d map_exits_after_end=%d map_child_runs=%d map_parent_runs=%d map_resumes=%d map_per_child=%d "+
			"exits_after_finish=%d exits_after_child=%d exits_beside_stale=%d(child_freezes=%d) exits_restarted=%d "+
			"deploy_tasks=%d deploy_switch=%s diverged=%d held=%d(holds=%d) resumed=%d diverged_runs=%d holds_lost=%d held_wrong=%d unheld=%d wrong_summary=%d wrong_version=%d v2_runs=%d ",
			w.Parents, w.Children, w.BadResume, w.ChildMissed, w.ResumedRuns, w.KillsDuringFanIn, fanInKilled, w.Dependents, w.EarlyDependent, w.Cancelled,
			w.CallbackTasks, w.CallbackWaits, w.CallbackSent, w.CallbackAccept, w.CallbackByCli, w.CallbackDouble, w.CallbackLost, w.CallbackReject, sqsRejected, w.CallbackTimeout, w.CallbackErrors,
			w.CancelCalls, w.CancelledParents, w.CancelLate, w.CancelFailed, w.ChildAfterCancel, w.KidsCancelled, w.KidsNeverCreated, w.KidsRanFirst,
			w.StepTasks, w.StepTwice, w.StepRerun, w.StepUnrun, w.StepRuns, w.StepFailures, w.StepRedone, w.StepCheckpoints, w.StepLostAnswers, w.Slept, w.EarlyWake,
			w.Orders, w.OrdersDone, w.OrderResumes, w.Map.Children, w.Map.Done, w.Map.Conc, w.Map.MaxRunning, w.Map.MaxRunningLoose, w.Map.MaxHandlers, w.Map.OverConc, w.Map.ChildTwice, w.Map.BadSummary, w.Map.Failed, w.Map.Exits, w.Map.ChildRuns, w.Map.ParentRuns, w.Map.Resumes, w.Map.PerChild,
			w.ExitAfterFinish, w.ExitAfterChild, w.ExitBesideStale, childFreezes, fleet.Exits(),
			dw.Tasks, switchText(deploys, started), dw.Diverged, dw.Held, dw.Holds, dw.Resumed, dw.DivergedRuns, dw.HoldsLost, dw.HeldWrong, dw.Unheld, dw.WrongSummary, dw.WrongVersion, dw.V2Runs)
		wfPart += fmt.Sprintf("branch_tasks=%d branches_done=%d branch_step_twice=%d branch_step_rerun=%d branch_step_unrun=%d branch_step_runs=%d branch_step_redone=%d branch_step_failures=%d "+
			"race_tasks=%d race_by_callback=%d race_by_timer=%d race_twice=%d race_changed=%d race_late_accepted=%d race_late_rejected=%d race_runs=%d "+
			"inboxes=%d msg_sent=%d msg_received=%d msg_twice=%d msg_lost=%d msg_order=%d msg_unsent=%d msg_seq_changed=%d msg_dup_sends=%d msg_via_sqs=%d msg_redone=%d msg_send_errors=%d ",
			o.BranchTasks, o.BranchDone, o.BranchTwice, o.BranchRerun, o.BranchUnrun, o.BranchRuns, o.BranchRedone, o.BranchFailures,
			o.RaceTasks, o.RaceByCallback, o.RaceByTimer, o.RaceTwice, o.RaceChanged, o.RaceLateAccepted, o.RaceLateRejected, o.RaceRuns,
			o.InboxTasks, o.MsgSent, o.MsgReceived, o.MsgTwice, o.MsgLost, o.MsgOrder, o.MsgUnsent, o.MsgSeqChanged, o.MsgDupSends, o.MsgViaSQS, o.MsgRedone, sendErrors(sends))
	}
	summary := fmt.Sprintf("chaos: tasks=%d succeeded=%d stuck=%d wrong_end=%d double_finish=%d overlaps=%d stale_accepted=%d "+
		"finish_without_run=%d false_success=%d bad_history=%d malformed_ok=%d/%d panics=%d races=%d %s"+
		"kills=%d stops=%d requests=%d resets_before=%d resets_after=%d delayed=%d upstream_errors=%d executions=%d takeovers=%d lease_lost=%d "+
		"handler_past_lease=%d fenced_out_deletes=%d redriven_valid=%d deliveries=%d deletes=%d writes=%d rejected_writes=%d unknown_writes=%d cut_lines=%d seed=%d duration=%s",
		rep.Tasks, rep.Succeeded, rep.Stuck, rep.WrongEnd, rep.DoubleFinish, rep.Overlaps, rep.StaleAccepted,
		rep.FinishWithoutRun, rep.FalseSuccess, rep.BadHistory, rep.MalformedOK, rep.Malformed, rep.Panics, rep.Races, wfPart,
		kills, stops, r.totals.Requests, r.totals.ResetsBefore, r.totals.ResetsAfter, r.totals.Delayed, r.totals.UpstreamErrors,
		rep.Executions, rep.Takeovers, rep.LeaseLost,
		rep.HandlerPastLease, rep.FencedOutDeletes, rep.RedrivenValid, len(deliveries), len(deletions), len(writes), rejected, unknown, cut, p.seed, duration.Round(time.Second))
	summary += fmt.Sprintf(" listed=%d unlisted=%d listed_twice=%d", len(listed), len(unlisted), len(twice))
	fmt.Println(summary)
	report := summary + "\n" + strings.Join(rep.Violations, "\n") + "\n"
	if err := os.WriteFile(filepath.Join(p.dir, "report.txt"), []byte(report), 0o644); err != nil {
		t.Logf("chaos: write report: %v", err)
	}
	if rep.Failed() {
		where := "rerun with LEASEHOLD_CHAOS_DIR=<dir> to keep the evidence"
		if p.keepDir {
			where = "evidence in " + p.dir
		}
		t.Errorf("chaos: %d violation(s) (%s):\n%s\n%s", len(rep.Violations), where, summary, strings.Join(rep.Violations, "\n"))
	}
}

// switchText says when the workers switched to v2 and back, as offsets
// from the run's start ("v2@12s-v1@47s"), or "none".
func switchText(d *chaos.Deploys, start time.Time) string {
	if d == nil || d.ToV2.IsZero() {
		return "none"
	}
	return fmt.Sprintf("v2@%s-v1@%s", d.ToV2.Sub(start).Round(time.Second), d.ToV1.Sub(start).Round(time.Second))
}
