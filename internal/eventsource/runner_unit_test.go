package eventsource

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/leasehold/leasehold/internal/sqsevent"
)

// These tests cover paths the local stack cannot produce on demand (a
// failing ReceiveMessage, a Run still starting). Everything else runs
// against the stack in runner_test.go.

var errUnexpectedCall = errors.New("unexpected SQS call")

// unusedClient satisfies SQSClient for tests that never reach SQS.
type unusedClient struct{}

func (unusedClient) GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	return nil, errUnexpectedCall
}

func (unusedClient) ReceiveMessage(context.Context, *sqs.ReceiveMessageInput, ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	return nil, errUnexpectedCall
}

func (unusedClient) DeleteMessageBatch(context.Context, *sqs.DeleteMessageBatchInput, ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	return nil, errUnexpectedCall
}

// scriptedClient answers GetQueueAttributes and ReceiveMessage with the
// functions it holds.
type scriptedClient struct {
	unusedClient
	getAttributes func(ctx context.Context) (*sqs.GetQueueAttributesOutput, error)
	receive       func(ctx context.Context) (*sqs.ReceiveMessageOutput, error)
}

func (c scriptedClient) GetQueueAttributes(ctx context.Context, _ *sqs.GetQueueAttributesInput, _ ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	return c.getAttributes(ctx)
}

func (c scriptedClient) ReceiveMessage(ctx context.Context, _ *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	return c.receive(ctx)
}

func queueAttributes(context.Context) (*sqs.GetQueueAttributesOutput, error) {
	return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{
		"QueueArn":          "arn:aws:sqs:us-east-1:123456789012:work",
		"VisibilityTimeout": "60",
	}}, nil
}

func failingHandler(t *testing.T) Handler {
	return func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
		t.Error("handler called, but no message was received")
		return events.SQSEventResponse{}, nil
	}
}

func testLogger(t testing.TB) *slog.Logger {
	t.Helper()
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// runAsync starts r.Run(ctx) and returns the channel its result arrives on.
func runAsync(ctx context.Context, r *Runner) <-chan error {
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	return done
}

// waitRun waits for Run to return and gives its result.
func waitRun(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(testTimeout):
		t.Fatal("Run did not return")
		return nil
	}
}

func TestRunRefusesSecondConcurrentRun(t *testing.T) {
	t.Parallel()
	starting := make(chan struct{})
	client := scriptedClient{getAttributes: func(ctx context.Context) (*sqs.GetQueueAttributesOutput, error) {
		close(starting)
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	r, err := New(client, Config{QueueURL: "https://sqs.us-east-1.amazonaws.com/123456789012/work", Logger: testLogger(t)}, failingHandler(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := runAsync(ctx, r)
	<-starting

	if err := r.Run(t.Context()); !errors.Is(err, ErrAlreadyRunning) {
		t.Errorf("second Run = %v, want ErrAlreadyRunning", err)
	}
	cancel()
	if err := waitRun(t, done); err != nil {
		t.Errorf("Run cancelled while starting = %v, want nil", err)
	}
}

func TestRunBacksOffAfterReceiveErrors(t *testing.T) {
	t.Parallel()
	calls := make(chan time.Time, 10)
	client := scriptedClient{
		getAttributes: queueAttributes,
		receive: func(ctx context.Context) (*sqs.ReceiveMessageOutput, error) {
			select {
			case calls <- time.Now():
			default:
			}
			return nil, errors.New("service unavailable")
		},
	}
	r, err := New(client, Config{
		QueueURL: "https://sqs.us-east-1.amazonaws.com/123456789012/work",
		Pollers:  1,
		Logger:   testLogger(t),
	}, failingHandler(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := runAsync(ctx, r)

	var at [3]time.Time
	for i := range at {
		select {
		case at[i] = <-calls:
		case <-time.After(testTimeout):
			t.Fatalf("receive %d never happened", i+1)
		}
	}
	// Retry i waits at least half of backoffBase<<(i-1).
	if gap := at[1].Sub(at[0]); gap < backoffBase/2 {
		t.Errorf("first retry after %s, want at least %s", gap, backoffBase/2)
	}
	if gap := at[2].Sub(at[1]); gap < backoffBase {
		t.Errorf("second retry after %s, want at least %s", gap, backoffBase)
	}
	cancel() // lands in a backoff wait, which must end at once
	if err := waitRun(t, done); err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
}

func TestRunFailsWhenQueueLookupFails(t *testing.T) {
	t.Parallel()
	client := scriptedClient{getAttributes: func(context.Context) (*sqs.GetQueueAttributesOutput, error) {
		return nil, errors.New("connection refused")
	}}
	r, err := New(client, Config{QueueURL: "https://sqs.us-east-1.amazonaws.com/123456789012/work", Logger: testLogger(t)}, failingHandler(t))
	if err != nil {
		t.Fatal(err)
	}
	err = r.Run(t.Context())
	if err == nil || errors.Is(err, ErrQueueNotFound) {
		t.Errorf("Run = %v, want a start-up error that is not ErrQueueNotFound", err)
	}
}

// deletingClient records DeleteMessageBatch calls on a channel.
type deletingClient struct {
	unusedClient
	deletes chan []string // receipt handles of each call
}

func (c deletingClient) DeleteMessageBatch(_ context.Context, in *sqs.DeleteMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	var handles []string
	for _, e := range in.Entries {
		handles = append(handles, *e.ReceiptHandle)
	}
	c.deletes <- handles
	return &sqs.DeleteMessageBatchOutput{}, nil
}

// A message the handler acknowledges is deleted within the delete window,
// while the rest of the batch still runs; a batch that then fails (here: a
// panic) loses nothing but its unacknowledged messages' deletes.
func TestAcknowledgedMessageIsDeletedBeforeTheBatchEnds(t *testing.T) {
	t.Parallel()
	for _, ending := range []string{"returns", "panics"} {
		t.Run(ending, func(t *testing.T) {
			t.Parallel()
			client := deletingClient{deletes: make(chan []string, 10)}
			h := func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
				if !Ack(ctx, "a") {
					t.Error("Ack found no runner in the context")
				}
				// The batch goes on only once "a" is gone.
				select {
				case got := <-client.deletes:
					if len(got) != 1 || got[0] != "rh-a" {
						t.Errorf("early delete %v, want [rh-a]", got)
					}
				case <-time.After(testTimeout):
					t.Error("acknowledged message not deleted while the batch ran")
				}
				if Ack(ctx, "a") {
					t.Error("second Ack of the same message accepted")
				}
				if ending == "panics" {
					panic("crash after the first message")
				}
				return events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{{ItemIdentifier: "c"}}}, nil
			}
			r, err := New(client, Config{QueueURL: "https://sqs.us-east-1.amazonaws.com/123456789012/work", Logger: testLogger(t)}, h)
			if err != nil {
				t.Fatal(err)
			}
			queue, err := sqsevent.ParseQueueARN("arn:aws:sqs:us-east-1:123456789012:work")
			if err != nil {
				t.Fatal(err)
			}
			var msgs []types.Message
			for _, id := range []string{"a", "b", "c"} {
				msgs = append(msgs, types.Message{MessageId: aws.String(id), ReceiptHandle: aws.String("rh-" + id), Body: aws.String("{}")})
			}
			r.deletes = newDeletes(r)
			stop := make(chan struct{})
			var deleter sync.WaitGroup
			deleter.Go(func() { r.deletes.run(t.Context(), stop) })
			r.invoke(t.Context(), queue.Event(msgs), testLogger(t))
			close(stop)
			deleter.Wait()
			close(client.deletes)
			var rest [][]string
			for d := range client.deletes {
				rest = append(rest, d)
			}
			want := [][]string{{"rh-b"}} // the success the response reported
			if ending == "panics" {
				want = nil
			}
			if !reflect.DeepEqual(rest, want) {
				t.Errorf("deletes at the end of the batch %v, want %v", rest, want)
			}
			if Ack(context.Background(), "a") {
				t.Error("Ack without a runner reported a listener")
			}
		})
	}
}

// The queue's visibility (60s) shorter than the invocation timeout is warned
// about; a receive visibility set on purpose is not.
func TestVisibilityWarningOnlyForTheQueuesOwn(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		visibility time.Duration
		warn       bool
	}{{0, true}, {30 * time.Second, false}} {
		var logs bytes.Buffer
		r, err := New(scriptedClient{getAttributes: queueAttributes}, Config{
			QueueURL:          "https://sqs.us-east-1.amazonaws.com/123456789012/work",
			InvocationTimeout: 2 * time.Minute,
			VisibilityTimeout: c.visibility,
			Logger:            slog.New(slog.NewTextHandler(&logs, nil)),
		}, failingHandler(t))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.resolveQueue(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(logs.String(), "visibility timeout is shorter"); got != c.warn {
			t.Errorf("receive visibility %s: warned %v, want %v; logs: %s", c.visibility, got, c.warn, logs.String())
		}
	}
}

// aheadClient hands out two one-message batches, then nothing, and records
// receives and visibility changes.
type aheadClient struct {
	unusedClient
	mu       sync.Mutex
	receives int
	received chan int    // the number of each receive
	extended chan string // receipt handles of held messages extended
	batches  int         // the receives that bring a message (zero: 2)
}

func (c *aheadClient) GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{
		"QueueArn": "arn:aws:sqs:us-east-1:123456789012:work", "VisibilityTimeout": "4",
	}}, nil
}

func (c *aheadClient) ReceiveMessage(ctx context.Context, _ *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	c.mu.Lock()
	c.receives++
	n := c.receives
	c.mu.Unlock()
	select {
	case c.received <- n:
	default:
	}
	if n <= cmp.Or(c.batches, 2) {
		id := fmt.Sprintf("m%d", n)
		return &sqs.ReceiveMessageOutput{Messages: []types.Message{{MessageId: aws.String(id), ReceiptHandle: aws.String("rh-" + id), Body: aws.String("{}")}}}, nil
	}
	select { // an empty long poll, cut short
	case <-ctx.Done():
	case <-time.After(20 * time.Millisecond):
	}
	return &sqs.ReceiveMessageOutput{}, nil
}

func (c *aheadClient) ChangeMessageVisibilityBatch(_ context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	for _, e := range in.Entries {
		if e.VisibilityTimeout != 4 {
			return nil, fmt.Errorf("held message extended by %ds, want the queue's 4s", e.VisibilityTimeout)
		}
		c.extended <- aws.ToString(e.ReceiptHandle)
	}
	return &sqs.ChangeMessageVisibilityBatchOutput{}, nil
}

// A poller receives its next batch while its current one runs, holds it
// until the current one ends (one batch per poller at a time), and keeps
// it hidden meanwhile by extending its visibility. Config.Prepare sees it
// while it waits, and its handler runs with the context Prepare made.
func TestReceivesAheadAndHoldsTheNextBatch(t *testing.T) {
	t.Parallel()
	client := &aheadClient{received: make(chan int, 100), extended: make(chan string, 100)}
	var mu sync.Mutex
	running, order, prepared := 0, []string{}, []string{}
	type preparedKey struct{}
	prepare := func(ctx context.Context, ev events.SQSEvent) context.Context {
		mu.Lock()
		prepared = append(prepared, ev.Records[0].MessageId)
		mu.Unlock()
		return context.WithValue(ctx, preparedKey{}, ev.Records[0].MessageId)
	}
	h := func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		id := ev.Records[0].MessageId
		if got := ctx.Value(preparedKey{}); got != id {
			t.Errorf("batch %s runs with the context Prepare made for %v", id, got)
		}
		mu.Lock()
		running++
		order = append(order, id)
		if running > 1 {
			t.Errorf("batch %s started while another ran: one batch per poller", id)
		}
		mu.Unlock()
		if id == "m1" {
			// The next batch is received while this one runs ...
			for seen := 0; seen < 2; {
				select {
				case seen = <-client.received:
				case <-time.After(testTimeout):
					t.Error("no receive while the first batch ran")
					return events.SQSEventResponse{}, nil
				}
			}
			// ... and kept hidden while it waits.
			select {
			case rh := <-client.extended:
				if rh != "rh-m2" {
					t.Errorf("extended %s while m1 ran, want rh-m2", rh)
				}
			case <-time.After(testTimeout):
				t.Error("the batch received ahead was not extended while it waited")
			}
			// Prepare saw it while it waited, before its turn.
			mu.Lock()
			if !slices.Contains(prepared, "m2") {
				t.Errorf("batch m2 waits unprepared (prepared: %v)", prepared)
			}
			mu.Unlock()
		}
		mu.Lock()
		running--
		mu.Unlock()
		return events.SQSEventResponse{}, nil
	}
	r, err := New(deleteOK{client}, Config{QueueURL: "https://sqs.us-east-1.amazonaws.com/123456789012/work", Pollers: 1, Logger: testLogger(t), Prepare: prepare}, h)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := runAsync(ctx, r)
	deadline := time.After(testTimeout)
	for {
		mu.Lock()
		n := len(order)
		mu.Unlock()
		if n == 2 {
			break
		}
		select {
		case <-deadline:
			t.Fatalf("batches handled: %v, want m1 then m2", order)
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	if err := waitRun(t, done); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(order, []string{"m1", "m2"}) {
		t.Fatalf("batches handled in order %v, want m1 then m2", order)
	}
}

// deleteOK is an aheadClient whose deletes succeed.
type deleteOK struct{ *aheadClient }

func (deleteOK) DeleteMessageBatch(context.Context, *sqs.DeleteMessageBatchInput, ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	return &sqs.DeleteMessageBatchOutput{}, nil
}

// With InFlight 2 a poller starts the batch it received ahead while its
// first one still runs, and holds a third until one of the two has ended:
// the first two batches below each wait for the other to start, which one
// batch at a time never allows.
func TestInFlightRunsAPollersBatchesTogether(t *testing.T) {
	t.Parallel()
	client := &aheadClient{received: make(chan int, 100), extended: make(chan string, 100), batches: 3}
	var mu sync.Mutex
	running, most, order := 0, 0, []string{}
	both := make(chan struct{})
	h := func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		id := ev.Records[0].MessageId
		mu.Lock()
		running++
		most = max(most, running)
		order = append(order, id)
		if running == 2 && (id == "m1" || id == "m2") {
			close(both)
		}
		mu.Unlock()
		if id != "m3" {
			select {
			case <-both:
			case <-time.After(testTimeout):
				t.Errorf("batch %s ran alone: the poller's other batch did not start beside it", id)
			}
		}
		mu.Lock()
		running--
		mu.Unlock()
		return events.SQSEventResponse{}, nil
	}
	r, err := New(deleteOK{client}, Config{QueueURL: "https://sqs.us-east-1.amazonaws.com/123456789012/work", Pollers: 1, InFlight: 2, Logger: testLogger(t)}, h)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := runAsync(ctx, r)
	deadline := time.After(testTimeout)
	for {
		mu.Lock()
		n := len(order)
		mu.Unlock()
		if n == 3 {
			break
		}
		select {
		case <-deadline:
			t.Fatalf("batches handled: %v, want m1, m2 and m3", order)
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	if err := waitRun(t, done); err != nil {
		t.Fatal(err)
	}
	if most != 2 {
		t.Fatalf("at most %d batches of the poller ran at once, want InFlight's 2", most)
	}
}
