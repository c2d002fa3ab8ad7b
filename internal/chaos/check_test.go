package chaos

import (
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
)

// The checks must catch what they claim to catch: each case below builds the
// evidence of a run with one known fault and expects exactly its violation.

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// claim is an applied claim (or renewal) of fence f, answered at ms, holding
// the lease until untilMS.
func claim(task string, f int64, ms, untilMS int) Write {
	return Write{Task: task, Op: "UpdateItem", Status: "RUNNING", Fence: f, Attempt: int(f), Owner: "w",
		LeaseUntil: at(untilMS), Forwarded: at(ms - 5), Answered: at(ms)}
}

// ending is an applied write ending fence f with status, forwarded at ms.
func ending(task string, f int64, status string, ms int) Write {
	return Write{Task: task, Op: "UpdateItem", Status: status, Fence: f, Attempt: int(f), Forwarded: at(ms), Answered: at(ms + 5)}
}

func ran(task string, f int64, endMS int) []HandlerEvent {
	return []HandlerEvent{
		{Event: "start", Task: task, Fence: f, Attempt: int(f), AtUS: at(endMS - 50).UnixMicro()},
		{Event: "end", Task: task, Fence: f, Attempt: int(f), Outcome: "ok", AtUS: at(endMS).UnixMicro()},
	}
}

func succeeded(task string, f int64, history ...lease.Attempt) lease.Task {
	return lease.Task{ID: task, Status: lease.StatusSucceeded, Fence: f, Attempt: int(f), MaxAttempts: 20, History: history}
}

func entry(f int64, s lease.Status) lease.Attempt {
	return lease.Attempt{Attempt: int(f), Fence: f, Status: s}
}

func clean() Input {
	return Input{
		Valid:     []string{"a"},
		Records:   map[string]lease.Task{"a": succeeded("a", 1, entry(1, lease.StatusSucceeded))},
		Writes:    []Write{claim("a", 1, 0, 3000), ending("a", 1, "SUCCEEDED", 500)},
		Handler:   ran("a", 1, 450),
		Metrics:   []MetricEvent{{Task: "a", Attempt: 1, Outcome: "succeeded", Worker: "w0g1"}},
		Malformed: []string{"not json"},
		DLQ:       []DeadLetter{{Body: "not json", Reason: "malformed token: ..."}},
		Stderr:    map[string]string{"w0g1": `{"level":"INFO","msg":"task succeeded"}`},
		Now:       at(10_000),
	}
}

func wantOnly(t *testing.T, r *Report, kinds ...string) {
	t.Helper()
	got := map[string]bool{}
	for _, v := range r.Violations {
		k, _, _ := strings.Cut(v, ":")
		got[k] = true
	}
	for _, k := range kinds {
		if !got[k] {
			t.Errorf("no %s violation; violations: %q", k, r.Violations)
		}
		delete(got, k)
	}
	for k := range got {
		t.Errorf("unexpected %s violation; violations: %q", k, r.Violations)
	}
}

func TestCheckClean(t *testing.T) {
	r := Check(clean())
	wantOnly(t, r)
	if r.Succeeded != 1 || r.MalformedOK != 1 || r.Executions != 1 {
		t.Errorf("report = %+v", r)
	}
}

func TestCheckTakeoverAfterExpiryIsFine(t *testing.T) {
	in := clean()
	// Fence 1 is claimed and renewed until 3000, its worker vanishes; fence 2
	// takes over at 3600 (after expiry plus skew) and finishes.
	in.Writes = []Write{claim("a", 1, 0, 3000), claim("a", 2, 3600, 6600), ending("a", 2, "SUCCEEDED", 4000)}
	in.Handler = append(ran("a", 2, 3900), HandlerEvent{Event: "start", Task: "a", Fence: 1, Attempt: 1, AtUS: at(10).UnixMicro()})
	in.Records["a"] = succeeded("a", 2, entry(2, lease.StatusSucceeded))
	in.Metrics = []MetricEvent{{Task: "a", Attempt: 2, Outcome: "succeeded"}}
	r := Check(in)
	wantOnly(t, r)
	if r.Takeovers != 1 {
		t.Errorf("takeovers = %d, want 1", r.Takeovers)
	}
}

func TestCheckReleaseThenClaimIsFine(t *testing.T) {
	in := clean()
	// Fence 1 releases the task for a retry at 500, long before its lease
	// would expire; fence 2 claims it at 700.
	in.Writes = []Write{claim("a", 1, 0, 3000), ending("a", 1, "PENDING", 500), claim("a", 2, 700, 3700), ending("a", 2, "SUCCEEDED", 900)}
	in.Handler = ran("a", 2, 850)
	in.Records["a"] = succeeded("a", 2, entry(1, lease.StatusPending), entry(2, lease.StatusSucceeded))
	in.Metrics = nil
	wantOnly(t, Check(in))
}

func TestCheckOverlap(t *testing.T) {
	in := clean()
	// Fence 2's claim was answered at 1000 while fence 1 held its lease
	// until 3000 and had not ended.
	in.Writes = []Write{claim("a", 1, 0, 3000), claim("a", 2, 1000, 4000), ending("a", 2, "SUCCEEDED", 1500)}
	in.Handler = ran("a", 2, 1400)
	in.Records["a"] = succeeded("a", 2, entry(2, lease.StatusSucceeded))
	in.Metrics = nil
	r := Check(in)
	wantOnly(t, r, "overlap")
	if r.Overlaps != 1 {
		t.Errorf("overlaps = %d", r.Overlaps)
	}
}

func TestCheckStaleFinish(t *testing.T) {
	in := clean()
	// Fence 2 took over; then the finish of fence 1 was accepted anyway.
	in.Writes = []Write{claim("a", 1, 0, 3000), claim("a", 2, 3600, 6600), ending("a", 1, "SUCCEEDED", 4000)}
	in.Handler = append(ran("a", 1, 3900), ran("a", 2, 6000)...)
	in.Records["a"] = succeeded("a", 1, entry(1, lease.StatusSucceeded))
	in.Records["a"] = lease.Task{ID: "a", Status: lease.StatusSucceeded, Fence: 2, Attempt: 2, History: []lease.Attempt{entry(1, lease.StatusSucceeded)}}
	in.Metrics = []MetricEvent{{Task: "a", Attempt: 1, Outcome: "succeeded"}}
	r := Check(in)
	wantOnly(t, r, "stale_accepted", "bad_history", "false_success")
	if r.StaleAccepted != 1 {
		t.Errorf("stale = %d", r.StaleAccepted)
	}
}

func TestCheckDoubleFinish(t *testing.T) {
	in := clean()
	in.Writes = append(in.Writes, ending("a", 1, "SUCCEEDED", 600))
	r := Check(in)
	wantOnly(t, r, "double_finish")
}

func TestCheckFinishWithoutRun(t *testing.T) {
	in := clean()
	in.Handler = in.Handler[:1] // started, never completed
	wantOnly(t, Check(in), "finish_without_run")
}

func TestCheckStuck(t *testing.T) {
	in := clean()
	in.Writes = []Write{claim("a", 1, 0, 3000), claim("a", 2, 3600, 6600)}
	in.Records["a"] = lease.Task{ID: "a", Status: lease.StatusRunning, Fence: 2, Attempt: 2, MaxAttempts: 20,
		LeaseOwner: "w1g1/m-2", LeaseUntil: at(6600)}
	in.Metrics = nil
	in.DLQ = append(in.DLQ, DeadLetter{Body: `{"v":1,"kind":"chaos","id":"a"}`})
	r := Check(in)
	wantOnly(t, r, "stuck")
	if r.Stuck != 1 || r.RedrivenValid != 1 {
		t.Errorf("stuck = %d, redriven = %d", r.Stuck, r.RedrivenValid)
	}
	if v := strings.Join(r.Violations, "\n"); !strings.Contains(v, "status=RUNNING") || !strings.Contains(v, "w1g1/m-2") ||
		!strings.Contains(v, "fence=2") || !strings.Contains(v, "redrive policy") {
		t.Errorf("stuck report lacks the details: %s", v)
	}
}

func TestCheckMissingTask(t *testing.T) {
	in := clean()
	in.Valid = append(in.Valid, "b")
	wantOnly(t, Check(in), "stuck")
}

func TestCheckMalformed(t *testing.T) {
	in := clean()
	in.DLQ = []DeadLetter{{Body: "not json"}} // moved by redrive: no reason
	wantOnly(t, Check(in), "malformed")
}

func TestCheckPanicsAndRaces(t *testing.T) {
	in := clean()
	in.Stderr["w1g2"] = "panic: boom\n\ngoroutine 1 [running]:\n"
	in.Stderr["w2g1"] = "==================\nWARNING: DATA RACE\nWrite at ...\n"
	in.Stderr["w3g1"] = `{"level":"ERROR","msg":"handler panicked","panic":"x"}`
	r := Check(in)
	wantOnly(t, r, "panic", "race")
	if r.Panics != 2 || r.Races != 1 {
		t.Errorf("panics = %d, races = %d", r.Panics, r.Races)
	}
}

func TestCheckHandlerPastLeaseIsInformation(t *testing.T) {
	in := clean()
	// Fence 1's worker was paused: its handler ended at 5000, after its
	// lease (3000); fence 2 took over and finished. Fencing made it harmless.
	in.Writes = []Write{claim("a", 1, 0, 3000), claim("a", 2, 3600, 6600), ending("a", 2, "SUCCEEDED", 4000)}
	in.Handler = append(ran("a", 1, 5000), ran("a", 2, 3900)...)
	in.Records["a"] = succeeded("a", 2, entry(2, lease.StatusSucceeded))
	in.Metrics = []MetricEvent{{Task: "a", Attempt: 1, Outcome: "lease_lost"}, {Task: "a", Attempt: 2, Outcome: "succeeded"}}
	r := Check(in)
	wantOnly(t, r)
	if r.HandlerPastLease != 1 || r.LeaseLost != 1 {
		t.Errorf("past lease = %d, lease lost = %d", r.HandlerPastLease, r.LeaseLost)
	}
}

func TestCheckStuckAfterFencedOutDelete(t *testing.T) {
	in := clean()
	// w0g1 claims fence 1 and is paused; w1g1 takes over with fence 2 from
	// a second delivery of the same message; w0g1 wakes up and deletes the
	// message; w1g1 is killed. The task is left RUNNING with no message.
	c1, c2 := claim("a", 1, 0, 3000), claim("a", 2, 4000, 7000)
	c1.Owner, c2.Owner = "w0g1/m1", "w1g1/m1"
	in.Writes = []Write{c1, c2}
	in.Records["a"] = lease.Task{ID: "a", Status: lease.StatusRunning, Fence: 2, Attempt: 2, MaxAttempts: 20, LeaseOwner: "w1g1/m1", LeaseUntil: at(7000)}
	in.Metrics = nil
	in.Deliveries = []Delivery{
		{MessageID: "m1", ReceiptHandle: "h1", Task: "a", ReceiveCount: 1, Worker: "w0g1", Answered: at(-10)},
		{MessageID: "m1", ReceiptHandle: "h2", Task: "a", ReceiveCount: 2, Worker: "w1g1", Answered: at(3990)},
	}
	in.Deletions = []Deletion{{ReceiptHandle: "h1", Worker: "w0g1", Forwarded: at(6000), Answered: at(6010)}}
	in.Fates = map[string][]string{"w1g1": {"SIGKILLed at 12:00:06.500"}}
	r := Check(in)
	wantOnly(t, r, "stuck")
	if v := strings.Join(r.Violations, "\n"); !strings.Contains(v, "holder w1g1: SIGKILLed at 12:00:06.500") {
		t.Errorf("stuck report does not say what became of the holder: %s", v)
	}
	if r.FencedOutDeletes != 1 {
		t.Errorf("fenced-out deletes = %d, want 1", r.FencedOutDeletes)
	}
	if v := strings.Join(r.Violations, "\n"); !strings.Contains(v, "deleted by w0g1") || !strings.Contains(v, "fenced out: fence 2 held by w1g1") {
		t.Errorf("stuck report lacks the message trail: %s", v)
	}
}

func TestCheckOwnDeleteIsNotFencedOut(t *testing.T) {
	in := clean()
	in.Writes[0].Owner = "w0g1/m1"
	in.Deliveries = []Delivery{{MessageID: "m1", ReceiptHandle: "h1", Task: "a", ReceiveCount: 1, Worker: "w0g1"}}
	in.Deletions = []Deletion{{ReceiptHandle: "h1", Worker: "w0g1", Forwarded: at(600), Answered: at(610)}}
	r := Check(in)
	wantOnly(t, r)
	if r.FencedOutDeletes != 0 {
		t.Errorf("fenced-out deletes = %d, want 0", r.FencedOutDeletes)
	}
}

func TestCheckStaleRelease(t *testing.T) {
	in := clean()
	// Fence 2 took over at 3600; a retry release of fence 1 was accepted at 4000.
	in.Writes = []Write{claim("a", 1, 0, 3000), claim("a", 2, 3600, 6600), ending("a", 1, "PENDING", 4000), ending("a", 2, "SUCCEEDED", 4500)}
	in.Handler = ran("a", 2, 4400)
	in.Records["a"] = succeeded("a", 2, entry(1, lease.StatusPending), entry(2, lease.StatusSucceeded))
	in.Metrics = nil
	r := Check(in)
	wantOnly(t, r, "stale_accepted")
	if r.StaleAccepted != 1 {
		t.Errorf("stale = %d, want 1", r.StaleAccepted)
	}
}
