package eventsource

import (
	"cmp"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/leasehold/leasehold/internal/awsenv"
	"github.com/leasehold/leasehold/internal/awstest"
)

// testTimeout bounds every wait on the stack; it is a safety net, never the
// way a test synchronises.
const testTimeout = 30 * time.Second

const receiveCount = "ApproximateReceiveCount"

// stack is one test's queue on the local AWS stack.
type stack struct {
	client   *sqs.Client
	queueURL string
	region   string
}

func setup(t *testing.T) stack {
	t.Helper()
	cfg := awstest.Config(t)
	// A transport of this test's own, closed after everything else, so that
	// idle keep-alive connections are not reported as leaked goroutines.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	cfg.HTTPClient = awsenv.GuardHTTP(&http.Client{Transport: tr, Timeout: testTimeout})
	qs := awstest.NewQueues(t, cfg)
	return stack{client: sqs.NewFromConfig(cfg), queueURL: qs.Work, region: cfg.Region}
}

// send enqueues body and returns its message ID.
func (s stack) send(t *testing.T, body string, attrs map[string]types.MessageAttributeValue) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(testTimeout))
	defer cancel()
	out, err := s.client.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:          aws.String(s.queueURL),
		MessageBody:       aws.String(body),
		MessageAttributes: attrs,
	})
	if err != nil {
		t.Fatalf("send message: %v", err)
	}
	return aws.ToString(out.MessageId)
}

func (s stack) attributes(t *testing.T, names ...types.QueueAttributeName) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	out, err := s.client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(s.queueURL),
		AttributeNames: names,
	})
	if err != nil {
		t.Fatalf("get queue attributes: %v", err)
	}
	return out.Attributes
}

// messagesLeft counts the queue's messages, visible or in flight.
func (s stack) messagesLeft(t *testing.T) int {
	t.Helper()
	attrs := s.attributes(t, types.QueueAttributeNameApproximateNumberOfMessages,
		types.QueueAttributeNameApproximateNumberOfMessagesNotVisible)
	total := 0
	for _, name := range []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages,
		types.QueueAttributeNameApproximateNumberOfMessagesNotVisible} {
		n, err := strconv.Atoi(attrs[string(name)])
		if err != nil {
			t.Fatalf("queue attribute %s = %q: %v", name, attrs[string(name)], err)
		}
		total += n
	}
	return total
}

// running is a Run call in progress.
type running struct {
	cancel context.CancelFunc
	done   <-chan error
	once   sync.Once
	err    error
}

// start runs a Runner on the test's queue until the test ends or stop is
// called.
func (s stack) start(t *testing.T, cfg Config, h Handler) *running {
	t.Helper()
	cfg.QueueURL = s.queueURL
	cfg.Logger = testLogger(t)
	// A stop waits for the receive in flight (the poller receives ahead
	// while a batch runs): short polls keep each stop within a second or
	// two instead of the default 20 s long poll.
	cfg.WaitTime = cmp.Or(cfg.WaitTime, time.Second)
	r, err := New(s.client, cfg, h)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rn := &running{cancel: cancel, done: runAsync(ctx, r)}
	t.Cleanup(func() { rn.stop(t) })
	return rn
}

// stop cancels Run's context and waits for Run to return.
func (rn *running) stop(t *testing.T) error {
	t.Helper()
	rn.cancel()
	rn.once.Do(func() { rn.err = waitRun(t, rn.done) })
	return rn.err
}

// deliver sends v to the test unless the test is already over.
func deliver[T any](t *testing.T, ch chan<- T, v T) {
	select {
	case ch <- v:
	case <-t.Context().Done():
	}
}

func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	return receiveWithin(t, ch, what, testTimeout)
}

func receiveWithin[T any](t *testing.T, ch <-chan T, what string, d time.Duration) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("timed out waiting for %s", what)
		var zero T
		return zero
	}
}

// delivery is one message as one invocation saw it.
type delivery struct {
	body, count string
	invocation  int  // how many records the invocation had
	succeeded   bool // whether the handler reported it processed
}

func TestDeliversLambdaShapedEvent(t *testing.T) {
	t.Parallel()
	s := setup(t)
	const body = `{"task_id":"t-1","kind":"demo"}`
	attrs := map[string]types.MessageAttributeValue{
		"kind":     {DataType: aws.String("String"), StringValue: aws.String("demo")},
		"priority": {DataType: aws.String("Number"), StringValue: aws.String("7")},
		"trace":    {DataType: aws.String("Binary"), BinaryValue: []byte{0, 1, 0xff}},
	}
	id := s.send(t, body, attrs)

	type invocation struct {
		ev       events.SQSEvent
		at       time.Time
		deadline time.Time
		lc       *lambdacontext.LambdaContext
	}
	invoked := make(chan invocation, 1)
	const timeout = 45 * time.Second
	rn := s.start(t, Config{Pollers: 1, InvocationTimeout: timeout}, func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		inv := invocation{ev: ev, at: time.Now()}
		inv.deadline, _ = ctx.Deadline()
		inv.lc, _ = lambdacontext.FromContext(ctx)
		deliver(t, invoked, inv)
		return events.SQSEventResponse{}, nil
	})
	inv := receive(t, invoked, "the invocation")
	if err := rn.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}

	if budget := inv.deadline.Sub(inv.at); budget <= timeout-5*time.Second || budget > timeout {
		t.Errorf("handler deadline %s ahead, want close to the invocation timeout %s", budget, timeout)
	}
	if inv.lc == nil || inv.lc.AwsRequestID == "" {
		t.Errorf("handler context has no Lambda request ID: %+v", inv.lc)
	}
	if len(inv.ev.Records) != 1 {
		t.Fatalf("got %d records, want 1", len(inv.ev.Records))
	}
	m := inv.ev.Records[0]
	queueARN := s.attributes(t, types.QueueAttributeNameQueueArn)[string(types.QueueAttributeNameQueueArn)]
	sum := md5.Sum([]byte(body))
	checks := []struct {
		field, got, want string
	}{
		{"MessageId", m.MessageId, id},
		{"Body", m.Body, body},
		{"Md5OfBody", m.Md5OfBody, hex.EncodeToString(sum[:])},
		{"EventSource", m.EventSource, "aws:sqs"},
		{"EventSourceARN", m.EventSourceARN, queueARN},
		{"AWSRegion", m.AWSRegion, s.region},
		{"ApproximateReceiveCount", m.Attributes[receiveCount], "1"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.field, c.got, c.want)
		}
	}
	if m.ReceiptHandle == "" || m.Md5OfMessageAttributes == "" {
		t.Errorf("ReceiptHandle %q, Md5OfMessageAttributes %q: want both set", m.ReceiptHandle, m.Md5OfMessageAttributes)
	}
	for _, name := range []string{"SentTimestamp", "ApproximateFirstReceiveTimestamp", "SenderId"} {
		if m.Attributes[name] == "" {
			t.Errorf("system attribute %s missing from %v", name, m.Attributes)
		}
	}
	if len(m.MessageAttributes) != len(attrs) {
		t.Errorf("got message attributes %v, want %d", m.MessageAttributes, len(attrs))
	}
	for name, want := range attrs {
		got := m.MessageAttributes[name]
		if got.DataType != aws.ToString(want.DataType) || aws.ToString(got.StringValue) != aws.ToString(want.StringValue) ||
			!slices.Equal(got.BinaryValue, want.BinaryValue) {
			t.Errorf("message attribute %s = %+v, want %+v", name, got, want)
		}
	}
	if n := s.messagesLeft(t); n != 0 {
		t.Errorf("%d messages left after a successful batch, want 0", n)
	}
}

func TestDeletesSuccessesAndRedeliversReportedFailures(t *testing.T) {
	t.Parallel()
	s := setup(t)
	for _, body := range []string{"ok-1", "fail", "ok-2"} {
		s.send(t, body, nil)
	}

	deliveries := make(chan delivery, 16)
	rn := s.start(t, Config{Pollers: 1, VisibilityTimeout: time.Second, InvocationTimeout: time.Second},
		func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
			var resp events.SQSEventResponse
			for _, m := range ev.Records {
				failed := m.Body == "fail" && m.Attributes[receiveCount] == "1"
				if failed {
					resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: m.MessageId})
				}
				deliver(t, deliveries, delivery{body: m.Body, count: m.Attributes[receiveCount], succeeded: !failed})
			}
			return resp, nil
		})

	seen := map[string][]string{} // body -> receive counts, in delivery order
	for !slices.Contains(seen["fail"], "2") {
		d := receive(t, deliveries, "the failed message to come back")
		seen[d.body] = append(seen[d.body], d.count)
	}
	if err := rn.stop(t); err != nil { // waits for the last batch's deletes
		t.Fatalf("Run: %v", err)
	}
	// More than a visibility timeout has passed since the successes were
	// handled: had they not been deleted they would have come back by now.
	want := map[string][]string{"ok-1": {"1"}, "ok-2": {"1"}, "fail": {"1", "2"}}
	for body, counts := range want {
		if !slices.Equal(seen[body], counts) {
			t.Errorf("%s delivered with receive counts %v, want %v", body, seen[body], counts)
		}
	}
	if n := s.messagesLeft(t); n != 0 {
		t.Errorf("%d messages left, want 0", n)
	}
}

func TestFailedBatchRedeliversEveryMessage(t *testing.T) {
	t.Parallel()
	failures := func(ids ...string) events.SQSEventResponse {
		var r events.SQSEventResponse
		for _, id := range ids {
			r.BatchItemFailures = append(r.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: id})
		}
		return r
	}
	// Each handler fails a batch of two fresh messages in its own way; as in
	// Lambda, all of the batch must come back.
	tests := []struct {
		name string
		fail func(ctx context.Context, t *testing.T, ev events.SQSEvent) (events.SQSEventResponse, error)
	}{
		{"error", func(context.Context, *testing.T, events.SQSEvent) (events.SQSEventResponse, error) {
			return events.SQSEventResponse{}, errors.New("downstream unavailable")
		}},
		{"panic", func(context.Context, *testing.T, events.SQSEvent) (events.SQSEventResponse, error) {
			panic("handler bug")
		}},
		{"unknown item identifier", func(_ context.Context, _ *testing.T, ev events.SQSEvent) (events.SQSEventResponse, error) {
			return failures(ev.Records[0].MessageId, "not-in-this-batch"), nil
		}},
		{"empty item identifier", func(_ context.Context, _ *testing.T, ev events.SQSEvent) (events.SQSEventResponse, error) {
			return failures(ev.Records[0].MessageId, ""), nil
		}},
		{"success after the invocation deadline", func(ctx context.Context, t *testing.T, _ events.SQSEvent) (events.SQSEventResponse, error) {
			<-ctx.Done()
			if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
				t.Errorf("handler context ended with %v, want its deadline", ctx.Err())
			}
			return events.SQSEventResponse{}, nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := setup(t)
			s.send(t, "first", nil)
			s.send(t, "second", nil)

			deliveries := make(chan delivery, 16)
			// A batch is fresh when the handler has not seen its messages
			// before. (Not "receive count 1": a ReceiveMessage answer the
			// SDK lost and retried hides its messages until they come back
			// with count 2, and nothing has handled them yet.)
			var handledMu sync.Mutex
			handled := map[string]bool{}
			rn := s.start(t, Config{BatchSize: 2, BatchWindow: 2 * time.Second, Pollers: 1,
				VisibilityTimeout: 2 * time.Second, InvocationTimeout: time.Second},
				func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
					handledMu.Lock()
					fresh := slices.ContainsFunc(ev.Records, func(m events.SQSMessage) bool { return !handled[m.MessageId] })
					for _, m := range ev.Records {
						handled[m.MessageId] = true
					}
					handledMu.Unlock()
					for _, m := range ev.Records {
						deliver(t, deliveries, delivery{body: m.Body, count: m.Attributes[receiveCount],
							invocation: len(ev.Records), succeeded: !fresh})
					}
					if fresh {
						return tt.fail(ctx, t, ev)
					}
					return events.SQSEventResponse{}, nil
				})

			seen := map[string][]delivery{}
			for !slices.ContainsFunc(seen["first"], delivery.ok) || !slices.ContainsFunc(seen["second"], delivery.ok) {
				d := receive(t, deliveries, "both messages to be handled successfully")
				seen[d.body] = append(seen[d.body], d)
			}
			for body, ds := range seen {
				first, _ := strconv.Atoi(ds[0].count)
				if first < 1 || ds[0].invocation != 2 {
					t.Errorf("%s first delivered with receive count %s in a batch of %d, want a batch of 2",
						body, ds[0].count, ds[0].invocation)
				}
				if len(ds) < 2 || ds[1].count != strconv.Itoa(first+1) {
					t.Errorf("%s deliveries %+v: want it back with the next receive count, %d", body, ds, first+1)
				}
			}
			if err := rn.stop(t); err != nil {
				t.Fatalf("Run: %v", err)
			}
			if n := s.messagesLeft(t); n != 0 {
				t.Errorf("%d messages left after both were handled, want 0", n)
			}
		})
	}
}

func (d delivery) ok() bool { return d.succeeded }

func TestGracefulStopFinishesInFlightBatch(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.send(t, "done", nil)
	s.send(t, "keep", nil)

	started := make(chan struct{}, 1)
	release := make(chan struct{})
	ctxErr := make(chan error, 1)
	rn := s.start(t, Config{BatchSize: 2, BatchWindow: 2 * time.Second, Pollers: 2, InvocationTimeout: 10 * time.Second},
		func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
			deliver(t, started, struct{}{})
			select {
			case <-release:
			case <-t.Context().Done():
			}
			deliver(t, ctxErr, ctx.Err())
			var resp events.SQSEventResponse
			for _, m := range ev.Records {
				if m.Body == "keep" {
					resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: m.MessageId})
				}
			}
			return resp, nil
		})

	receive(t, started, "the handler to start")
	rn.cancel()
	select {
	case err := <-rn.done:
		t.Fatalf("Run returned (%v) while a handler was still running", err)
	default:
	}
	close(release)
	if err := receive(t, ctxErr, "the handler to finish"); err != nil {
		t.Errorf("shutdown reached the handler's context: %v", err)
	}
	if err := rn.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	// "done" was deleted after shutdown began; "keep" is still in flight.
	if n := s.messagesLeft(t); n != 1 {
		t.Errorf("%d messages left, want 1 (the reported failure)", n)
	}
}

func TestBatchWindowGathersAcrossReceives(t *testing.T) {
	t.Parallel()
	s := setup(t)
	const sent = 12 // more than one ReceiveMessage or DeleteMessageBatch can carry
	for i := range sent {
		s.send(t, fmt.Sprintf("m-%d", i), nil)
	}

	sizes := make(chan int, 4)
	// The batch closes when all of them are in (BatchSize), long before a
	// window that only bounds a slow machine's receives. A receive whose
	// answer the emulator lost hides its messages for the visibility
	// timeout (the test queue's minute): the window outlasts that, and the
	// wait outlasts the window.
	window := min(awstest.Scale(90*time.Second), 5*time.Minute)
	rn := s.start(t, Config{BatchSize: sent, BatchWindow: window, Pollers: 1},
		func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
			deliver(t, sizes, len(ev.Records))
			return events.SQSEventResponse{}, nil
		})
	if n := receiveWithin(t, sizes, "the batch", window+testTimeout); n != sent {
		t.Fatalf("first batch has %d records, want all %d", n, sent)
	}
	if err := rn.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if n := s.messagesLeft(t); n != 0 {
		t.Errorf("%d messages left after the batch, want 0", n)
	}
}

func TestRunReportsMissingQueue(t *testing.T) {
	t.Parallel()
	s := setup(t)
	r, err := New(s.client, Config{QueueURL: s.queueURL + "-missing", Logger: testLogger(t)}, failingHandler(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Run(t.Context()); !errors.Is(err, ErrQueueNotFound) {
		t.Errorf("Run = %v, want ErrQueueNotFound", err)
	}
}

// receiveObserver passes calls to a real client and reports every
// ReceiveMessage that returned messages.
type receiveObserver struct {
	SQSClient
	t        *testing.T
	received chan<- int
}

func (o receiveObserver) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	out, err := o.SQSClient.ReceiveMessage(ctx, in, optFns...)
	if err == nil && len(out.Messages) > 0 {
		deliver(o.t, o.received, len(out.Messages))
	}
	return out, err
}

func TestStopHandsOverGatheredMessages(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.send(t, "gathered", nil)

	received := make(chan int, 4)
	invoked := make(chan []string, 1)
	r, err := New(receiveObserver{SQSClient: s.client, t: t, received: received}, Config{
		QueueURL:    s.queueURL,
		BatchSize:   10,
		BatchWindow: time.Minute, // far longer than the test waits
		Pollers:     1,
		Logger:      testLogger(t),
	}, func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		var bodies []string
		for _, m := range ev.Records {
			bodies = append(bodies, m.Body)
		}
		deliver(t, invoked, bodies)
		return events.SQSEventResponse{}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := runAsync(ctx, r)

	if n := receive(t, received, "the message to be received"); n != 1 {
		t.Fatalf("received %d messages, want 1", n)
	}
	cancel() // the runner is now waiting for more messages to fill its window
	if bodies := receive(t, invoked, "the gathered batch to be handed over"); !slices.Equal(bodies, []string{"gathered"}) {
		t.Errorf("handler got %v, want [gathered]", bodies)
	}
	if err := waitRun(t, done); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if n := s.messagesLeft(t); n != 0 {
		t.Errorf("%d messages left, want 0", n)
	}
}
