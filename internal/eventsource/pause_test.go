package eventsource

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// pauseClient is a queue of named messages. A receive takes every visible
// message; while none is visible it waits (a long poll) until one is or
// its context ends. A visibility change to 0 makes a message visible again
// (handed back); deletes remove it.
type pauseClient struct {
	mu       sync.Mutex
	visible  []string
	receives int
	arrived  chan struct{} // signalled when a message becomes visible
	waiting  chan int      // the number of each receive that waits for a message
	handed   []string      // handed back, in order
	quit     chan struct{} // closed to end every long poll: the test is over
}

func newPauseClient() *pauseClient {
	return &pauseClient{arrived: make(chan struct{}, 1), waiting: make(chan int, 100), quit: make(chan struct{})}
}

// stop ends the long polls (Run waits for the one in flight) and Run.
func (c *pauseClient) stop(t *testing.T, cancel context.CancelFunc, done <-chan error) {
	t.Helper()
	close(c.quit)
	cancel()
	if err := waitRun(t, done); err != nil {
		t.Fatal(err)
	}
}

func (c *pauseClient) GetQueueAttributes(ctx context.Context, _ *sqs.GetQueueAttributesInput, _ ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	return queueAttributes(ctx)
}

func (c *pauseClient) send(id string) {
	c.mu.Lock()
	c.visible = append(c.visible, id)
	c.mu.Unlock()
	c.signal()
}

func (c *pauseClient) signal() {
	select {
	case c.arrived <- struct{}{}:
	default:
	}
}

func (c *pauseClient) ReceiveMessage(ctx context.Context, _ *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	c.mu.Lock()
	c.receives++
	n := c.receives
	c.mu.Unlock()
	for said := false; ; {
		c.mu.Lock()
		ids := c.visible
		c.visible = nil
		c.mu.Unlock()
		if len(ids) > 0 {
			msgs := make([]types.Message, len(ids))
			for i, id := range ids {
				msgs[i] = types.Message{MessageId: aws.String(id), ReceiptHandle: aws.String("rh-" + id), Body: aws.String("{}")}
			}
			return &sqs.ReceiveMessageOutput{Messages: msgs}, nil
		}
		if !said {
			select {
			case c.waiting <- n:
			case <-c.quit:
			}
			said = true
		}
		select {
		case <-ctx.Done():
			return &sqs.ReceiveMessageOutput{}, nil
		case <-c.quit:
			return &sqs.ReceiveMessageOutput{}, nil
		case <-c.arrived:
		}
	}
}

// waitForPoll waits until a receive numbered at least n waits for a
// message: a long poll in flight.
func (c *pauseClient) waitForPoll(t *testing.T, n int) {
	t.Helper()
	for receive(t, c.waiting, fmt.Sprintf("a receive numbered %d or more to wait for a message", n)) < n {
	}
}

func (c *pauseClient) ChangeMessageVisibilityBatch(_ context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	c.mu.Lock()
	for _, e := range in.Entries {
		if e.VisibilityTimeout != 0 {
			continue // an extension of a held batch
		}
		id := aws.ToString(e.ReceiptHandle)[len("rh-"):]
		c.handed = append(c.handed, id)
		c.visible = append(c.visible, id)
	}
	c.mu.Unlock()
	c.signal()
	return &sqs.ChangeMessageVisibilityBatchOutput{}, nil
}

func (c *pauseClient) DeleteMessageBatch(context.Context, *sqs.DeleteMessageBatchInput, ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	return &sqs.DeleteMessageBatchOutput{}, nil
}

func (c *pauseClient) handedBack() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.handed)
}

// runLog records the batches a handler ran, in order.
type runLog struct {
	mu  sync.Mutex
	ran []string
}

func (l *runLog) add(ev events.SQSEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range ev.Records {
		l.ran = append(l.ran, r.MessageId)
	}
}

func (l *runLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.ran)
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A batch that a receive brings after the queue was paused (a long poll in
// flight when `leasehold pause` ran) is handed back unrun and unprepared,
// visible again at once, and runs after the queue is resumed.
func TestPauseHandsBackWhatAPollInFlightBrings(t *testing.T) {
	t.Parallel()
	client := newPauseClient()
	var paused atomic.Bool
	var ran, prepared runLog
	h := func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		ran.add(ev)
		return events.SQSEventResponse{}, nil
	}
	prepare := func(ctx context.Context, ev events.SQSEvent) context.Context {
		prepared.add(ev)
		return ctx
	}
	r, err := New(client, Config{QueueURL: "https://sqs.us-east-1.amazonaws.com/123456789012/work", Pollers: 1, Logger: testLogger(t),
		Paused: func(context.Context) bool { return paused.Load() }, Prepare: prepare,
		Release: func(context.Context) { t.Error("released a batch that was never prepared") }}, h)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := runAsync(ctx, r)
	// The poller has asked whether the queue is paused and is polling; the
	// pause lands, then a message arrives at the poll in flight.
	client.waitForPoll(t, 1)
	paused.Store(true)
	client.send("during")
	waitUntil(t, "the message the poll in flight brought was handed back", func() bool { return slices.Contains(client.handedBack(), "during") })
	if got := ran.get(); len(got) > 0 {
		t.Fatalf("ran %v while the queue was paused", got)
	}
	if got := prepared.get(); len(got) > 0 {
		t.Fatalf("prepared %v while the queue was paused", got)
	}
	// Resumed: it runs, once.
	paused.Store(false)
	waitUntil(t, "the handed-back message ran after the resume", func() bool { return slices.Contains(ran.get(), "during") })
	client.send("after")
	waitUntil(t, "a message sent after the resume ran", func() bool { return slices.Contains(ran.get(), "after") })
	client.stop(t, cancel, done)
	if got := ran.get(); !slices.Equal(got, []string{"during", "after"}) {
		t.Fatalf("ran %v, want during then after, each once", got)
	}
	if got := client.handedBack(); !slices.Equal(got, []string{"during"}) {
		t.Fatalf("handed back %v, want during once", got)
	}
}

// A batch received ahead and held while the running one ends is handed
// back, not run, when the queue was paused meanwhile; the running batch
// finishes.
func TestPauseHandsBackTheBatchReceivedAhead(t *testing.T) {
	t.Parallel()
	client := newPauseClient()
	var paused atomic.Bool
	var ran runLog
	finish := make(chan struct{})
	h := func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		ran.add(ev)
		if ev.Records[0].MessageId == "long" {
			<-finish
		}
		return events.SQSEventResponse{}, nil
	}
	// Prepare runs on a batch received ahead just before it is held;
	// Release gets the context Prepare made for a batch handed back.
	type preparedKey struct{}
	prepared, released := make(chan string, 10), make(chan string, 10)
	prepare := func(ctx context.Context, ev events.SQSEvent) context.Context {
		prepared <- ev.Records[0].MessageId
		return context.WithValue(ctx, preparedKey{}, ev.Records[0].MessageId)
	}
	release := func(ctx context.Context) { released <- ctx.Value(preparedKey{}).(string) }
	r, err := New(client, Config{QueueURL: "https://sqs.us-east-1.amazonaws.com/123456789012/work", Pollers: 1, Logger: testLogger(t),
		Paused: func(context.Context) bool { return paused.Load() }, Prepare: prepare, Release: release}, h)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := runAsync(ctx, r)
	client.send("long")
	waitUntil(t, "the long batch runs", func() bool { return slices.Contains(ran.get(), "long") })
	client.send("ahead")
	// The poller receives it while long runs, and holds it.
	for _, want := range []string{"long", "ahead"} {
		if got := receive(t, prepared, want+" to be received and prepared"); got != want {
			t.Fatalf("prepared %s, want %s", got, want)
		}
	}
	paused.Store(true)
	close(finish)
	waitUntil(t, "the batch received ahead was handed back", func() bool { return slices.Contains(client.handedBack(), "ahead") })
	if id := receive(t, released, "the batch handed back to be released (what Prepare started, joined)"); id != "ahead" {
		t.Fatalf("released the batch prepared as %s, want ahead", id)
	}
	if got := ran.get(); !slices.Equal(got, []string{"long"}) {
		t.Fatalf("ran %v while paused, want only long", got)
	}
	paused.Store(false)
	waitUntil(t, "the handed-back batch ran after the resume", func() bool { return slices.Contains(ran.get(), "ahead") })
	client.stop(t, cancel, done)
	if got := ran.get(); !slices.Equal(got, []string{"long", "ahead"}) {
		t.Fatalf("ran %v, want long then ahead, each once", got)
	}
	if len(released) != 0 {
		t.Fatalf("released a batch that ran: %s", <-released)
	}
	if n := len(client.handedBack()); n != 1 {
		t.Fatalf("handed back %d times, want once: %v", n, client.handedBack())
	}
}
