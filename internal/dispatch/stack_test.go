package dispatch_test

// Integration tests against the local AWS stack: real conditional writes and
// index queries in DynamoDB, real queues, and the real worker running every
// token that reaches the work queue. Each test has its own table and queues.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/jonboulle/clockwork"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/internal/dispatch"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/dynamo"
	"github.com/leasehold/leasehold/internal/token"
)

// stackEnv is one test's table, queues, dispatcher and worker, all on one
// fake clock.
type stackEnv struct {
	t      *testing.T
	clock  *clockwork.FakeClock
	sqs    *sqs.Client
	queues awstest.Queues
	store  *dynamo.Store
	d      *dispatch.Dispatcher
	worker *leasehold.Worker

	mu   sync.Mutex
	runs map[string]int // handler runs by task id
}

func setupStack(t *testing.T, wrap func(dispatch.SQSClient) dispatch.SQSClient) *stackEnv {
	t.Helper()
	cfg := awstest.Config(t)
	e := &stackEnv{
		t:      t,
		clock:  clockwork.NewFakeClockAt(time.Now().UTC().Truncate(time.Second)),
		sqs:    sqs.NewFromConfig(cfg),
		queues: awstest.NewQueues(t, cfg),
		runs:   map[string]int{},
	}
	table := awstest.NewTable(t, cfg)
	e.store = dynamo.New(dynamodb.NewFromConfig(cfg), table, lease.Options{Clock: e.clock})
	var q dispatch.SQSClient = e.sqs
	if wrap != nil {
		q = wrap(q)
	}
	d, err := dispatch.New(dispatch.Config{
		Store: e.store, SQS: q, WorkQueueURL: e.queues.Work, IntakeDLQURL: e.queues.IntakeDLQ,
		Clock: e.clock, Logger: testLogger(t),
	})
	if err != nil {
		t.Fatalf("dispatch.New: %v", err)
	}
	e.d = d

	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "count", func(ctx context.Context, task *leasehold.Task[json.RawMessage]) (string, error) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.runs[task.ID]++
		return "done", nil
	})
	// One message at a time, so that a second token of a task always finds
	// it finished instead of leased (which would hide the message for the
	// lease's remaining time).
	w, err := leasehold.NewWorker(leasehold.WorkerConfig{
		AWS: cfg, Table: table, QueueURL: e.queues.Work, DeadLetterQueueURL: e.queues.WorkDLQ, Handlers: hs,
		Clock: e.clock, Concurrency: 1, Logger: testLogger(t),
	})
	if err != nil {
		t.Fatalf("NewWorker: %v", err)
	}
	e.worker = w
	return e
}

func testLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", t.Name())
	}
	return slog.New(slog.DiscardHandler)
}

func (e *stackEnv) call() (context.Context, context.CancelFunc) {
	return context.WithTimeout(e.t.Context(), 10*time.Second)
}

// submit sends bodies to the intake queue and receives them back as a
// Lambda event, as the event source mapping would deliver them.
func (e *stackEnv) submit(bodies ...string) events.SQSEvent {
	e.t.Helper()
	for _, b := range bodies {
		ctx, cancel := e.call()
		_, err := e.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.queues.Intake), MessageBody: aws.String(b)})
		cancel()
		if err != nil {
			e.t.Fatalf("send to intake: %v", err)
		}
	}
	var ev events.SQSEvent
	for len(ev.Records) < len(bodies) {
		got := e.receive(e.queues.Intake, 10)
		if len(got.Records) == 0 {
			e.t.Fatalf("received %d of %d submissions", len(ev.Records), len(bodies))
		}
		ev.Records = append(ev.Records, got.Records...)
	}
	return ev
}

// receive takes up to max visible messages off url as a Lambda event. A
// receive can come back empty while messages are visible (a loaded emulator,
// like SQS itself, answers a short poll from what it reaches in time), so an
// empty answer is retried while the queue still counts visible messages,
// within a bound scaled by LEASEHOLD_TEST_TIMESCALE. Empty means empty.
func (e *stackEnv) receive(url string, max int32) events.SQSEvent {
	e.t.Helper()
	deadline := time.Now().Add(awstest.Scale(10 * time.Second))
	for {
		ev := awstest.ReceiveEvent(e.t, e.sqs, url, max, time.Second, 60)
		if len(ev.Records) > 0 || e.visible(url) == 0 || time.Now().After(deadline) {
			return ev
		}
	}
}

// visible is the queue's count of messages visible now.
func (e *stackEnv) visible(url string) int {
	e.t.Helper()
	ctx, cancel := e.call()
	defer cancel()
	out, err := e.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages},
	})
	if err != nil {
		e.t.Fatalf("queue attributes: %v", err)
	}
	n, _ := strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)])
	return n
}

func (e *stackEnv) intake(ev events.SQSEvent) map[string]bool {
	e.t.Helper()
	resp, err := e.d.HandleIntake(e.t.Context(), ev)
	if err != nil {
		e.t.Fatalf("HandleIntake: %v", err)
	}
	return failures(resp)
}

func (e *stackEnv) delete(url string, recs ...events.SQSMessage) {
	e.t.Helper()
	for _, r := range recs {
		ctx, cancel := e.call()
		_, err := e.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: aws.String(r.ReceiptHandle)})
		cancel()
		if err != nil {
			e.t.Fatalf("delete: %v", err)
		}
	}
}

// work runs the worker on every token on the work queue, deleting what it
// acknowledges, until the queue holds no message at all. It returns how
// many tokens the worker ran.
func (e *stackEnv) work() int {
	e.t.Helper()
	tokens := 0
	for range 100 {
		ev := e.receive(e.queues.Work, 10)
		if len(ev.Records) == 0 {
			if n := e.queued(e.queues.Work); n != 0 {
				e.t.Fatalf("%d tokens left on the work queue out of reach (delayed or hidden)", n)
			}
			return tokens
		}
		tokens += len(ev.Records)
		resp, err := e.worker.HandleSQS(e.t.Context(), ev)
		if err != nil {
			e.t.Fatalf("HandleSQS: %v", err)
		}
		failed := failures(resp)
		for _, r := range ev.Records {
			if failed[r.MessageId] {
				e.t.Fatalf("the worker failed token %s", r.Body)
			}
		}
		e.delete(e.queues.Work, ev.Records...)
	}
	e.t.Fatalf("the work queue never emptied")
	return 0
}

// queued counts every message on url: visible, in flight and delayed.
func (e *stackEnv) queued(url string) int {
	e.t.Helper()
	ctx, cancel := e.call()
	defer cancel()
	out, err := e.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{
			sqstypes.QueueAttributeNameApproximateNumberOfMessages,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed,
		},
	})
	if err != nil {
		e.t.Fatalf("queue attributes: %v", err)
	}
	n := 0
	for _, v := range out.Attributes {
		i, _ := strconv.Atoi(v)
		n += i
	}
	return n
}

func (e *stackEnv) get(id string) lease.Task {
	e.t.Helper()
	ctx, cancel := e.call()
	defer cancel()
	task, err := e.store.Get(ctx, id)
	if err != nil {
		e.t.Fatalf("Get(%s): %v", id, err)
	}
	return task
}

func (e *stackEnv) sweep() dispatch.SweepStats {
	e.t.Helper()
	st, err := e.d.Sweep(e.t.Context(), e.clock.Now())
	if err != nil {
		e.t.Fatalf("Sweep: %v", err)
	}
	return st
}

// ranOnce checks that each task succeeded on its first attempt, its handler
// having run exactly once.
func (e *stackEnv) ranOnce(ids ...string) {
	e.t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, id := range ids {
		if n := e.runs[id]; n != 1 {
			e.t.Errorf("task %s ran %d times, want once", id, n)
		}
	}
	if len(e.runs) != len(ids) {
		e.t.Errorf("handler runs %v, want one for each of %v", e.runs, ids)
	}
	for _, id := range ids {
		if task := e.get(id); task.Status != lease.StatusSucceeded || task.Attempt != 1 {
			e.t.Errorf("task %s is %s after %d attempts, want SUCCEEDED after 1", id, task.Status, task.Attempt)
		}
	}
}

func TestStackDuplicateSubmissionsMakeOneTaskThatRunsOnce(t *testing.T) {
	t.Parallel()
	e := setupStack(t, nil)

	// One message delivered twice, in one batch and again in another.
	first := e.submit(`{"v":1,"kind":"count","payload":{"n":1}}`)
	msg := first.Records[0]
	if fails := e.intake(events.SQSEvent{Records: []events.SQSMessage{msg, msg}}); len(fails) != 0 {
		t.Fatalf("failures %v", fails)
	}
	if fails := e.intake(first); len(fails) != 0 {
		t.Fatalf("failures on redelivery %v", fails)
	}
	// Two messages with one client id.
	twins := e.submit(`{"v":1,"kind":"count","id":"client-7","payload":{"n":2}}`, `{"v":1,"kind":"count","id":"client-7","payload":{"n":2}}`)
	if twins.Records[0].MessageId == twins.Records[1].MessageId {
		t.Fatal("SQS gave both messages one id")
	}
	if fails := e.intake(twins); len(fails) != 0 {
		t.Fatalf("failures %v", fails)
	}
	e.delete(e.queues.Intake, append(first.Records, twins.Records...)...)

	tokens := e.work()
	t.Logf("%d tokens reached the worker for 2 tasks", tokens)
	if tokens < 2 {
		t.Fatalf("only %d tokens reached the work queue", tokens)
	}
	e.ranOnce(msg.MessageId, "client-7")
	for _, id := range []string{msg.MessageId, "client-7"} {
		if n := e.get(id).MaxAttempts; n != 5 {
			t.Errorf("task %s has %d max attempts, want the default 5", id, n)
		}
	}
	// A late duplicate of a finished task sends nothing and changes nothing.
	if fails := e.intake(first); len(fails) != 0 {
		t.Fatalf("failures %v", fails)
	}
	if n := e.queued(e.queues.Work); n != 0 {
		t.Fatalf("%d tokens for a finished task", n)
	}
}

func TestStackTaskDelayedTwentyMinutesIsDispatchedBySweepWhenDue(t *testing.T) {
	t.Parallel()
	e := setupStack(t, nil)
	ev := e.submit(`{"v":1,"kind":"count","id":"delayed","delay_seconds":1200}`)
	if fails := e.intake(ev); len(fails) != 0 {
		t.Fatalf("failures %v", fails)
	}
	e.delete(e.queues.Intake, ev.Records...)
	due := e.clock.Now().Add(20 * time.Minute)
	task := e.get("delayed")
	if !task.RunAt.Equal(due) || !task.DispatchAt.Equal(due) {
		t.Fatalf("task runs at %s and is swept at %s, want both at %s", task.RunAt, task.DispatchAt, due)
	}
	if n := e.queued(e.queues.Work); n != 0 {
		t.Fatalf("%d tokens sent for a task 20 minutes out", n)
	}

	for _, step := range []time.Duration{time.Minute, 14 * time.Minute, 5*time.Minute - time.Millisecond} {
		e.clock.Advance(step)
		if st := e.sweep(); st.Due != 0 {
			t.Fatalf("sweep %s before due: %+v", due.Sub(e.clock.Now()), st)
		}
		if n := e.queued(e.queues.Work); n != 0 {
			t.Fatalf("%d tokens before due", n)
		}
	}
	e.clock.Advance(time.Millisecond)
	if st := e.sweep(); st != (dispatch.SweepStats{Due: 1, Dispatched: 1}) {
		t.Fatalf("sweep when due: %+v", st)
	}
	if tokens := e.work(); tokens != 1 {
		t.Fatalf("%d tokens, want 1", tokens)
	}
	e.ranOnce("delayed")
	if st := e.sweep(); st.Due != 0 {
		t.Fatalf("sweep after the task finished: %+v", st)
	}
}

func TestStackLostMessageIsFoundBySweep(t *testing.T) {
	t.Parallel()
	e := setupStack(t, nil)
	ev := e.submit(`{"v":1,"kind":"count","id":"lost"}`)
	if fails := e.intake(ev); len(fails) != 0 {
		t.Fatalf("failures %v", fails)
	}
	e.delete(e.queues.Intake, ev.Records...)
	// The token is deleted without running, as if it had been lost.
	tok := e.receive(e.queues.Work, 10)
	if len(tok.Records) != 1 || tok.Records[0].Body != token.Ref("lost") {
		t.Fatalf("work queue holds %v, want one token for the task", tok.Records)
	}
	e.delete(e.queues.Work, tok.Records...)

	if st := e.sweep(); st.Due != 0 {
		t.Fatalf("sweep within the grace: %+v", st)
	}
	e.clock.Advance(lease.DefaultDispatchGrace - time.Millisecond)
	if st := e.sweep(); st.Due != 0 {
		t.Fatalf("sweep just before the grace ends: %+v", st)
	}
	e.clock.Advance(time.Millisecond)
	if st := e.sweep(); st.Dispatched != 1 {
		t.Fatalf("sweep after the grace: %+v", st)
	}
	if tokens := e.work(); tokens != 1 {
		t.Fatalf("%d tokens, want 1", tokens)
	}
	e.ranOnce("lost")
}

// flakySQS passes calls to the real queue but refuses the entries of some
// task ids, and fails outright a batch that holds certain others.
type flakySQS struct {
	dispatch.SQSClient
	refuse, failCall map[string]bool
}

func (f flakySQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	var keep []sqstypes.SendMessageBatchRequestEntry
	var refused []sqstypes.BatchResultErrorEntry
	for _, entry := range in.Entries {
		tok, err := token.Decode(aws.ToString(entry.MessageBody))
		if err != nil {
			return nil, err
		}
		if f.failCall[tok.ID] {
			return nil, errors.New("flaky: connection reset")
		}
		if f.refuse[tok.ID] {
			refused = append(refused, sqstypes.BatchResultErrorEntry{Id: entry.Id, Code: aws.String("InternalError"), SenderFault: false, Message: aws.String("flaky")})
			continue
		}
		keep = append(keep, entry)
	}
	out := &sqs.SendMessageBatchOutput{}
	if len(keep) > 0 {
		sent, err := f.SQSClient.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: in.QueueUrl, Entries: keep}, opts...)
		if err != nil {
			return nil, err
		}
		out.Successful, out.Failed = sent.Successful, sent.Failed
	}
	out.Failed = append(out.Failed, refused...)
	return out, nil
}

func TestStackPartialBatchFailure(t *testing.T) {
	t.Parallel()
	flaky := flakySQS{refuse: map[string]bool{"t02": true, "t05": true}, failCall: map[string]bool{"t14": true}}
	e := setupStack(t, func(q dispatch.SQSClient) dispatch.SQSClient { flaky.SQSClient = q; return flaky })
	var msgs []events.SQSMessage
	for i := range 22 {
		msgs = append(msgs, events.SQSMessage{
			MessageId: fmt.Sprintf("m%02d", i), EventSource: "aws:sqs",
			Body: fmt.Sprintf(`{"v":1,"kind":"count","id":"t%02d"}`, i),
		})
	}
	fails := e.intake(events.SQSEvent{Records: msgs})
	// Chunks are messages 0-9, 10-19 and 20-21: two entries refused in the
	// first, the whole second call failed.
	want := map[string]bool{"m02": true, "m05": true}
	for i := 10; i < 20; i++ {
		want[fmt.Sprintf("m%02d", i)] = true
	}
	if len(fails) != len(want) {
		t.Fatalf("failures %v\nwant %v", fails, want)
	}
	for id := range want {
		if !fails[id] {
			t.Fatalf("failures %v\nwant %v", fails, want)
		}
	}
	var sent []string
	for {
		ev := e.receive(e.queues.Work, 10)
		if len(ev.Records) == 0 {
			break
		}
		for _, r := range ev.Records {
			tok, err := token.Decode(r.Body)
			if err != nil {
				t.Fatalf("token %q: %v", r.Body, err)
			}
			sent = append(sent, tok.ID)
		}
		e.delete(e.queues.Work, ev.Records...)
	}
	if len(sent) != 22-len(want) {
		t.Fatalf("%d tokens on the work queue (%v), want %d", len(sent), sent, 22-len(want))
	}
	for _, id := range sent {
		if want["m"+strings.TrimPrefix(id, "t")] {
			t.Fatalf("a token for %s reached the queue although its message failed", id)
		}
	}
}

func TestStackInvalidSubmissionsGoToTheDeadLetterQueue(t *testing.T) {
	t.Parallel()
	e := setupStack(t, nil)
	bad := []struct{ body, reason string }{
		{`{"v":1,"kind":"count",`, "malformed"},
		{`{"v":9,"kind":"count"}`, "unsupported token version: version 9"},
		{`{"v":1,"payload":{"a":1}}`, `missing field: "kind" is required`},
		{`{"v":1,"kind":"count","payload":"` + strings.Repeat("x", lease.MaxPayloadBytes) + `"}`, "payload too large"},
		{`{"v":1,"kind":"count","run_at":"2031-02-30T25:00:00Z"}`, `invalid field: "run_at"`},
	}
	bodies := []string{`{"v":1,"kind":"count","id":"ok-1"}`}
	for _, b := range bad {
		bodies = append(bodies, b.body)
	}
	bodies = append(bodies, `{"v":1,"kind":"count","id":"ok-2"}`)
	ev := e.submit(bodies...)
	if fails := e.intake(ev); len(fails) != 0 {
		t.Fatalf("failures %v: invalid submissions are acknowledged once recorded", fails)
	}
	e.delete(e.queues.Intake, ev.Records...)

	bySource := map[string]events.SQSMessage{}
	for _, r := range ev.Records {
		bySource[r.MessageId] = r
	}
	// At least once: a forward the SDK sent again after its answer was lost
	// is on the queue twice; what counts is each rejected submission.
	var reasons []string
	sources := map[string]bool{}
	for len(sources) < len(bad) {
		got := e.receive(e.queues.IntakeDLQ, 10)
		if len(got.Records) == 0 {
			t.Fatalf("%d of %d rejected submissions in the dead-letter queue", len(reasons), len(bad))
		}
		for _, r := range got.Records {
			reason := r.MessageAttributes[dispatch.AttrReason].StringValue
			src := r.MessageAttributes[dispatch.AttrSourceMessageID].StringValue
			if reason == nil || src == nil {
				t.Fatalf("dead letter without reason or source: %v", r.MessageAttributes)
			}
			if orig, ok := bySource[*src]; !ok || orig.Body != r.Body {
				t.Fatalf("dead letter names source %s, which did not carry its body", *src)
			}
			reasons = append(reasons, *reason)
			sources[*src] = true
		}
	}
	for _, b := range bad {
		found := false
		for _, r := range reasons {
			found = found || strings.HasPrefix(r, b.reason)
		}
		if !found {
			t.Errorf("no dead letter with reason %q among %q", b.reason, reasons)
		}
	}
	// A token sent again after a lost answer is a duplicate the worker
	// acknowledges without running the task twice (ranOnce).
	if tokens := e.work(); tokens < 2 {
		t.Fatalf("%d tokens, want at least the two valid tasks'", tokens)
	}
	e.ranOnce("ok-1", "ok-2")
}
