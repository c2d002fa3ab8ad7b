package awstest

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/leasehold/leasehold/internal/sqsevent"
)

// Tests receive from SQS only through this file (Receive, ReceiveEvent,
// ReceiveN, Drain); TestTestsReceiveThroughAwstest fails on any other
// ReceiveMessage call in a test file.
//
// A lost answer: the emulator handed messages out (they are hidden for the
// visibility timeout) but the answer never reached the test; the SDK then
// retried, and the retry found the queue empty. The SDK's attempt results
// tell: a receive that took more than one attempt, or failed, may have
// lost messages. These helpers then keep receiving until the hidden
// messages come back, so a test waits out the visibility timeout instead
// of failing within it.

// lostWaitSlack is added to the visibility timeout when waiting for a lost
// answer's messages to come back.
const lostWaitSlack = 10 * time.Second

// receiveOnce makes one ReceiveMessage call (with the SDK's retries) and
// reports whether an answer may have been lost on the way: the call took
// more than one attempt, or failed (err).
func receiveOnce(client *sqs.Client, in *sqs.ReceiveMessageInput) (msgs []sqstypes.Message, lost bool, err error) {
	wait := time.Duration(in.WaitTimeSeconds) * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), wait+callTimeout)
	defer cancel()
	out, err := client.ReceiveMessage(ctx, in)
	if err != nil {
		return nil, true, err
	}
	if res, ok := retry.GetAttemptResults(out.ResultMetadata); ok && len(res.Results) > 1 {
		lost = true
	}
	return out.Messages, lost, nil
}

// receiveLogged is receiveOnce for the test's goroutine: it says when an
// answer may be lost, and fails the test on an error once the test's
// context has ended (nothing will wait for the messages any more).
func receiveLogged(t testing.TB, client *sqs.Client, in *sqs.ReceiveMessageInput) ([]sqstypes.Message, bool, error) {
	t.Helper()
	msgs, lost, err := receiveOnce(client, in)
	switch {
	case err != nil && t.Context().Err() != nil:
		t.Fatalf("awstest: receive from %s: %v", aws.ToString(in.QueueUrl), err)
	case err != nil:
		t.Logf("awstest: a receive from %s failed; its answer may be lost, receiving again: %v", aws.ToString(in.QueueUrl), err)
	case lost:
		t.Logf("awstest: a receive from %s took more than one attempt; an earlier answer may be lost", aws.ToString(in.QueueUrl))
	}
	return msgs, lost, err
}

// visibilityOf is the visibility timeout a receive of in hides messages
// for: its own, or the queue's.
func visibilityOf(t testing.TB, client *sqs.Client, in *sqs.ReceiveMessageInput) time.Duration {
	t.Helper()
	if in.VisibilityTimeout > 0 {
		return time.Duration(in.VisibilityTimeout) * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	out, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       in.QueueUrl,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameVisibilityTimeout},
	})
	if err != nil {
		t.Fatalf("awstest: visibility timeout of %s: %v", aws.ToString(in.QueueUrl), err)
	}
	s, err := strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameVisibilityTimeout)])
	if err != nil {
		t.Fatalf("awstest: visibility timeout of %s: %v", aws.ToString(in.QueueUrl), err)
	}
	return time.Duration(s) * time.Second
}

// Receive makes one receive of in and returns its messages. When the
// answer may have been lost, it receives again until messages come or the
// lost ones' visibility timeout (plus a margin) has passed, so an empty
// result means the queue had nothing visible to give, not that an answer
// went missing. WaitTimeSeconds 0 is made 1 for the repeats.
func Receive(t testing.TB, client *sqs.Client, in *sqs.ReceiveMessageInput) []sqstypes.Message {
	t.Helper()
	msgs, lost, err := receiveLogged(t, client, in)
	if !lost || len(msgs) > 0 {
		return msgs
	}
	until := time.Now().Add(visibilityOf(t, client, in) + Scale(lostWaitSlack))
	again := *in
	again.WaitTimeSeconds = max(again.WaitTimeSeconds, 1)
	for time.Now().Before(until) {
		if msgs, _, err = receiveLogged(t, client, &again); len(msgs) > 0 {
			return msgs
		}
	}
	if err != nil {
		t.Fatalf("awstest: receive from %s: %v", aws.ToString(in.QueueUrl), err)
	}
	return nil
}

// ReceiveEvent takes up to max messages off url with one receive that
// long-polls for wait and hides them for visibility seconds (through
// Receive: a lost answer is waited out), and returns them as the event
// Lambda's event source mapping would deliver: system and message
// attributes, queue ARN and region, as internal/sqsevent builds them for
// the off-Lambda runner.
func ReceiveEvent(t testing.TB, client *sqs.Client, url string, max int32, wait time.Duration, visibility int32) events.SQSEvent {
	t.Helper()
	queue := queueOf(t, client, url)
	return queue.Event(Receive(t, client, eventInput(url, max, wait, visibility)))
}

func eventInput(url string, max int32, wait time.Duration, visibility int32) *sqs.ReceiveMessageInput {
	return &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(url),
		MaxNumberOfMessages:         max,
		WaitTimeSeconds:             int32(wait / time.Second),
		VisibilityTimeout:           visibility,
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	}
}

func queueOf(t testing.TB, client *sqs.Client, url string) sqsevent.Queue {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	attrs, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
	})
	if err != nil {
		t.Fatalf("awstest: attributes of %s: %v", url, err)
	}
	queue, err := sqsevent.ParseQueueARN(attrs.Attributes[string(sqstypes.QueueAttributeNameQueueArn)])
	if err != nil {
		t.Fatalf("awstest: %s: %v", url, err)
	}
	return queue
}

// ReceiveN receives from url until it holds n messages that keep accepts
// (nil keeps all), failing the test if budget runs out first. Messages it
// does not keep stay hidden for visibility seconds. A receive whose answer
// may have been lost moves the deadline to at least the visibility timeout
// (plus a margin) later, when the lost messages are visible again.
func ReceiveN(t testing.TB, client *sqs.Client, url string, n int, budget time.Duration, visibility int32, keep func(events.SQSMessage) bool) events.SQSEvent {
	t.Helper()
	queue := queueOf(t, client, url)
	var ev events.SQSEvent
	budget = Scale(budget) // a bound to give up, never a pass criterion
	start := time.Now()
	deadline := start.Add(budget)
	var err error
	for len(ev.Records) < n {
		if time.Now().After(deadline) {
			t.Fatalf("awstest: received %d of %d messages from %s in %s (last receive error: %v)", len(ev.Records), n, url, time.Since(start).Round(time.Second), err)
		}
		in := eventInput(url, int32(min(n-len(ev.Records), 10)), time.Second, visibility)
		var msgs []sqstypes.Message
		var lost bool
		msgs, lost, err = receiveLogged(t, client, in)
		if lost {
			if back := time.Now().Add(time.Duration(visibility)*time.Second + Scale(lostWaitSlack)); back.After(deadline) {
				deadline = back
			}
		}
		for _, r := range queue.Event(msgs).Records {
			if keep == nil || keep(r) {
				ev.Records = append(ev.Records, r)
			}
		}
	}
	return ev
}

// drainVisibility hides a drained message until its delete: short, so the
// messages of a lost answer come back soon.
const drainVisibility = 15

// Drain deletes url's messages as they arrive, as workers would, until the
// test ends, and counts them. The messages of a lost answer come back
// after drainVisibility seconds and are drained then; a message whose
// delete was slower than that may be counted twice.
func Drain(t testing.TB, client *sqs.Client, url string, drainers int) *atomic.Int64 {
	var n atomic.Int64
	var stopped atomic.Bool
	var wg sync.WaitGroup
	for range drainers {
		wg.Go(func() {
			for !stopped.Load() {
				msgs, _, _ := receiveOnce(client, &sqs.ReceiveMessageInput{
					QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: drainVisibility,
				})
				if len(msgs) == 0 {
					continue
				}
				entries := make([]sqstypes.DeleteMessageBatchRequestEntry, len(msgs))
				for i, m := range msgs {
					entries[i] = sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle}
				}
				ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
				out, err := client.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
				cancel()
				if err == nil {
					n.Add(int64(len(out.Successful)))
				}
			}
		})
	}
	t.Cleanup(func() { stopped.Store(true); wg.Wait() })
	return &n
}

// Bodies is a keep function for ReceiveN that keeps each of bodies as many
// times as it is listed, and nothing else: a send that SQS delivered twice
// (the SDK resends when an answer is lost) does not take another's place
// in a batch.
func Bodies(bodies ...string) func(events.SQSMessage) bool {
	var mu sync.Mutex
	left := map[string]int{}
	for _, b := range bodies {
		left[b]++
	}
	return func(m events.SQSMessage) bool {
		mu.Lock()
		defer mu.Unlock()
		if left[m.Body] == 0 {
			return false
		}
		left[m.Body]--
		return true
	}
}
