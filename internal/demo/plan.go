package demo

import (
	"encoding/json"
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
	// viaSchedule: inline tokens sent by the schedule firer, one per slot,
	// as `leasehold run --schedule` (or EventBridge Scheduler) sends them.
	viaSchedule route = "schedule"
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
	// Workflows: wantResult is the exact result; wantFence the fence it
	// ends with (a resumed parent has 2); after names the planned task it
	// depends on, which must have finished first; callback: the demo
	// completes it with the CLI once it waits.
	wantResult string
	wantFence  int64
	after      string
	callback   bool
	// message is the topic a task receives on: once it has started its
	// receive, the demo sends it a message there, in the message form on
	// the work queue (a plain SendMessage). won is who must win a task's
	// race of a message against its receive's timeout ("message" or
	// "timeout"): the first word of its result.
	message string
	won     string
	// schedule: not one task but the slots of a schedule the demo fires
	// every scheduleEvery; it must see wantSlots of them SUCCEEDED, each
	// once.
	schedule  bool
	wantSlots int
}

// message builds a body: an intake submission and an inline token have the
// same fields, except that only a submission may ask for a delay.
func message(kind, payload string, extra string) func(id string) string {
	return func(id string) string {
		return fmt.Sprintf(`{"v":1,"kind":%q,"id":%q,"payload":%s%s}`, kind, id, payload, extra)
	}
}

// afterMessage is an inline token for a task that runs after the planned
// task dep (whose id shares this one's run prefix).
func afterMessage(kind, payload, self, dep string) func(id string) string {
	return func(id string) string {
		return fmt.Sprintf(`{"v":1,"kind":%q,"id":%q,"payload":%s,"after":[%q]}`, kind, id, payload, strings.TrimSuffix(id, self)+dep)
	}
}

// orderPayload is an "order" of n items that sleeps s seconds after its
// approval.
func orderPayload(n, s int) string {
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprintf("%q", fmt.Sprintf("item-%d", i+1))
	}
	return fmt.Sprintf(`{"items":[%s],"sleep_seconds":%d,"timeout_seconds":600}`, strings.Join(items, ","), s)
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
		{name: "fan-out", kind: "shout", via: viaWork, body: message("shout", `{"texts":["ada","grace","edsger","barbara","alan"]}`, ""),
			shows: "spawns 5 children, resumes once with all their results", want: succeeded, wantAttempts: 1, wantFence: 2,
			wantResult: `["ADA","GRACE","EDSGER","BARBARA","ALAN"]`},
		{name: "chain-1", kind: "upper", via: viaWork, body: message("upper", `{"text":"one"}`, ""),
			shows: "chain of 3, step 1", want: succeeded, wantAttempts: 1, wantResult: `"ONE"`},
		{name: "chain-2", kind: "upper", via: viaWork, body: afterMessage("upper", `{"text":"two"}`, "chain-2", "chain-1"), after: "chain-1",
			shows: "step 2: waits for chain-1", want: succeeded, wantAttempts: 1, wantResult: `"TWO"`},
		{name: "chain-3", kind: "upper", via: viaWork, body: afterMessage("upper", `{"text":"three"}`, "chain-3", "chain-2"), after: "chain-2",
			shows: "step 3: waits for chain-2", want: succeeded, wantAttempts: 1, wantResult: `"THREE"`},
		{name: "approval", kind: "approval", via: viaWork, body: message("approval", `{"timeout_seconds":120}`, ""), callback: true,
			shows: "waits for a callback: `leasehold complete`", want: succeeded, wantAttempts: 1, wantResult: `{"approved":true}`},
		{name: "remind", kind: "remind", via: viaIntake, body: message("remind", `{"name":"Ada","sleep_seconds":8}`, ""),
			shows: "step, durable sleep of 8s (no lease held), step", want: succeeded, wantAttempts: 1, minLatency: 8 * time.Second,
			wantResult: `"reminder for Ada, sent after 8s"`},
		{name: "order", kind: "order", via: viaIntake, body: message("order", orderPayload(50, 5), ""), callback: true,
			shows: "step, 50 children, step, approval callback, sleep 5s, step: four awaits in one handler", want: succeeded, wantAttempts: 1,
			wantFence: 4, minLatency: 5 * time.Second, wantResult: `"50 items packed (ITEM-1..ITEM-50), approved, shipped after 5s"`},
		{name: "signoff-yes", kind: "signoff", via: viaWork, body: message("signoff", `{"timeout_seconds":120}`, ""), message: "approve",
			shows: "a message or a 120s timeout, whichever comes first: the demo sends the message", want: succeeded, wantAttempts: 1,
			won: "message", wantResult: `"message won: approved by ops"`},
		{name: "signoff-no", kind: "signoff", via: viaWork, body: message("signoff", `{"timeout_seconds":3}`, ""),
			shows: "a message or a 3s timeout, whichever comes first: no message comes", want: succeeded, wantAttempts: 1,
			won: "timeout", minLatency: 3 * time.Second, wantResult: `"timeout won: no approval within 3s"`},
		{name: "tick", kind: "greet", via: viaSchedule, schedule: true, wantSlots: 2,
			shows: fmt.Sprintf("a schedule firing every %s: each slot runs once", scheduleEvery), want: succeeded},
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
	if p.after != "" {
		fmt.Fprintf(&b, ", after %s", p.after)
	}
	switch {
	case p.wantFence == 2:
		b.WriteString(", resumed once")
	case p.wantFence > 2:
		fmt.Fprintf(&b, ", resumed %d times", p.wantFence-1)
	}
	if p.callback {
		b.WriteString(", by callback")
	}
	if p.won != "" {
		fmt.Fprintf(&b, ", %s wins", p.won)
	}
	if p.schedule {
		fmt.Fprintf(&b, " x%d slots", p.wantSlots)
	}
	return b.String()
}

// sendForm is the message form of a message to workflow id on topic, as
// a plain `aws sqs send-message` to the work queue sends it.
func sendForm(id, topic string) string {
	return fmt.Sprintf(`{"v":1,"send":%q,"topic":%q,"message_id":"demo-approval","payload":{"by":"ops"}}`, id, topic)
}

// winner is who won a race task's race, from its result ("" for a task
// that has none): the first word of the result's text.
func winner(result string) string {
	var text string
	if json.Unmarshal([]byte(result), &text) != nil {
		return ""
	}
	w, _, _ := strings.Cut(text, " ")
	return w
}
