package dispatch_test

// Dead-letter recovery against the local stack: messages that SQS itself
// moved to a dead-letter queue (so they carry the DeadLetterQueueSourceArn
// SQS sets), read back by the dispatcher. Each test has its own queues,
// whose redrive policies move a message after a single receive, and its
// own table.

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/internal/dispatch"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/dynamo"
)

// deadLetterStack is a default work queue and a named queue, each with its
// dead-letter queue, and a dispatcher that knows the named queue by ARN,
// as the template configures it.
type deadLetterStack struct {
	t           *testing.T
	sqs         *sqs.Client
	main, named awstest.Queues
	d           *dispatch.Dispatcher
}

func setupDeadLetterStack(t *testing.T) *deadLetterStack {
	t.Helper()
	cfg := awstest.Config(t)
	e := &deadLetterStack{t: t, sqs: sqs.NewFromConfig(cfg), main: awstest.NewQueues(t, cfg), named: awstest.NewQueues(t, cfg)}
	e.redriveAfterOneReceive(e.main)
	e.redriveAfterOneReceive(e.named)
	store := dynamo.New(dynamodb.NewFromConfig(cfg), awstest.NewTable(t, cfg), lease.Options{})
	d, err := dispatch.New(dispatch.Config{
		Store: store, SQS: e.sqs, WorkQueueURL: e.main.Work, WorkDLQURL: e.main.WorkDLQ,
		NamedQueues: []string{e.arn(e.named.Work)}, Logger: testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	e.d = d
	return e
}

func (e *deadLetterStack) call() (context.Context, context.CancelFunc) {
	return context.WithTimeout(e.t.Context(), awstest.Scale(10*time.Second))
}

func (e *deadLetterStack) arn(url string) string {
	e.t.Helper()
	ctx, cancel := e.call()
	defer cancel()
	out, err := e.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		e.t.Fatalf("ARN of %s: %v", url, err)
	}
	return out.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]
}

// redriveAfterOneReceive sets qs's work queue to move a message to its
// dead-letter queue at its second receive.
func (e *deadLetterStack) redriveAfterOneReceive(qs awstest.Queues) {
	e.t.Helper()
	policy, err := json.Marshal(map[string]any{"deadLetterTargetArn": e.arn(qs.WorkDLQ), "maxReceiveCount": 1})
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := e.call()
	defer cancel()
	if _, err := e.sqs.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(qs.Work),
		Attributes: map[string]string{string(sqstypes.QueueAttributeNameRedrivePolicy): string(policy)}}); err != nil {
		e.t.Fatalf("redrive policy of %s: %v", qs.Work, err)
	}
}

func (e *deadLetterStack) send(url, body string, attrs map[string]string) {
	e.t.Helper()
	in := &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(body), MessageAttributes: map[string]sqstypes.MessageAttributeValue{}}
	for k, v := range attrs {
		in.MessageAttributes[k] = sqstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	ctx, cancel := e.call()
	defer cancel()
	if _, err := e.sqs.SendMessage(ctx, in); err != nil {
		e.t.Fatalf("send to %s: %v", url, err)
	}
}

// depth counts the messages of url, visible or hidden.
func (e *deadLetterStack) depth(url string) int {
	e.t.Helper()
	ctx, cancel := e.call()
	defer cancel()
	out, err := e.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{
		sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
	}})
	if err != nil {
		e.t.Fatalf("depth of %s: %v", url, err)
	}
	n := 0
	for _, v := range out.Attributes {
		i, _ := strconv.Atoi(v)
		n += i
	}
	return n
}

// receiveFrom receives from qs's work queue, each message hidden for a
// second only, until every message on it has gone to its dead-letter
// queue (SQS moves it at its second receive), and returns what it
// received meanwhile. A receive whose answer is lost hides its messages
// for that second.
func (e *deadLetterStack) receiveFrom(qs awstest.Queues) []events.SQSMessage {
	e.t.Helper()
	var got []events.SQSMessage
	deadline := time.Now().Add(awstest.Scale(time.Minute))
	for e.depth(qs.Work) > 0 {
		if time.Now().After(deadline) {
			e.t.Fatalf("%d messages still on %s, not moved to its dead-letter queue", e.depth(qs.Work), qs.Work)
		}
		got = append(got, awstest.ReceiveEvent(e.t, e.sqs, qs.Work, 10, time.Second, 1).Records...)
	}
	return got
}

// Messages SQS moved from a named queue to that queue's own dead-letter
// queue go back to the named queue, not to the default work queue, and
// those moved from the default work queue go back there: each sweep reads
// both dead-letter queues.
func TestStackDeadLettersGoBackToTheQueueTheyCameFrom(t *testing.T) {
	t.Parallel()
	e := setupDeadLetterStack(t)
	e.send(e.named.Work, `{"v":1,"id":"named"}`, map[string]string{"custom": "kept"})
	e.send(e.main.Work, `{"v":1,"id":"main"}`, nil)
	e.receiveFrom(e.named)
	e.receiveFrom(e.main)

	// Sweep until each is back on its own queue. A receive of the
	// dispatcher's whose answer was lost hides dead letters for 30 s, and
	// one of the test's lets SQS move a message again: both only delay.
	back := map[string]events.SQSMessage{}
	deadline := time.Now().Add(awstest.Scale(3 * time.Minute))
	for back["named"].Body == "" || back["main"].Body == "" {
		if time.Now().After(deadline) {
			t.Fatalf("back on their queues: %v, want both", slices.Sorted(maps.Keys(back)))
		}
		if _, err := e.d.RedriveDeadLetters(t.Context()); err != nil {
			t.Logf("dead-letter recovery: %v", err)
		}
		for which, url := range map[string]string{"named": e.named.Work, "main": e.main.Work} {
			for _, r := range awstest.ReceiveEvent(t, e.sqs, url, 10, time.Second, 1).Records {
				var tok struct{ ID string }
				if err := json.Unmarshal([]byte(r.Body), &tok); err != nil || tok.ID != which {
					t.Fatalf("on the %s queue: %q, want only the token of %q", which, r.Body, which)
				}
				back[which] = r
			}
		}
	}
	named := back["named"].MessageAttributes
	if n, _ := strconv.Atoi(aws.ToString(named[dispatch.AttrRedrives].StringValue)); n < 1 || aws.ToString(named["custom"].StringValue) != "kept" {
		t.Errorf("the named queue's dead letter came back with %v, want its own attribute and %s", named, dispatch.AttrRedrives)
	}
}

// A dead letter with SQS's 10 message attributes goes back with exactly
// those (SQS refuses an 11th), at most 3 times, its count kept in the
// table; then it stays in the dead-letter queue and is not sent again.
func TestStackDeadLetterWithTenAttributesIsSentBackAtMostThreeTimes(t *testing.T) {
	t.Parallel()
	e := setupDeadLetterStack(t)
	attrs := map[string]string{}
	for i := range dispatch.MaxMessageAttributes {
		attrs["a"+strconv.Itoa(i)] = "v" + strconv.Itoa(i)
	}
	body := `{"v":1,"id":"full"}`
	e.send(e.main.Work, body, attrs)
	e.receiveFrom(e.main)

	redriven, arrivals := 0, 0
	deadline := time.Now().Add(awstest.Scale(3 * time.Minute))
	for {
		if time.Now().After(deadline) {
			t.Fatalf("after %d redrives (%d seen back) the dead letter has not stayed in its queue", redriven, arrivals)
		}
		st, err := e.d.RedriveDeadLetters(t.Context())
		if err != nil {
			t.Logf("dead-letter recovery: %v", err)
		}
		redriven += st.Redriven
		if st.Left > 0 && st.Redriven == 0 {
			break // read and left there
		}
		// What went back goes to the dead-letter queue again at its
		// second receive.
		for _, r := range e.receiveFrom(e.main) {
			arrivals++
			if r.Body != body || len(r.MessageAttributes) != dispatch.MaxMessageAttributes {
				t.Fatalf("back on the work queue: %q with %d attributes %v, want %q with its own %d", r.Body, len(r.MessageAttributes), r.MessageAttributes, body, dispatch.MaxMessageAttributes)
			}
		}
	}
	if redriven != dispatch.MaxDeadLetterRedrives || arrivals == 0 {
		t.Fatalf("sent back %d times (%d seen back), want %d", redriven, arrivals, dispatch.MaxDeadLetterRedrives)
	}
	if n := e.depth(e.main.Work); n != 0 {
		t.Fatalf("%d messages on the work queue after the count ran out", n)
	}
	if n := e.depth(e.main.WorkDLQ); n == 0 {
		t.Fatal("the dead letter is gone from its queue; want it left there")
	}
}
