package eventsource

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// countingQueue is an in-memory queue of n messages that counts the
// DeleteMessageBatch calls and the deletes of each message.
type countingQueue struct {
	mu      sync.Mutex
	next, n int
	calls   int
	deleted map[string]int
	done    chan struct{} // closed once every message was deleted
}

func newCountingQueue(n int) *countingQueue {
	return &countingQueue{n: n, deleted: map[string]int{}, done: make(chan struct{})}
}

func (q *countingQueue) GetQueueAttributes(ctx context.Context, _ *sqs.GetQueueAttributesInput, _ ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	return queueAttributes(ctx)
}

// ReceiveMessage hands out up to ten messages, and waits (as a long poll
// does) when none are left.
func (q *countingQueue) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	q.mu.Lock()
	var out []types.Message
	for ; q.next < q.n && len(out) < int(in.MaxNumberOfMessages); q.next++ {
		id := fmt.Sprint("m", q.next)
		out = append(out, types.Message{MessageId: aws.String(id), ReceiptHandle: aws.String("rh-" + id), Body: aws.String("{}")})
	}
	q.mu.Unlock()
	if len(out) == 0 {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return &sqs.ReceiveMessageOutput{Messages: out}, nil
}

func (q *countingQueue) DeleteMessageBatch(_ context.Context, in *sqs.DeleteMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.calls++
	for _, e := range in.Entries {
		q.deleted[*e.ReceiptHandle]++
	}
	if len(q.deleted) == q.n {
		select {
		case <-q.done:
		default:
			close(q.done)
		}
	}
	return &sqs.DeleteMessageBatchOutput{}, nil
}

// runAcking runs n messages through Run with two pollers and a handler
// that acknowledges each message as soon as it is done, as the worker
// does; it returns the DeleteMessageBatch calls per message, after
// checking that each message was deleted once.
func runAcking(tb testing.TB, n int) float64 {
	q := newCountingQueue(n)
	h := func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		var wg sync.WaitGroup
		for _, m := range ev.Records {
			wg.Go(func() { Ack(ctx, m.MessageId) })
		}
		wg.Wait()
		return events.SQSEventResponse{}, nil
	}
	r, err := New(q, Config{QueueURL: "https://sqs.us-east-1.amazonaws.com/123456789012/work", Pollers: 2, Logger: testLogger(tb)}, h)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	select {
	case <-q.done:
	case <-time.After(testTimeout):
		tb.Errorf("not every message was deleted within %s", testTimeout)
	}
	cancel()
	if err := <-done; err != nil {
		tb.Fatal(err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for h, c := range q.deleted {
		if c != 1 {
			tb.Errorf("%s deleted %d times", h, c)
		}
	}
	if len(q.deleted) != n {
		tb.Errorf("%d of %d messages deleted", len(q.deleted), n)
	}
	return float64(q.calls) / float64(n)
}

// Run deletes processed messages ten to a call across batches, even when
// the handler acknowledges each one as soon as it is done: at most 0.15
// DeleteMessageBatch calls per message (it was about one per message).
func TestRunDeletesTenToACall(t *testing.T) {
	t.Parallel()
	if per := runAcking(t, 500); per > 0.15 {
		t.Errorf("%.3f DeleteMessageBatch calls per message, want at most 0.15", per)
	}
}

// BenchmarkRunDeletes reports Run's DeleteMessageBatch calls per message.
func BenchmarkRunDeletes(b *testing.B) {
	var per float64
	for b.Loop() {
		per = runAcking(b, 1000)
	}
	b.ReportMetric(per, "deletes/msg")
}

// slowDeletes is a client whose every DeleteMessageBatch takes d; it
// records the most calls ever in flight at once and the messages deleted.
type slowDeletes struct {
	unusedClient
	d time.Duration

	mu               sync.Mutex
	inFlight, most   int
	deleted, entries int
}

func (c *slowDeletes) DeleteMessageBatch(_ context.Context, in *sqs.DeleteMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	c.mu.Lock()
	c.inFlight++
	c.most = max(c.most, c.inFlight)
	c.mu.Unlock()
	time.Sleep(c.d)
	c.mu.Lock()
	c.inFlight--
	c.deleted += len(in.Entries)
	c.entries = max(c.entries, len(in.Entries))
	c.mu.Unlock()
	return &sqs.DeleteMessageBatchOutput{}, nil
}

// Deletes go out concurrently, never more calls at once than deleteCalls,
// and add blocks while the messages waiting for a call are at the bound.
func TestDeletesConcurrentAndBounded(t *testing.T) {
	t.Parallel()
	client := &slowDeletes{d: 20 * time.Millisecond}
	r, err := New(client, Config{QueueURL: "https://sqs.us-east-1.amazonaws.com/123456789012/work", Pollers: 2, Logger: testLogger(t)}, func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
		return events.SQSEventResponse{}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	d := newDeletes(r)
	stop := make(chan struct{})
	var deleter sync.WaitGroup
	deleter.Go(func() { d.run(t.Context(), stop) })
	const adders, each = 8, 50 // 400 messages, far above the bound of 40 waiting
	var wg sync.WaitGroup
	for a := range adders {
		wg.Go(func() {
			for i := range each {
				d.add([]events.SQSMessage{{MessageId: fmt.Sprint(a, "-", i), ReceiptHandle: fmt.Sprint("rh-", a, "-", i)}})
				d.mu.Lock()
				if n := len(d.wait); n > d.limit {
					t.Errorf("%d messages waiting, bound %d", n, d.limit)
				}
				d.mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(stop)
	deleter.Wait()
	client.mu.Lock()
	defer client.mu.Unlock()
	if client.deleted != adders*each {
		t.Errorf("%d messages deleted, want %d", client.deleted, adders*each)
	}
	if want := deleteCalls(2); client.most > want || client.most < 2 {
		t.Errorf("at most %d calls in flight at once, want 2 to %d", client.most, want)
	}
	if client.entries != receiveLimit {
		t.Errorf("largest call deleted %d, want %d", client.entries, receiveLimit)
	}
}
