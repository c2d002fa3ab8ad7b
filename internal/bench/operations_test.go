package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/workflow"
)

// What each durable operation costs on its own (issue 37, point 9;
// docs/performance.md, "Each operation's cost"): one task kind, "op",
// runs the operation its payload names and then one step ("last"), and
// each operation's cost is that workflow's minus the same workflow
// without it (the op "none": its create, claim, step and finish), both
// counted by the meter as the workflow shapes are.

// The generated block of the operations' table, in the file
// LEASEHOLD_BENCH_OUT names (docs/performance.md), apart from the main one
// so that it sits next to the text that explains it.
const (
	opsBeginMark = "<!-- bench:operations:begin (make bench writes this part) -->"
	opsEndMark   = "<!-- bench:operations:end -->"
)

// opPayload names the operation an "op" task runs; Run counts its runs
// under ContinueAsNew.
type opPayload struct {
	Op  string `json:"op"`
	Run int    `json:"run,omitempty"`
}

// opTries counts the calls of a function per task and name: a step's
// tries and a condition's checks, which fail the first so many times.
var opTries sync.Map // string -> *atomic.Int32

// opTry counts a call of the function name of task id and returns its
// number (1 for the first).
func opTry(id, name string) int {
	c, _ := opTries.LoadOrStore(id+"/"+name, new(atomic.Int32))
	return int(c.(*atomic.Int32).Add(1))
}

// Operations' parameters: a sleep and a race's timer short enough for the
// bench, a poll at one check a second, a retry within the process.
const (
	opSleep = time.Second
	// opLateRetry is past the 5 s a policy waits out in the process: the
	// retry is a durable snooze.
	opLateRetry = 6 * time.Second
	opPoll      = time.Second
	opTopic     = "inbox"
	opEvent     = "progress"
)

var errTransient = errors.New("transient")

// handleOperations registers the "op" kind with hs.
func (h *harness) handleOperations(hs *leasehold.Handlers) {
	leasehold.Handle(hs, "op", func(ctx context.Context, t *leasehold.Task[opPayload]) (echo, error) {
		if err := h.operation(ctx, t); err != nil {
			return echo{}, err
		}
		n, err := workflow.Step(ctx, "last", func(context.Context) (int, error) { return 1, nil })
		return echo{N: n}, err
	})
}

// operation runs the operation t's payload names.
func (h *harness) operation(ctx context.Context, t *leasehold.Task[opPayload]) error {
	one := func(context.Context) (int, error) { return 1, nil }
	policy := workflow.StepPolicy{MaxAttempts: 3, Initial: 10 * time.Millisecond}
	switch op := t.Payload.Op; op {
	case "none":
		return nil
	case "step":
		_, err := workflow.Step(ctx, "x", one)
		return err
	case "policy step":
		_, err := workflow.Step(ctx, "x", one, policy)
		return err
	case "policy step, one retry", "at-most-once step, one retry", "policy step, one late retry":
		switch op {
		case "at-most-once step, one retry":
			policy.AtMostOnce = true
		case "policy step, one late retry":
			policy.Initial = opLateRetry
		}
		_, err := workflow.Step(ctx, "x", func(context.Context) (int, error) {
			if opTry(t.ID, "x") == 1 {
				return 0, errTransient
			}
			return 1, nil
		}, policy)
		return err
	case "at-most-once step":
		policy.AtMostOnce = true
		_, err := workflow.Step(ctx, "x", one, policy)
		return err
	case "sleep":
		return workflow.Sleep(ctx, opSleep)
	case "callback":
		_, err := workflow.WaitForCallback[echo](ctx, "approval", callbackTimeout(), h.handOut(t.ID))
		return err
	case "race":
		// The approval's own timeout is an hour: the race's timer, a
		// second, decides it, and its deadline is the wait's.
		approval := workflow.CallbackAsync[echo](ctx, "approval", time.Hour, func(context.Context, string) error { return nil })
		timer := workflow.SleepAsync(ctx, opSleep)
		first, err := workflow.Race(ctx, "decision", approval, timer)
		if err == nil && first != 1 {
			err = leasehold.Fail(fmt.Errorf("race: %d won, want the timer", first))
		}
		return err
	case "async pair":
		a, b := workflow.StepAsync(ctx, "a", one), workflow.StepAsync(ctx, "b", one)
		return workflow.AwaitAll(ctx, "both", a, b)
	case "parallel":
		fs, err := workflow.Parallel(ctx, "pair", workflow.MapOptions{}, map[string]func(context.Context) (int, error){"a": one, "b": one})
		if err != nil {
			return err
		}
		_, err = fs["a"].Get(ctx)
		return err
	case "child context":
		_, err := workflow.RunInChildContext(ctx, "sub", one)
		return err
	case "invoke":
		_, err := workflow.Invoke[echo](ctx, "child", workflow.Child{Kind: "echo", Payload: echo{N: 1}})
		return err
	case "receive":
		_, ok, err := workflow.Receive[echo](ctx, opTopic, time.Minute)
		if err == nil && !ok {
			err = leasehold.Fail(errors.New("receive: no message"))
		}
		return err
	case "event":
		return workflow.SetEvent(ctx, opEvent, echo{N: 1})
	case "poll met", "poll 2 unmet":
		unmet := 0
		if op == "poll 2 unmet" {
			unmet = 2
		}
		_, err := workflow.WaitFor(ctx, "ready", workflow.Poll{Min: opPoll, Max: opPoll}, func(context.Context) (int, bool, error) {
			return 1, opTry(t.ID, "ready") > unmet, nil
		})
		return err
	case "continue as new":
		if t.Payload.Run == 0 {
			return workflow.ContinueAsNew(ctx, opPayload{Op: op, Run: 1})
		}
		return nil
	default:
		return leasehold.Fail(fmt.Errorf("no operation %q", op))
	}
}

// handOut hands a callback token of task id to the harness, which
// answers it (runWorkflows, for a shape with callback set).
func (h *harness) handOut(id string) func(ctx context.Context, tok string) error {
	return func(ctx context.Context, tok string) error {
		select {
		case h.callbacks <- callbackToken{id: id, token: tok}:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// opShape is the workflow of one "op" task running op.
func opShape(op string) shape {
	s := shape{
		name: "op " + op,
		start: func(h *harness, id string) []string {
			h.enqueue(leasehold.Submission{Kind: "op", Payload: opPayload{Op: op}, ID: id})
			return []string{id}
		},
	}
	switch op {
	case "callback":
		s.callback = true
	case "receive":
		// The message is sent before the task runs: its Receive finds it
		// waiting.
		s.start = func(h *harness, id string) []string {
			h.enqueue(leasehold.Submission{Kind: "op", Payload: opPayload{Op: op}, ID: id})
			ctx, cancel := context.WithTimeout(h.t.Context(), awstest.Scale(10*time.Second))
			defer cancel()
			if _, err := h.client.Send(ctx, id, opTopic, echo{N: 1}); err != nil {
				h.t.Fatalf("Send: %v", err)
			}
			return []string{id}
		}
	case "event":
		// The event is read once the workflow has set it: one read.
		s.after = func(h *harness, ids []string) {
			for _, id := range ids {
				ctx, cancel := context.WithTimeout(h.t.Context(), awstest.Scale(10*time.Second))
				_, err := h.client.GetEvent(ctx, id, opEvent, 0)
				cancel()
				if err != nil {
					h.t.Fatalf("GetEvent %s: %v", id, err)
				}
			}
		}
	}
	return s
}

// operation is one row of the table: the API it prices, the workflow with
// it and the one without, how many of it the difference holds, and its
// bound in write units (the design's, docs/performance.md).
type operation struct {
	name, api  string
	with, base shape
	per        float64 // operations in the difference (1 unless said)
	mostWU     float64 // write units an operation may cost
	// durableOps is what durable functions would bill for it, as this
	// page counts their operations: 0 where they have no such operation,
	// -1 where their bill for it is not known here.
	durableOps float64
}

// operations is the table's rows.
func operations() []operation {
	none, step, policy, poll := opShape("none"), opShape("step"), opShape("policy step"), opShape("poll met")
	return []operation{
		{name: "step", api: "`workflow.Step`", with: step, base: none, mostWU: 1, durableOps: 1},
		{name: "a policy step's retry, in the process", api: "`workflow.StepPolicy`", with: opShape("policy step, one retry"), base: policy, durableOps: -1},
		{name: "a policy step's retry, at most once", api: "`StepPolicy{AtMostOnce: true}`", with: opShape("at-most-once step, one retry"), base: opShape("at-most-once step"), mostWU: 1, durableOps: -1},
		{name: "a policy step's retry after a delay over 5 s", api: "`workflow.StepPolicy`", with: opShape("policy step, one late retry"), base: policy, mostWU: 5, durableOps: -1},
		{name: "sleep", api: "`workflow.Sleep`", with: opShape("sleep"), base: none, mostWU: 5, durableOps: 1},
		{name: "callback wait and its answer", api: "`workflow.WaitForCallback`, `Client.CompleteCallback`", with: opShape("callback"), base: none, mostWU: 5, durableOps: 2},
		{name: "race of a callback and a timer (the timer wins)", api: "`CallbackAsync`, `SleepAsync`, `Race`", with: opShape("race"), base: none, mostWU: 7, durableOps: 3},
		{name: "2 async steps awaited together", api: "`StepAsync` ×2, `AwaitAll`", with: opShape("async pair"), base: none, mostWU: 3, durableOps: 3},
		{name: "parallel of 2 branches", api: "`workflow.Parallel`", with: opShape("parallel"), base: none, mostWU: 3, durableOps: 3},
		{name: "child context", api: "`workflow.RunInChildContext`", with: opShape("child context"), base: none, mostWU: 1, durableOps: 1},
		{name: "invoke a child", api: "`workflow.Invoke`", with: opShape("invoke"), base: none, mostWU: 8, durableOps: 2},
		{name: "message sent and received (waiting)", api: "`Client.Send`, `workflow.Receive`", with: opShape("receive"), base: none, mostWU: 6},
		{name: "event set and read", api: "`workflow.SetEvent`, `Client.GetEvent`", with: opShape("event"), base: none, mostWU: 2},
		{name: "condition check (per unmet poll)", api: "`workflow.WaitFor`", with: opShape("poll 2 unmet"), base: poll, per: 2, mostWU: 4, durableOps: -1},
		{name: "continue as new", api: "`workflow.ContinueAsNew`", with: opShape("continue as new"), base: none, mostWU: 5},
		{name: "map, per child", api: "`workflow.Map` (50 at a time)", with: mapped(200, 50), base: mapped(100, 50), per: 100, mostWU: 3.5, durableOps: 1},
	}
}

// opResult is an operation's marginal cost, per operation.
type opResult struct {
	op               operation
	runs             int
	wu, failed, ru   float64 // failed: write units of failed conditions
	sqs, invocations float64
}

// check holds r to its design: an operation costs at most its bound in
// write units, and at least half of it. One over its bound costs more than
// docs/performance.md says; one under half of it did not run as designed
// (an operation whose bound is 0 must write nothing).
func (r opResult) check() error {
	const slack = 0.05 // float sums of whole units
	if r.wu < r.op.mostWU/2-slack || r.wu > r.op.mostWU+slack {
		return fmt.Errorf("%s: %.2f write units an operation, want from %.2f to %.1f (docs/performance.md, \"Each operation's cost\")", r.op.name, r.wu, r.op.mostWU/2, r.op.mostWU)
	}
	return nil
}

// TestOperationBounds checks check without the stack: TestCost's rows
// fail above their bound and below half of it.
func TestOperationBounds(t *testing.T) {
	for _, c := range []struct {
		wu, most float64
		ok       bool
	}{{1, 1, true}, {2, 1, false}, {0, 1, false}, {0.5, 1, true}, {5, 5, true}, {5.5, 5, false}, {2, 5, false}, {0, 0, true}, {1, 0, false}} {
		err := opResult{op: operation{name: "op", mostWU: c.most}, wu: c.wu}.check()
		if (err == nil) != c.ok {
			t.Errorf("%.1f write units against a bound of %.1f: error %v, want ok %v", c.wu, c.most, err, c.ok)
		}
	}
	// Every row has a bound the design gives, and a name and an API.
	for _, op := range operations() {
		if op.name == "" || op.api == "" || op.mostWU < 0 {
			t.Errorf("row %+v: a name, an API and a bound of at least 0 wanted", op)
		}
	}
}

// cost is the result's price per million operations, with the prices of
// the workflows' table.
func (r opResult) cost() float64 {
	return 1e6 * (r.wu*priceWRU + r.failed*priceWRU + r.ru*priceRRU + r.sqs*priceSQS + r.invocations*lambdaInvocation)
}

// cleanWU splits a workflow's write units into those of writes that
// landed and those of failed conditions (a timeout token that finds its
// task ended, a redelivered token that finds it taken, an SDK retry whose
// first try landed), per workflow.
func cleanWU(r workflowResult) (landed, failed float64) {
	for kind, us := range r.counts.ByWrite {
		var sum float64
		for _, u := range us {
			sum += u
		}
		if strings.HasPrefix(kind, "failed condition") {
			failed += sum
		} else {
			landed += sum
		}
	}
	return r.per(landed), r.per(failed)
}

// batchedSQS is r's SQS requests per workflow as a deployment makes them:
// each send as counted, and for each message delivered a tenth of a
// receive, of a delete and of the worker's read of the queue's tags (an
// event source mapping's batches of ten). The harness's own receives come
// short of ten at random, which would move an operation's requests by
// half a request from run to run.
func batchedSQS(r workflowResult) float64 {
	var sends float64
	for op, c := range r.counts.Calls {
		switch op {
		case "SQS ReceiveMessage", "SQS DeleteMessageBatch", "SQS ListQueueTags":
		default:
			if strings.HasPrefix(op, "SQS ") {
				sends += float64(c)
			}
		}
	}
	return r.per(sends) + 3*r.per(float64(r.delivered))/lambdaBatch
}

// kindsDiff lists the writes by kind that with makes per operation beyond
// base's, for the log.
func kindsDiff(with, base workflowResult, per float64) string {
	kinds := map[string]bool{}
	for k := range with.counts.ByWrite {
		kinds[k] = true
	}
	for k := range base.counts.ByWrite {
		kinds[k] = true
	}
	var parts []string
	for k := range kinds {
		d := (with.per(sum(with.counts.ByWrite[k])) - base.per(sum(base.counts.ByWrite[k]))) / per
		if d > 0.005 || d < -0.005 {
			parts = append(parts, fmt.Sprintf("%s %+.2f", k, d))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

func sum(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s
}

// runOperations measures every operation, runs workflows of each shape
// (each base once, shared), and checks each against its bound. A shape
// already run (known: TestCost's map of 100, the base of the map's row)
// is not run again.
func (h *harness) runOperations(t *testing.T, runs int, known ...workflowResult) []opResult {
	measured := map[string]workflowResult{}
	for _, r := range known {
		measured[r.w.name] = r
	}
	measure := func(s shape) workflowResult {
		if r, ok := measured[s.name]; ok {
			return r
		}
		n := runs
		if s.runs > 0 {
			n = s.runs
		}
		s.perRound = n
		r := h.runWorkflows(s, n)
		measured[s.name] = r
		return r
	}
	var out []opResult
	for _, op := range operations() {
		with, base := measure(op.with), measure(op.base)
		per := op.per
		if per == 0 {
			per = 1
		}
		wu1, f1 := cleanWU(with)
		wu0, f0 := cleanWU(base)
		r := opResult{op: op, runs: with.n,
			wu: (wu1 - wu0) / per, failed: (f1 - f0) / per, ru: (with.per(with.counts.RU) - base.per(base.counts.RU)) / per,
			sqs: (batchedSQS(with) - batchedSQS(base)) / per, invocations: (with.invocations() - base.invocations()) / per}
		t.Logf("%s: %.2f write units (%.2f in failed conditions), %.2f read units, %.2f SQS requests, %.2f invocations; $%.2f per million; writes by kind: %s",
			op.name, r.wu, r.failed, r.ru, r.sqs, r.invocations, r.cost(), kindsDiff(with, base, per))
		if err := r.check(); err != nil {
			t.Error(err)
		}
		out = append(out, r)
	}
	return out
}

// renderOperations is the generated table of the operations.
func renderOperations(rs []opResult) string {
	var b strings.Builder
	b.WriteString("\n| operation | API | runs | write units | failed conditions (WU) | read units | SQS requests | Lambda invocations | $ per million | bound (WU) | durable functions: operations, $ per million |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		durable := "no such operation"
		if r.op.durableOps < 0 {
			durable = "not known"
		}
		if r.op.durableOps > 0 {
			durable = fmt.Sprintf("%.0f, $%.2f", r.op.durableOps, 1e6*r.op.durableOps*(priceDurableOp+durableOpBytes/1e9*priceDurableGB))
		}
		fmt.Fprintf(&b, "| %s | %s | %d | **%.2f** | %.2f | %.2f | %.2f | %.2f | **$%.2f** | %.1f | %s |\n",
			r.op.name, r.op.api, r.runs, r.wu, r.failed, r.ru, r.sqs, r.invocations, r.cost(), r.op.mostWU, durable)
	}
	fmt.Fprintf(&b, "\nPer operation: the workflow with it minus the same workflow without it, over the runs shown; write units of writes that landed (a failed condition is shown apart, and priced). Prices (us-east-1, list, as in the tables under Measured): DynamoDB $%.3f per million write and $%.3f per million read request units, SQS $%.2f per million requests (each send, and a tenth each of a receive, a delete and a read of the queue's tags per message delivered, as an event source mapping's batches of ten make them), a Lambda invocation $%.4f per million (a tenth per message delivered). Durable functions: $%.0f per million operations and %d B of data each at $%.2f per GB.\n",
		priceWRU*1e6, priceRRU*1e6, priceSQS*1e6, lambdaInvocation*1e6, priceDurableOp*1e6, durableOpBytes, priceDurableGB)
	return b.String()
}

// replaceBlock replaces the part of the file out between begin and end
// with report.
func replaceBlock(t *testing.T, out, begin, end, report string) {
	t.Helper()
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("%s has no %q ... %q part", out, begin, end)
	}
	doc = doc[:i+len(begin)] + "\n" + report + doc[j:]
	if err := os.WriteFile(out, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
}
