package dispatch_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/jonboulle/clockwork"

	"github.com/leasehold/leasehold/internal/dispatch"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/leasemem"
)

const (
	dlqURL  = "https://sqs.us-east-1.amazonaws.com/123456789012/work-dlq"
	workURL = "https://sqs.us-east-1.amazonaws.com/123456789012/work"
)

// dlqQueues is a work queue and its dead-letter queue in memory. A
// received dead letter is hidden, oldest first, until it is made visible
// again (there is no clock: its hold never runs out).
type dlqQueues struct {
	mu       sync.Mutex
	dlq      []types.Message
	hidden   map[string]bool // by receipt handle
	work     []types.SendMessageBatchRequestEntry
	visible  []string // receipt handles made visible again
	failSend bool
}

func (q *dlqQueues) put(id, body string, attrs map[string]string) {
	m := types.Message{MessageId: aws.String(id), ReceiptHandle: aws.String("rh-" + id), Body: aws.String(body), MessageAttributes: map[string]types.MessageAttributeValue{}}
	for k, v := range attrs {
		m.MessageAttributes[k] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	q.dlq = append(q.dlq, m)
}

func (q *dlqQueues) ReceiveMessage(_ context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if aws.ToString(in.QueueUrl) != dlqURL {
		return nil, errors.New("receive from " + aws.ToString(in.QueueUrl))
	}
	if q.hidden == nil {
		q.hidden = map[string]bool{}
	}
	out := &sqs.ReceiveMessageOutput{}
	for _, m := range q.dlq {
		if len(out.Messages) < int(in.MaxNumberOfMessages) && !q.hidden[aws.ToString(m.ReceiptHandle)] {
			q.hidden[aws.ToString(m.ReceiptHandle)] = true
			out.Messages = append(out.Messages, m)
		}
	}
	return out, nil
}

func (q *dlqQueues) DeleteMessageBatch(_ context.Context, in *sqs.DeleteMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, e := range in.Entries {
		for i, m := range q.dlq {
			if aws.ToString(m.ReceiptHandle) == aws.ToString(e.ReceiptHandle) {
				q.dlq = append(q.dlq[:i], q.dlq[i+1:]...)
				delete(q.hidden, aws.ToString(e.ReceiptHandle))
				break
			}
		}
	}
	return &sqs.DeleteMessageBatchOutput{}, nil
}

func (q *dlqQueues) ChangeMessageVisibilityBatch(_ context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, e := range in.Entries {
		if e.VisibilityTimeout != 0 {
			return nil, errors.New("a dead letter left in the queue must be visible again at once")
		}
		q.visible = append(q.visible, aws.ToString(e.ReceiptHandle))
		delete(q.hidden, aws.ToString(e.ReceiptHandle))
	}
	return &sqs.ChangeMessageVisibilityBatchOutput{}, nil
}

func (q *dlqQueues) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.failSend {
		return nil, errors.New("send refused")
	}
	if aws.ToString(in.QueueUrl) != workURL {
		return nil, errors.New("send to " + aws.ToString(in.QueueUrl))
	}
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		q.work = append(q.work, e)
		out.Successful = append(out.Successful, types.SendMessageBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

func (q *dlqQueues) SendMessage(context.Context, *sqs.SendMessageInput, ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	return nil, errors.New("unexpected SendMessage")
}

func newRedriver(t *testing.T, q dispatch.SQSClient) *dispatch.Dispatcher {
	t.Helper()
	d, err := dispatch.New(dispatch.Config{Store: leasemem.New(lease.Options{}), SQS: q, WorkQueueURL: workURL, WorkDLQURL: dlqURL,
		Clock: clockwork.NewFakeClock()})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Messages SQS moved to the work dead-letter queue go back to the work
// queue, body and attributes kept, their redrive count one higher; those a
// worker rejected (with a reason), and those sent back 3 times already,
// stay and are visible again at once.
func TestRedriveDeadLetters(t *testing.T) {
	t.Parallel()
	q := &dlqQueues{}
	q.put("moved", `{"v":1,"id":"a"}`, map[string]string{"custom": "kept"})
	q.put("again", `{"v":1,"id":"b"}`, map[string]string{dispatch.AttrRedrives: "2"})
	q.put("rejected", `not json`, map[string]string{"leasehold-reason": "not JSON"})
	q.put("tired", `{"v":1,"id":"c"}`, map[string]string{dispatch.AttrRedrives: strconv.Itoa(dispatch.MaxDeadLetterRedrives)})
	st, err := newRedriver(t, q).RedriveDeadLetters(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if st.Redriven != 2 || st.Left != 2 {
		t.Fatalf("stats %+v, want 2 redriven and 2 left", st)
	}
	if len(q.work) != 2 {
		t.Fatalf("sent to the work queue: %d, want 2", len(q.work))
	}
	for i, want := range []struct{ body, redrives string }{{`{"v":1,"id":"a"}`, "1"}, {`{"v":1,"id":"b"}`, "3"}} {
		e := q.work[i]
		if aws.ToString(e.MessageBody) != want.body || aws.ToString(e.MessageAttributes[dispatch.AttrRedrives].StringValue) != want.redrives {
			t.Errorf("sent %d: %q with redrives %q, want %q with %q", i, aws.ToString(e.MessageBody), aws.ToString(e.MessageAttributes[dispatch.AttrRedrives].StringValue), want.body, want.redrives)
		}
	}
	if v := q.work[0].MessageAttributes["custom"]; aws.ToString(v.StringValue) != "kept" {
		t.Errorf("the moved message's own attribute was not kept: %+v", q.work[0].MessageAttributes)
	}
	var ids []string
	for _, m := range q.dlq {
		ids = append(ids, aws.ToString(m.MessageId))
	}
	if len(ids) != 2 || ids[0] != "rejected" || ids[1] != "tired" {
		t.Fatalf("left in the dead-letter queue: %v, want rejected and tired", ids)
	}
	if len(q.visible) < 2 {
		t.Fatalf("made visible again: %v, want the two left", q.visible)
	}
}

// A token SQS moved there is found behind any number of rejected messages
// (up to the receives of one sweep): those stay hidden while the sweep
// reads on, then are all made visible again.
func TestRedriveReachesPastRejectedMessages(t *testing.T) {
	t.Parallel()
	q := &dlqQueues{}
	for i := range 45 {
		q.put("rejected-"+strconv.Itoa(i), `not json`, map[string]string{"leasehold-reason": "not JSON"})
	}
	q.put("moved", `{"v":1,"id":"a"}`, nil)
	st, err := newRedriver(t, q).RedriveDeadLetters(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if st.Redriven != 1 || len(q.work) != 1 || aws.ToString(q.work[0].MessageBody) != `{"v":1,"id":"a"}` {
		t.Fatalf("stats %+v, sent %d: want the moved token sent back from behind 45 rejected messages", st, len(q.work))
	}
	if len(q.dlq) != 45 || len(q.hidden) != 0 {
		t.Fatalf("left %d, %d of them still hidden; want the 45 rejected, all visible", len(q.dlq), len(q.hidden))
	}
}

// A dead letter that cannot be sent back stays in the queue, visible, for
// the next sweep.
func TestRedriveKeepsWhatItCannotSend(t *testing.T) {
	t.Parallel()
	q := &dlqQueues{failSend: true}
	q.put("moved", `{"v":1,"id":"a"}`, nil)
	st, err := newRedriver(t, q).RedriveDeadLetters(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if st.Redriven != 0 || st.Left != 1 || len(q.dlq) != 1 || len(q.visible) == 0 {
		t.Fatalf("stats %+v, left %d, visible %v; want it left and visible", st, len(q.dlq), q.visible)
	}
}

// Dead-letter recovery needs a client that can receive from the queue.
func TestRedriveNeedsADeadLetterClient(t *testing.T) {
	t.Parallel()
	_, err := dispatch.New(dispatch.Config{Store: leasemem.New(lease.Options{}), SQS: sendOnly{}, WorkQueueURL: workURL, WorkDLQURL: dlqURL})
	if !errors.Is(err, dispatch.ErrConfig) {
		t.Fatalf("New with a send-only client and a dead-letter queue: %v, want ErrConfig", err)
	}
}

type sendOnly struct{}

func (sendOnly) SendMessageBatch(context.Context, *sqs.SendMessageBatchInput, ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	return nil, errors.New("unused")
}

func (sendOnly) SendMessage(context.Context, *sqs.SendMessageInput, ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	return nil, errors.New("unused")
}
