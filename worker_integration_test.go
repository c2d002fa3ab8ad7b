package leasehold_test

// Integration tests of the worker against the local AWS stack: real
// DynamoDB conditional writes and real SQS visibility and redelivery, through
// the SDK. Each test has its own table and queues (internal/awstest).

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/dynamo"
	"github.com/leasehold/leasehold/internal/lease/leasetest"
	"github.com/leasehold/leasehold/internal/lifecycle"
	"github.com/leasehold/leasehold/internal/token"
)

// stackEnv is one test's slice of the local stack.
type stackEnv struct {
	cfg    aws.Config
	table  string
	queues awstest.Queues
	sqs    *sqs.Client
	store  *dynamo.Store
}

func setupStack(t *testing.T) *stackEnv {
	t.Helper()
	cfg := awstest.Config(t)
	e := &stackEnv{cfg: cfg, table: awstest.NewTable(t, cfg), queues: awstest.NewQueues(t, cfg), sqs: sqs.NewFromConfig(cfg)}
	e.store = dynamo.New(dynamodb.NewFromConfig(cfg), e.table, lease.Options{})
	return e
}

// worker builds a worker on e's table and queues, with cfg's handlers and
// settings (a test logger unless cfg names one).
func (e *stackEnv) worker(t *testing.T, cfg leasehold.WorkerConfig) *leasehold.Worker {
	t.Helper()
	cfg.AWS, cfg.Table, cfg.QueueURL, cfg.DeadLetterQueueURL = e.cfg, e.table, e.queues.Work, e.queues.WorkDLQ
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	w, err := leasehold.NewWorker(cfg)
	if err != nil {
		t.Fatalf("NewWorker: %v", err)
	}
	return w
}

func testLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", t.Name())
	}
	return slog.New(slog.DiscardHandler)
}

func call(t *testing.T) (context.Context, context.CancelFunc) {
	return context.WithTimeout(t.Context(), awstest.Scale(10*time.Second))
}

func (e *stackEnv) send(t *testing.T, url, body string) string {
	t.Helper()
	ctx, cancel := call(t)
	defer cancel()
	out, err := e.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(body)})
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	return aws.ToString(out.MessageId)
}

// receive long-polls up to max messages, as the event source mapping does,
// and returns them as a Lambda event.
func (e *stackEnv) receive(t *testing.T, url string, max int32, wait time.Duration, visibility int32) events.SQSEvent {
	t.Helper()
	return awstest.ReceiveEvent(t, e.sqs, url, max, wait, visibility)
}

// receiveSome is receive for a test that knows messages are there: a loaded
// emulator can answer a poll empty, so an empty answer is retried while the
// queue counts visible messages, within a bound scaled by
// LEASEHOLD_TEST_TIMESCALE.
func (e *stackEnv) receiveSome(t *testing.T, url string, max int32, wait time.Duration, visibility int32) events.SQSEvent {
	t.Helper()
	deadline := time.Now().Add(awstest.Scale(20 * time.Second))
	for {
		ev := e.receive(t, url, max, wait, visibility)
		if len(ev.Records) > 0 || time.Now().After(deadline) {
			return ev
		}
		ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(10*time.Second))
		out, err := e.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
			QueueUrl:       aws.String(url),
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages},
		})
		cancel()
		if err != nil {
			t.Fatalf("queue attributes: %v", err)
		}
		if out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)] == "0" {
			return ev
		}
	}
}

// deliver runs one batch through the worker and deletes what it acknowledged,
// as Lambda's event source mapping does.
func (e *stackEnv) deliver(t *testing.T, w *leasehold.Worker, ctx context.Context, ev events.SQSEvent) events.SQSEventResponse {
	t.Helper()
	resp, err := w.HandleSQS(ctx, ev)
	if err != nil {
		t.Fatalf("HandleSQS: %v", err)
	}
	failed := map[string]bool{}
	for _, f := range resp.BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	for _, r := range ev.Records {
		if failed[r.MessageId] {
			continue
		}
		dctx, cancel := call(t)
		_, err := e.sqs.DeleteMessage(dctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(e.queues.Work), ReceiptHandle: aws.String(r.ReceiptHandle)})
		cancel()
		if err != nil {
			t.Fatalf("delete: %v", err)
		}
	}
	return resp
}

// pump delivers work-queue batches until done reports true or the budget runs out.
func (e *stackEnv) pump(t *testing.T, w *leasehold.Worker, budget time.Duration, done func() bool) {
	t.Helper()
	e.pumpHiding(t, w, budget, 30, done)
}

// pumpHiding is pump with each receive hiding its messages for visibility
// seconds: a short one keeps a lost receive's answer from hiding the
// messages a test waits on for long (awstest.Receive waits it out).
func (e *stackEnv) pumpHiding(t *testing.T, w *leasehold.Worker, budget time.Duration, visibility int32, done func() bool) {
	t.Helper()
	deadline := time.Now().Add(awstest.Scale(budget))
	for !done() {
		if time.Now().After(deadline) {
			t.Fatalf("not done after %s", budget)
		}
		ev := e.receive(t, e.queues.Work, 10, time.Second, visibility)
		if len(ev.Records) > 0 {
			e.deliver(t, w, t.Context(), ev)
		}
	}
}

func (e *stackEnv) get(t *testing.T, id string) lease.Task {
	t.Helper()
	ctx, cancel := call(t)
	defer cancel()
	task, err := e.store.Get(ctx, id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return task
}

// status is the task's status, or "" while it does not exist yet.
func (e *stackEnv) status(t *testing.T, id string) lease.Status {
	t.Helper()
	ctx, cancel := call(t)
	defer cancel()
	task, err := e.store.Get(ctx, id)
	if errors.Is(err, lease.ErrNotFound) {
		return ""
	}
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return task.Status
}

func (e *stackEnv) setVisibilityTimeout(t *testing.T, url string, secs int) {
	t.Helper()
	ctx, cancel := call(t)
	defer cancel()
	_, err := e.sqs.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{
		QueueUrl:   aws.String(url),
		Attributes: map[string]string{"VisibilityTimeout": strconv.Itoa(secs)},
	})
	if err != nil {
		t.Fatalf("set visibility timeout: %v", err)
	}
}

func inlineBody(t *testing.T, kind, id string, payload any, maxAttempts int) string {
	t.Helper()
	raw, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	body, err := token.Inline(kind, id, raw, maxAttempts)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

type empty struct{}

func TestInlineHappyPathIsTwoWritesNoReads(t *testing.T) {
	t.Parallel()
	e := setupStack(t)
	var counter leasetest.CallCounter
	e.cfg.APIOptions = append(e.cfg.APIOptions, counter.APIOption())
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "add", func(_ context.Context, task *leasehold.Task[[]int]) (int, error) {
		sum := 0
		for _, n := range task.Payload {
			sum += n
		}
		return sum, nil
	})
	w := e.worker(t, leasehold.WorkerConfig{Handlers: hs})
	e.send(t, e.queues.Work, inlineBody(t, "add", "sum-1", []int{1, 2, 3}, 0))
	ev := e.receiveSome(t, e.queues.Work, 1, 5*time.Second, 30)
	if len(ev.Records) != 1 {
		t.Fatalf("received %d messages", len(ev.Records))
	}
	before := counter.Snapshot()
	resp := e.deliver(t, w, t.Context(), ev)
	after := counter.Snapshot()
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures: %+v", resp.BatchItemFailures)
	}
	delta := map[string]int{}
	for op, n := range after {
		if d := n - before[op]; d > 0 {
			delta[op] = d
		}
	}
	delete(delta, "DeleteMessage") // the test's own ack, as the event source mapping would
	// The pause check: at most one ListQueueTags per queue every 2 s per
	// worker, so one for this worker's first batch and none per task.
	if n := delta["ListQueueTags"]; n > 1 {
		t.Errorf("%d ListQueueTags for one batch of one queue, want at most 1 (cached for 2 s)", n)
	}
	delete(delta, "ListQueueTags")
	want := map[string]int{"PutItem": 1, "UpdateItem": 1}
	if fmt.Sprint(delta) != fmt.Sprint(want) {
		t.Errorf("AWS calls for one inline task = %v, want exactly %v (2 DynamoDB writes, no reads, no SQS calls but the pause check)", delta, want)
	}
	if got := e.get(t, "sum-1"); got.Status != lease.StatusSucceeded || string(got.Result) != "6" {
		t.Errorf("stored %s %s", got.Status, got.Result)
	}
}

// slowWorker sets the work queue's own visibility timeout to 2 units and
// returns a worker on a 2-unit lease renewed a unit before expiry (margin a
// unit, skew half of one), whose kind "slow" returns "done" after run: only
// the renewals' visibility extensions keep a running message hidden.
func (e *stackEnv) slowWorker(t *testing.T, unit, run time.Duration) *leasehold.Worker {
	t.Helper()
	e.setVisibilityTimeout(t, e.queues.Work, int(2*unit/time.Second))
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "slow", func(ctx context.Context, task *leasehold.Task[empty]) (string, error) {
		timer := time.NewTimer(run)
		defer timer.Stop()
		select {
		case <-timer.C:
			return "done", nil
		case <-ctx.Done():
			return "", context.Cause(ctx)
		}
	})
	return e.worker(t, leasehold.WorkerConfig{Handlers: hs, LeaseDuration: 2 * unit, RenewBefore: unit, VisibilityMargin: unit, ClockSkew: unit / 2})
}

func TestLongTaskKeepsLeaseAndMessageHidden(t *testing.T) {
	t.Parallel()
	e := setupStack(t)
	// A 2s lease renewed 1s before expiry, for a task of 6s: three leases long.
	// The queue's own visibility timeout is 2s, so only the renewals'
	// visibility extensions keep the message hidden. Every duration is
	// stretched by LEASEHOLD_TEST_TIMESCALE: on a loaded machine the receive,
	// the claim and the first renewal together may take longer than 2s, and
	// the test would then measure the machine, not the renewals.
	unit := awstest.Scale(time.Second)
	w := e.slowWorker(t, unit, 6*unit)
	var renewalsSeen atomic.Int64
	e.send(t, e.queues.Work, inlineBody(t, "slow", "long-1", empty{}, 0))
	ev := e.receiveSome(t, e.queues.Work, 1, 5*time.Second, int32(2*unit/time.Second))
	if len(ev.Records) != 1 {
		t.Fatalf("received %d messages", len(ev.Records))
	}

	done := make(chan events.SQSEventResponse, 1)
	go func() { done <- e.deliver(t, w, t.Context(), ev) }()

	// Meanwhile another receiver polls the queue: it must see nothing, and
	// the stored lease must keep moving forward.
	var lastUntil time.Time
	for running := true; running; {
		select {
		case resp := <-done:
			if len(resp.BatchItemFailures) != 0 {
				t.Fatalf("failures: %+v", resp.BatchItemFailures)
			}
			running = false
		default:
			// The message itself, not a second copy of the send (SQS
			// delivers at least once; the SDK resends when an answer is
			// lost), must stay hidden.
			for _, r := range e.receive(t, e.queues.Work, 10, time.Second, 30).Records {
				if r.MessageId == ev.Records[0].MessageId {
					t.Fatalf("message became visible to another receiver while the task ran")
				}
			}
			if task := e.get(t, "long-1"); task.Status == lease.StatusRunning && task.LeaseUntil.After(lastUntil) {
				if !lastUntil.IsZero() {
					renewalsSeen.Add(1)
				}
				lastUntil = task.LeaseUntil
			}
		}
	}
	got := e.get(t, "long-1")
	if got.Status != lease.StatusSucceeded || got.Attempt != 1 || got.Fence != 1 {
		t.Fatalf("stored %s attempt %d fence %d, want one successful attempt", got.Status, got.Attempt, got.Fence)
	}
	if n := renewalsSeen.Load(); n < 2 {
		t.Errorf("saw the lease move forward %d times, want at least 2 renewals", n)
	}
}

// The long tasks of one batch keep their messages hidden with
// ChangeMessageVisibilityBatch calls that carry all of them, not one
// ChangeMessageVisibility per message and renewal, on the real API.
func TestLongTasksOfOneBatchShareVisibilityCalls(t *testing.T) {
	t.Parallel()
	e := setupStack(t)
	var counter leasetest.CallCounter
	e.cfg.APIOptions = append(e.cfg.APIOptions, counter.APIOption())
	unit := awstest.Scale(time.Second)
	w := e.slowWorker(t, unit, 5*unit)
	const n = 3
	var bodies []string
	for i := range n {
		bodies = append(bodies, inlineBody(t, "slow", fmt.Sprintf("batch-long-%d", i), empty{}, 0))
		e.send(t, e.queues.Work, bodies[i])
	}
	ev := awstest.ReceiveN(t, e.sqs, e.queues.Work, n, 20*time.Second, int32(2*unit/time.Second), awstest.Bodies(bodies...))
	ours := map[string]bool{}
	for _, r := range ev.Records {
		ours[r.MessageId] = true
	}

	done := make(chan events.SQSEventResponse, 1)
	go func() { done <- e.deliver(t, w, t.Context(), ev) }()
	for running := true; running; {
		select {
		case resp := <-done:
			if len(resp.BatchItemFailures) != 0 {
				t.Fatalf("failures: %+v", resp.BatchItemFailures)
			}
			running = false
		default:
			for _, r := range e.receive(t, e.queues.Work, 10, time.Second, 30).Records {
				if ours[r.MessageId] {
					t.Fatalf("a message of the batch became visible while its task ran")
				}
			}
		}
	}
	for i := range n {
		if got := e.get(t, fmt.Sprintf("batch-long-%d", i)); got.Status != lease.StatusSucceeded || got.Attempt != 1 {
			t.Fatalf("task %d: %s attempt %d, want one successful attempt", i, got.Status, got.Attempt)
		}
	}
	single, batch := counter.Count("ChangeMessageVisibility"), counter.Count("ChangeMessageVisibilityBatch")
	renewals := counter.Count("UpdateItem") - n // the rest are the finishes
	t.Logf("%d lease renewals, %d batch visibility calls, %d single ones", renewals, batch, single)
	if single != 0 || batch == 0 || renewals < n || 2*batch > renewals {
		t.Errorf("%d renewals made %d ChangeMessageVisibilityBatch and %d ChangeMessageVisibility calls; want only batch calls, carrying two messages or more on average",
			renewals, batch, single)
	}
}

func TestFailingTaskBacksOffToFailedWithoutDeadLetter(t *testing.T) {
	t.Parallel()
	e := setupStack(t)
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "doomed", func(_ context.Context, task *leasehold.Task[empty]) (string, error) {
		return "", fmt.Errorf("attempt %d broke", task.Attempt)
	})
	// Eleven attempts against a queue whose maxReceiveCount is 10: fresh
	// tokens per retry keep the message from ever reaching the dead-letter
	// queue. (A flat 1s backoff keeps the test short.)
	const attempts = lifecycle.DefaultMaxReceiveCount + 1
	w := e.worker(t, leasehold.WorkerConfig{Handlers: hs, Backoff: func(int) time.Duration { return time.Second }})
	e.send(t, e.queues.Work, inlineBody(t, "doomed", "doomed-1", empty{}, attempts))
	e.pump(t, w, 90*time.Second, func() bool { return e.status(t, "doomed-1") == lease.StatusFailed })

	got := e.get(t, "doomed-1")
	if got.Error != fmt.Sprintf("attempt %d broke", attempts) || got.Attempt != attempts || len(got.History) != attempts {
		t.Fatalf("stored error %q attempt %d history %d", got.Error, got.Attempt, len(got.History))
	}
	for i := 1; i < len(got.History); i++ {
		if g := got.History[i].At.Sub(got.History[i-1].At); g < time.Second {
			t.Errorf("attempt %d started %s after the previous one, before its 1s backoff", i+1, g)
		}
	}
	if dead := e.receiveSome(t, e.queues.WorkDLQ, 10, time.Second, 30); len(dead.Records) != 0 {
		t.Errorf("dead-letter queue received %d messages", len(dead.Records))
	}
}

func TestBatchWithMalformedMessages(t *testing.T) {
	t.Parallel()
	e := setupStack(t)
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "upper", func(_ context.Context, task *leasehold.Task[string]) (string, error) {
		return strings.ToUpper(task.Payload), nil
	})
	w := e.worker(t, leasehold.WorkerConfig{Handlers: hs})
	malformed := map[string]string{
		`{"v":1,"kind":"upper","payload":"x"`: "malformed",
		`{"v":2,"kind":"upper"}`:              "version 2",
		`{"v":1,"payload":"no kind"}`:         "missing field",
	}
	var sent []string
	for body := range malformed {
		sent = append(sent, body)
	}
	for i := range 7 {
		sent = append(sent, inlineBody(t, "upper", fmt.Sprintf("good-%d", i), fmt.Sprintf("task %d", i), 0))
	}
	for _, body := range sent {
		e.send(t, e.queues.Work, body)
	}
	// One batch of the ten, even if SQS holds a send twice.
	ev := awstest.ReceiveN(t, e.sqs, e.queues.Work, 10, 20*time.Second, 30, awstest.Bodies(sent...))
	resp := e.deliver(t, w, t.Context(), ev)
	if len(resp.BatchItemFailures) != 0 {
		t.Errorf("batch item failures %+v, want none: bad input is recorded, not retried", resp.BatchItemFailures)
	}
	for i := range 7 {
		if got := e.get(t, fmt.Sprintf("good-%d", i)); got.Status != lease.StatusSucceeded {
			t.Errorf("good-%d: %s", i, got.Status)
		}
	}
	// SQS delivers at least once: a forward to the dead-letter queue that the
	// SDK sent again after its answer was lost shows up twice. What must
	// hold is that each bad message is there, with its reason, and nothing
	// else is.
	seen := map[string]bool{}
	for deadline := time.Now().Add(awstest.Scale(20 * time.Second)); len(seen) < len(malformed) && time.Now().Before(deadline); {
		for _, d := range e.receiveSome(t, e.queues.WorkDLQ, 10, time.Second, 30).Records {
			want, ok := malformed[d.Body]
			reason := aws.ToString(d.MessageAttributes[lifecycle.AttrReason].StringValue)
			if !ok || !strings.Contains(reason, want) {
				t.Errorf("dead letter %q with reason %q", d.Body, reason)
			}
			seen[d.Body] = true
		}
	}
	if len(seen) != len(malformed) {
		t.Fatalf("dead-letter queue holds %d of the %d bad messages", len(seen), len(malformed))
	}
}

// An inline token whose payload is over the limit but under SQS's (200 KB)
// is recorded as a FAILED task without its payload, so its body must not
// be lost with the message: it goes to the dead-letter queue with the
// reason, and the task's error says so.
func TestOversizeInlinePayloadKeepsItsBody(t *testing.T) {
	t.Parallel()
	e := setupStack(t)
	hs := leasehold.NewHandlers()
	ran := false
	leasehold.Handle(hs, "upper", func(_ context.Context, task *leasehold.Task[string]) (string, error) {
		ran = true
		return strings.ToUpper(task.Payload), nil
	})
	w := e.worker(t, leasehold.WorkerConfig{Handlers: hs})
	body := `{"v":1,"kind":"upper","id":"big","payload":"` + strings.Repeat("x", 200<<10) + `"}`
	e.send(t, e.queues.Work, body)
	ev := awstest.ReceiveN(t, e.sqs, e.queues.Work, 1, 20*time.Second, 30, awstest.Bodies(body))
	if resp := e.deliver(t, w, t.Context(), ev); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("batch item failures %+v, want none: the body is on the dead-letter queue", resp.BatchItemFailures)
	}
	got := e.get(t, "big")
	if ran || got.Status != lease.StatusFailed || !strings.Contains(got.Error, "payload is") || !strings.Contains(got.Error, "dead-letter queue") {
		t.Fatalf("ran=%v, task %s %q; want FAILED naming the limit and the dead-letter queue, never run", ran, got.Status, got.Error)
	}
	dead := awstest.ReceiveN(t, e.sqs, e.queues.WorkDLQ, 1, 20*time.Second, 30, awstest.Bodies(body))
	reason := aws.ToString(dead.Records[0].MessageAttributes[lifecycle.AttrReason].StringValue)
	if !strings.Contains(reason, "payload is") || !strings.Contains(reason, "the limit is") {
		t.Fatalf("dead-letter reason %q, want the payload limit", reason)
	}
}

func TestDeadlineReleasesForImmediateNextAttempt(t *testing.T) {
	t.Parallel()
	e := setupStack(t)
	hs := leasehold.NewHandlers()
	causes := make(chan error, 1)
	leasehold.Handle(hs, "stubborn", func(ctx context.Context, task *leasehold.Task[empty]) (string, error) {
		if task.Attempt > 1 {
			return "second attempt", nil
		}
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return "", ctx.Err()
	})
	// An hour's lease: the next attempt can run within the pump's budget
	// only because the first one released it, never because it expired.
	w := e.worker(t, leasehold.WorkerConfig{Handlers: hs, DeadlineMargin: time.Second, LeaseDuration: time.Hour})
	e.send(t, e.queues.Work, inlineBody(t, "stubborn", "late-1", empty{}, 3))
	ev := e.receiveSome(t, e.queues.Work, 1, 5*time.Second, 30)
	if len(ev.Records) != 1 {
		t.Fatalf("received %d messages", len(ev.Records))
	}
	// An invocation with 3s left: the handler is stopped at 2s.
	ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(3*time.Second))
	defer cancel()
	e.deliver(t, w, ctx, ev)
	if cause := <-causes; !errors.Is(cause, leasehold.ErrDeadline) {
		t.Fatalf("handler's cause = %v, want ErrDeadline", cause)
	}
	if got := e.get(t, "late-1"); got.Status != lease.StatusPending || got.LeaseOwner != "" {
		t.Fatalf("after the deadline: %s owner %q, want PENDING with the lease released", got.Status, got.LeaseOwner)
	}
	// The next attempt runs now, long before the lease would have expired.
	e.pump(t, w, 10*time.Second, func() bool { return e.status(t, "late-1") == lease.StatusSucceeded })
	if got := e.get(t, "late-1"); got.Attempt != 2 || string(got.Result) != `"second attempt"` {
		t.Errorf("stored attempt %d result %s", got.Attempt, got.Result)
	}
}

// TestKilledWorkerIsTakenOver runs a worker in a child process, kills it
// (SIGKILL: no release, no clean-up) while its handler runs, and checks that
// another worker takes the task over once the lease has expired plus the
// skew bound, and finishes it exactly once.
func TestKilledWorkerIsTakenOver(t *testing.T) {
	t.Parallel()
	e := setupStack(t)
	e.send(t, e.queues.Work, inlineBody(t, "victim", "killed-1", empty{}, 3))

	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestChildWorker$")
	cmd.Env = awstest.ChildEnv("LEASEHOLD_CHILD_TABLE="+e.table, "LEASEHOLD_CHILD_QUEUE="+e.queues.Work)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "handler started" {
				close(started)
			}
		}
	}()
	select {
	case <-started:
	case <-time.After(awstest.Scale(30 * time.Second)):
		t.Fatal("child worker never started the handler")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	dead := e.get(t, "killed-1")
	if dead.Status != lease.StatusRunning || !strings.HasPrefix(dead.LeaseOwner, "child") {
		t.Fatalf("after the kill: %s owned by %q", dead.Status, dead.LeaseOwner)
	}

	hs := leasehold.NewHandlers()
	var runs atomic.Int64
	var mu sync.Mutex
	var claimedAt time.Time
	leasehold.Handle(hs, "victim", func(_ context.Context, task *leasehold.Task[empty]) (int64, error) {
		mu.Lock()
		claimedAt = time.Now()
		mu.Unlock()
		runs.Add(1)
		return task.Fence, nil
	})
	w := e.worker(t, leasehold.WorkerConfig{Handlers: hs, LeaseDuration: 2 * time.Second, RenewBefore: time.Second, ClockSkew: time.Second})
	e.pump(t, w, 30*time.Second, func() bool { return e.status(t, "killed-1") == lease.StatusSucceeded })

	got := e.get(t, "killed-1")
	if runs.Load() != 1 || got.Fence != 2 || got.Attempt != 2 || string(got.Result) != "2" {
		t.Errorf("takeover ran %d times; stored fence %d attempt %d result %s", runs.Load(), got.Fence, got.Attempt, got.Result)
	}
	mu.Lock()
	defer mu.Unlock()
	// The dead worker's lease is taken over only after it expired plus the
	// 1s skew bound.
	if earliest := dead.LeaseUntil.Add(time.Second); claimedAt.Before(earliest) {
		t.Errorf("taken over at %s, before the dead lease's expiry plus skew (%s)", claimedAt.Format(time.StampMilli), earliest.Format(time.StampMilli))
	}
}

// TestChildWorker is the child process of TestKilledWorkerIsTakenOver; it
// does nothing unless started by it.
func TestChildWorker(t *testing.T) {
	table, queue := os.Getenv("LEASEHOLD_CHILD_TABLE"), os.Getenv("LEASEHOLD_CHILD_QUEUE")
	if table == "" {
		t.Skip("child process of TestKilledWorkerIsTakenOver; runs only when started by it")
	}
	cfg := awstest.Config(t)
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "victim", func(ctx context.Context, task *leasehold.Task[empty]) (string, error) {
		fmt.Println("handler started")
		<-ctx.Done() // killed long before this returns
		return "", ctx.Err()
	})
	// Its lease and renewal scale with LEASEHOLD_TEST_TIMESCALE (inherited
	// from the parent test): on a loaded machine a renewal of a 2 s lease
	// can take longer than the second it is given, and the child would lose
	// the task before it is killed.
	w, err := leasehold.NewWorker(leasehold.WorkerConfig{AWS: cfg, Table: table, QueueURL: queue, Handlers: hs,
		Owner: "child", LeaseDuration: awstest.Scale(2 * time.Second), RenewBefore: awstest.Scale(time.Second),
		ClockSkew: time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	e := &stackEnv{cfg: cfg, sqs: sqs.NewFromConfig(cfg), queues: awstest.Queues{Work: queue}}
	// A short visibility timeout: once the child dies and stops extending
	// it, the message comes back quickly.
	ev := e.receiveSome(t, queue, 1, 10*time.Second, 2)
	_, _ = w.HandleSQS(t.Context(), ev)
}
