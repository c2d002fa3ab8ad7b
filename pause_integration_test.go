package leasehold_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/queues"
	"github.com/leasehold/leasehold/internal/token"
)

// syncBuffer is a log sink the test reads while the worker writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) contains(sub string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Contains(s.b.String(), sub)
}

// A paused queue (its leasehold-paused tag) gets no receive from Run: its
// tasks stay queued, none runs, nothing is lost; once resumed, they all
// run.
func TestPausedQueueIsNotReceivedFromOnTheStack(t *testing.T) {
	t.Parallel()
	e := setupStack(t)
	ctx := t.Context()
	if err := queues.SetPaused(ctx, e.sqs, e.queues.Work, true, time.Now()); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		e.send(t, e.queues.Work, fmt.Sprintf(`{"v":1,"kind":"greet","id":"held-%d","payload":{"name":"x"}}`, i))
	}
	var logs syncBuffer
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "greet", func(context.Context, *leasehold.Task[map[string]string]) (string, error) { return "hi", nil })
	runWorker(t, e.worker(t, leasehold.WorkerConfig{Handlers: hs, LongPoll: time.Second, Logger: slog.New(slog.NewTextHandler(&logs, nil))}))
	waitFor(t, 30*time.Second, func() bool { return logs.contains("queue paused") })
	// Paused, and it has looked: still nothing received.
	if n := visible(t, e); n != 3 {
		t.Fatalf("%d messages visible while paused, want the 3 sent", n)
	}
	for i := range 3 {
		if s := e.status(t, fmt.Sprintf("held-%d", i)); s != "" {
			t.Fatalf("held-%d is %s while its queue is paused", i, s)
		}
	}
	resumeAndRun(t, e, "held-%d", 3)
	if !logs.contains("queue resumed") {
		t.Error("no log line said the queue resumed")
	}
}

// visible is the work queue's ApproximateNumberOfMessages.
func visible(t *testing.T, e *stackEnv) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(10*time.Second))
	defer cancel()
	out, err := e.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(e.queues.Work),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages}})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	fmt.Sscan(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)], &n)
	return n
}

// A queue paused while a worker's long poll is in flight: what that poll
// brings is handed back unrun, and runs once the queue is resumed.
func TestPauseStopsTasksAPollInFlightBringsOnTheStack(t *testing.T) {
	t.Parallel()
	e := setupStack(t)
	ctx := t.Context()
	var logs syncBuffer
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "greet", func(context.Context, *leasehold.Task[map[string]string]) (string, error) { return "hi", nil })
	runWorker(t, e.worker(t, leasehold.WorkerConfig{Handlers: hs, LongPoll: 10 * time.Second, Logger: slog.New(slog.NewTextHandler(&logs, nil))}))
	e.send(t, e.queues.Work, `{"v":1,"kind":"greet","id":"before-pause","payload":{"name":"x"}}`)
	waitFor(t, 60*time.Second, func() bool { return e.status(t, "before-pause") == lease.StatusSucceeded })
	// The worker's pollers are in their long polls. Pause, and let the
	// pause check's cached answer (at most pauseCheckEvery old) expire, so
	// that the next look at it reads the tag.
	if err := queues.SetPaused(ctx, e.sqs, e.queues.Work, true, time.Now()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	for i := range 3 {
		e.send(t, e.queues.Work, fmt.Sprintf(`{"v":1,"kind":"greet","id":"in-flight-%d","payload":{"name":"x"}}`, i))
	}
	// Whether a poll in flight took them (and handed them back) or not, they
	// end up visible on the queue and none runs.
	notStarted := func() {
		for i := range 3 {
			if s := e.status(t, fmt.Sprintf("in-flight-%d", i)); s != "" {
				t.Fatalf("in-flight-%d is %s while its queue is paused", i, s)
			}
		}
	}
	waitFor(t, 60*time.Second, func() bool {
		notStarted()
		return logs.contains("queue paused") && visible(t, e) == 3
	})
	notStarted()
	if !logs.contains("handing back messages received before the pause") {
		t.Log("no poll in flight took the messages this time; the unit tests cover the hand-back")
	}
	resumeAndRun(t, e, "in-flight-%d", 3)
}

// resumeAndRun resumes the work queue and waits until the n tasks named by
// format (with 0..n-1) have succeeded.
func resumeAndRun(t *testing.T, e *stackEnv, format string, n int) {
	t.Helper()
	if err := queues.SetPaused(t.Context(), e.sqs, e.queues.Work, false, time.Now()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, func() bool {
		for i := range n {
			if e.status(t, fmt.Sprintf(format, i)) != lease.StatusSucceeded {
				return false
			}
		}
		return true
	})
}

// On Lambda (HandleSQS) the event source mapping keeps receiving from a
// paused queue: the worker hands each of its messages back unrun. No
// handler runs, no message is acknowledged, no attempt is used; they come
// back after their hold, and once the queue is resumed they run. A message
// of another queue, in the same batch, runs meanwhile.
func TestPausedQueueOnLambdaHandsMessagesBackOnTheStack(t *testing.T) {
	t.Parallel()
	e := setupStack(t)
	ctx := t.Context()
	other := awstest.NewQueues(t, e.cfg).Work
	var mu sync.Mutex
	ran := map[string]int{}
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "greet", func(_ context.Context, task *leasehold.Task[map[string]string]) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		ran[task.ID]++
		return "hi", nil
	})
	var logs syncBuffer
	w := e.worker(t, leasehold.WorkerConfig{Handlers: hs, QueueURLs: []string{e.queues.Work, other},
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	cctx, cancel := call(t)
	_, err := e.store.Create(cctx, lease.NewTask{ID: "stored", Kind: "greet", Payload: []byte(`{"name":"x"}`), MaxAttempts: 3})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	if err := queues.SetPaused(ctx, e.sqs, e.queues.Work, true, time.Now()); err != nil {
		t.Fatal(err)
	}
	sent := []string{
		`{"v":1,"kind":"greet","id":"held-0","payload":{"name":"x"}}`,
		`{"v":1,"kind":"greet","id":"held-1","payload":{"name":"x"}}`,
		token.Ref("stored"),
	}
	for _, body := range sent {
		e.send(t, e.queues.Work, body)
	}
	e.send(t, other, `{"v":1,"kind":"greet","id":"elsewhere","payload":{"name":"x"}}`)
	ev := awstest.ReceiveN(t, e.sqs, e.queues.Work, len(sent), 20*time.Second, 60, nil)
	ev.Records = append(ev.Records, awstest.ReceiveN(t, e.sqs, other, 1, 20*time.Second, 60, nil).Records...)

	handled := time.Now()
	resp := lambdaBatch(t, w, e, ev)
	failed := map[string]bool{}
	for _, f := range resp.BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	for i, r := range ev.Records {
		if want := i < len(sent); failed[r.MessageId] != want {
			t.Errorf("message %q: handed back %t, want %t (only the paused queue's)", r.Body, failed[r.MessageId], want)
		}
	}
	mu.Lock()
	if len(ran) != 1 || ran["elsewhere"] != 1 {
		t.Errorf("handlers ran for %v; want only the other queue's task", ran)
	}
	mu.Unlock()
	for _, id := range []string{"held-0", "held-1"} {
		if s := e.status(t, id); s != "" {
			t.Errorf("%s is %s while its queue is paused; want it not created", id, s)
		}
	}
	if got := e.get(t, "stored"); got.Status != lease.StatusPending || got.Attempt != 0 {
		t.Errorf("stored is %s at attempt %d while its queue is paused; want PENDING, no attempt used", got.Status, got.Attempt)
	}
	if !logs.contains("queue paused: handing back its messages unrun") {
		t.Error("no log line says the paused queue's messages were handed back")
	}
	if t.Failed() {
		t.FailNow() // what follows waits for messages that were not handed back
	}

	// They come back after their hold (at least 5 s on a first receive),
	// received a second time; nothing was lost.
	ev = awstest.ReceiveN(t, e.sqs, e.queues.Work, len(sent), 60*time.Second, 60, nil)
	if waited := time.Since(handled); waited < 5*time.Second {
		t.Errorf("the held messages came back after %s; want at least the first hold's 5 s", waited)
	}
	for _, r := range ev.Records {
		if r.Attributes["ApproximateReceiveCount"] != "2" {
			t.Errorf("message %q came back with receive count %s, want 2", r.Body, r.Attributes["ApproximateReceiveCount"])
		}
	}

	// Resumed: the worker's cached answer (read at the batch above, at least
	// the hold ago, more than its 2 s) is read again, and they run.
	if err := queues.SetPaused(ctx, e.sqs, e.queues.Work, false, time.Now()); err != nil {
		t.Fatal(err)
	}
	if resp := lambdaBatch(t, w, e, ev); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("after the resume: %v handed back, want none", resp.BatchItemFailures)
	}
	for _, id := range []string{"held-0", "held-1"} {
		if s := e.status(t, id); s != lease.StatusSucceeded {
			t.Errorf("%s is %q after the resume, want SUCCEEDED", id, s)
		}
	}
	if got := e.get(t, "stored"); got.Status != lease.StatusSucceeded || got.Attempt != 1 {
		t.Errorf("stored is %s at attempt %d after the resume; want SUCCEEDED at its first attempt", got.Status, got.Attempt)
	}
}

// lambdaBatch hands ev to the worker as Lambda would (a request id, the
// function's deadline), then deletes what it acknowledged from each
// record's queue, as the event source mapping does.
func lambdaBatch(t *testing.T, w *leasehold.Worker, e *stackEnv, ev events.SQSEvent) events.SQSEventResponse {
	t.Helper()
	ictx := lambdacontext.NewContext(t.Context(), &lambdacontext.LambdaContext{AwsRequestID: "req-pause"})
	ictx, cancel := context.WithTimeout(ictx, awstest.Scale(time.Minute))
	defer cancel()
	resp, err := w.HandleSQS(ictx, ev)
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
		name, _ := queues.NameFromARN(r.EventSourceARN)
		dctx, cancel := call(t)
		out, err := e.sqs.GetQueueUrl(dctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
		if err == nil {
			_, err = e.sqs.DeleteMessage(dctx, &sqs.DeleteMessageInput{QueueUrl: out.QueueUrl, ReceiptHandle: aws.String(r.ReceiptHandle)})
		}
		cancel()
		if err != nil {
			t.Fatalf("delete: %v", err)
		}
	}
	return resp
}
