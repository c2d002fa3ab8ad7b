package demo

import (
	"fmt"
	"strings"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
)

// route is the queue a demo task is sent to.
type route string

const (
	// viaIntake: a submission on the intake queue, stored and dispatched
	// by the dispatcher (as Client.Enqueue or `leasehold enqueue` would).
	viaIntake route = "intake"
	// viaWork: an inline dispatch token on the work queue, as a plain
	// `aws sqs send-message` would send it.
	viaWork route = "work queue"
)

// deadLettered is the pseudo-state of a message that names no task and was
// forwarded to the work queue's dead-letter queue.
const deadLettered = "DEAD-LETTERED"

// planned is one message the demo sends and what must become of it.
type planned struct {
	name string // shown; the task id is the run's prefix plus name
	kind string
	via  route
	// body is the message body, given the task id.
	body func(id string) string
	// shows says what the task demonstrates.
	shows string

	// What must become of it.
	want         string // a lease.Status, or deadLettered
	wantAttempts int    // exact attempts (0 for a dead-lettered message)
	minRenewals  int    // lease renewals seen while it ran
	minLatency   time.Duration
}

// message builds a body: an intake submission and an inline token have the
// same fields, except that only a submission may ask for a delay.
func message(kind, payload string, extra string) func(id string) string {
	return func(id string) string {
		return fmt.Sprintf(`{"v":1,"kind":%q,"id":%q,"payload":%s%s}`, kind, id, payload, extra)
	}
}

// plan is the demo's mix of tasks. slow and delay come from the Config.
func plan(slow, delay time.Duration) []planned {
	succeeded, failed := string(lease.StatusSucceeded), string(lease.StatusFailed)
	return []planned{
		{name: "greet-ada", kind: "greet", via: viaIntake, body: message("greet", `{"name":"Ada"}`, ""),
			shows: "succeeds at once", want: succeeded, wantAttempts: 1},
		{name: "greet-grace", kind: "greet", via: viaWork, body: message("greet", `{"name":"Grace"}`, ""),
			shows: "succeeds at once (inline token)", want: succeeded, wantAttempts: 1},
		{name: "upper", kind: "upper", via: viaIntake, body: message("upper", `{"text":"leasehold"}`, ""),
			shows: "succeeds at once", want: succeeded, wantAttempts: 1},
		{name: "flaky-2", kind: "flaky", via: viaIntake, body: message("flaky", `{"succeed_on_attempt":2}`, `,"max_attempts":4`),
			shows: "fails once, retried with backoff", want: succeeded, wantAttempts: 2},
		{name: "flaky-3", kind: "flaky", via: viaWork, body: message("flaky", `{"succeed_on_attempt":3}`, `,"max_attempts":4`),
			shows: "fails twice, retried with backoff", want: succeeded, wantAttempts: 3},
		{name: "doomed", kind: "flaky", via: viaIntake, body: message("flaky", `{"succeed_on_attempt":0}`, `,"max_attempts":3`),
			shows: "fails every attempt: FAILED for good", want: failed, wantAttempts: 3},
		{name: "nameless", kind: "greet", via: viaWork, body: message("greet", `{"name":""}`, ""),
			shows: "handler returns Fail: no retry", want: failed, wantAttempts: 1},
		{name: "slow", kind: "sleep", via: viaIntake,
			body:  message("sleep", fmt.Sprintf(`{"seconds":%g}`, slow.Seconds()), ""),
			shows: "outlives its lease: renewed while it runs", want: succeeded, wantAttempts: 1, minRenewals: 2},
		{name: "delayed", kind: "greet", via: viaIntake,
			body:  message("greet", `{"name":"later"}`, fmt.Sprintf(`,"delay_seconds":%d`, int(delay/time.Second))),
			shows: fmt.Sprintf("delayed %s at submission", delay), want: succeeded, wantAttempts: 1, minLatency: delay},
		{name: "malformed", kind: "-", via: viaWork,
			// Cut off mid-document: no task can be named from it.
			body:  func(id string) string { return `{"v":1,"kind":"greet","id":"` + id + `","payload":{"name":"Bob` },
			shows: "malformed JSON: dead-lettered with its reason", want: deadLettered},
	}
}

// expectation describes want in words for the summary.
func (p planned) expectation() string {
	var b strings.Builder
	b.WriteString(p.want)
	if p.wantAttempts > 0 {
		fmt.Fprintf(&b, " after %d", p.wantAttempts)
	}
	if p.minRenewals > 0 {
		fmt.Fprintf(&b, ", >=%d renewals", p.minRenewals)
	}
	if p.minLatency > 0 {
		fmt.Fprintf(&b, ", not before %s", p.minLatency)
	}
	return b.String()
}
