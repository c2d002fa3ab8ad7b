package awstest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/leasehold/leasehold/internal/sqsevent"
)

// ReceiveEvent takes up to max messages off url with one receive that
// long-polls for wait and hides them for visibility seconds, and returns
// them as the event Lambda's event source mapping would deliver: system and
// message attributes, queue ARN and region, as internal/sqsevent builds them
// for the off-Lambda runner.
func ReceiveEvent(t testing.TB, client *sqs.Client, url string, max int32, wait time.Duration, visibility int32) events.SQSEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait+callTimeout)
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
	out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(url),
		MaxNumberOfMessages:         max,
		WaitTimeSeconds:             int32(wait / time.Second),
		VisibilityTimeout:           visibility,
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	})
	if err != nil {
		t.Fatalf("awstest: receive from %s: %v", url, err)
	}
	return queue.Event(out.Messages)
}

// ReceiveN receives from url until it holds n messages that keep accepts
// (nil keeps all), failing the test if budget runs out first. Messages it
// does not keep stay hidden for visibility seconds.
func ReceiveN(t testing.TB, client *sqs.Client, url string, n int, budget time.Duration, visibility int32, keep func(events.SQSMessage) bool) events.SQSEvent {
	t.Helper()
	var ev events.SQSEvent
	budget = Scale(budget) // a bound to give up, never a pass criterion
	deadline := time.Now().Add(budget)
	for len(ev.Records) < n {
		if time.Now().After(deadline) {
			t.Fatalf("awstest: received %d of %d messages from %s in %s", len(ev.Records), n, url, budget)
		}
		got := ReceiveEvent(t, client, url, int32(min(n-len(ev.Records), 10)), time.Second, visibility)
		for _, r := range got.Records {
			if keep == nil || keep(r) {
				ev.Records = append(ev.Records, r)
			}
		}
	}
	return ev
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
