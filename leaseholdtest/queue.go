package leaseholdtest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/jonboulle/clockwork"

	"github.com/leasehold/leasehold/internal/lifecycle"
	"github.com/leasehold/leasehold/internal/queues"
	"github.com/leasehold/leasehold/internal/token"
)

// The in-memory queues' URLs: every queue name q is queueBase+q, the
// default work queue is workQueueURL and rejected messages go to
// deadLetterURL.
const (
	queueBase     = "https://sqs.leaseholdtest.invalid/000000000000/"
	workQueueURL  = queueBase + "work"
	deadLetterURL = queueBase + "work-dlq"
	// queueVisibility is the work queue's visibility timeout in
	// template.yaml: how long a received message stays hidden unless the
	// worker changes it.
	queueVisibility = 5400 * time.Second
	// maxReceiveCount is the work queue's redrive limit in template.yaml.
	maxReceiveCount = lifecycle.DefaultMaxReceiveCount
)

// message is one message on an in-memory queue.
type message struct {
	seq       int64
	id        string
	queueURL  string
	body      string
	sentAt    time.Time
	visibleAt time.Time
	receives  int
	handle    string // of the last receive
}

// deadLetter is a message the worker rejected, with its reason.
type deadLetter struct {
	body, reason string
}

// memQueue is every work queue of an Env, in memory: it implements the SQS
// calls of the worker (lifecycle.SQSClient) and of the dispatcher, with
// SQS's delays, visibility and receive counts on the Env's fake clock. It
// is safe for concurrent use.
type memQueue struct {
	clock clockwork.Clock

	mu      sync.Mutex
	seq     int64
	msgs    []*message
	dead    []deadLetter
	handles int64
	// duplicate, when set, makes a send whose token names a task it
	// accepts put its message on the queue twice, as SQS's at-least-once
	// delivery may (tests of exactly-once effects).
	duplicate func(id string) bool
	// sent, when not nil, gathers the task ids of the tokens sent.
	sent map[string]bool
}

var _ lifecycle.SQSClient = (*memQueue)(nil)

// names resolves queue names to the in-memory queues' URLs: "" is the
// default work queue, any valid name its own queue.
type names struct{}

func (names) URL(_ context.Context, name string) (string, error) {
	if name == "" {
		return workQueueURL, nil
	}
	if err := queues.CheckName(name); err != nil {
		return "", err
	}
	return queueBase + name, nil
}

// queueName is the name of the queue at url ("" for the default work
// queue).
func queueName(url string) string {
	if url == workQueueURL {
		return ""
	}
	return strings.TrimPrefix(url, queueBase)
}

func (q *memQueue) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	url := aws.ToString(in.QueueUrl)
	if !strings.HasPrefix(url, queueBase) {
		return nil, &sqstypes.QueueDoesNotExist{Message: aws.String("no in-memory queue at " + url)}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if url == deadLetterURL {
		q.dead = append(q.dead, deadLetter{body: aws.ToString(in.MessageBody), reason: aws.ToString(in.MessageAttributes[lifecycle.AttrReason].StringValue)})
		return &sqs.SendMessageOutput{MessageId: aws.String("dead")}, nil
	}
	q.seq++
	now := q.clock.Now()
	m := &message{
		seq: q.seq, id: fmt.Sprintf("msg-%d", q.seq), queueURL: url, body: aws.ToString(in.MessageBody),
		sentAt: now, visibleAt: now.Add(time.Duration(in.DelaySeconds) * time.Second),
	}
	q.msgs = append(q.msgs, m)
	var id string
	if q.sent != nil || q.duplicate != nil {
		if tok, err := token.Decode(m.body); err == nil {
			id = tok.ID
		}
	}
	if q.sent != nil && id != "" {
		q.sent[id] = true
	}
	if q.duplicate != nil && id != "" && q.duplicate(id) {
		q.seq++
		dup := *m
		dup.seq, dup.id = q.seq, fmt.Sprintf("msg-%d", q.seq)
		q.msgs = append(q.msgs, &dup)
	}
	return &sqs.SendMessageOutput{MessageId: aws.String(m.id)}, nil
}

func (q *memQueue) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		r, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: in.QueueUrl, MessageBody: e.MessageBody, DelaySeconds: e.DelaySeconds, MessageAttributes: e.MessageAttributes})
		if err != nil {
			return nil, err
		}
		out.Successful = append(out.Successful, sqstypes.SendMessageBatchResultEntry{Id: e.Id, MessageId: r.MessageId})
	}
	return out, nil
}

func (q *memQueue) ChangeMessageVisibility(_ context.Context, in *sqs.ChangeMessageVisibilityInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	if err := q.changeVisibility(aws.ToString(in.ReceiptHandle), in.VisibilityTimeout); err != nil {
		return nil, err
	}
	return &sqs.ChangeMessageVisibilityOutput{}, nil
}

func (q *memQueue) ChangeMessageVisibilityBatch(_ context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	out := &sqs.ChangeMessageVisibilityBatchOutput{}
	for _, e := range in.Entries {
		if err := q.changeVisibility(aws.ToString(e.ReceiptHandle), e.VisibilityTimeout); err != nil {
			out.Failed = append(out.Failed, sqstypes.BatchResultErrorEntry{Id: e.Id, Code: aws.String("ReceiptHandleIsInvalid"), Message: aws.String(err.Error()), SenderFault: true})
			continue
		}
		out.Successful = append(out.Successful, sqstypes.ChangeMessageVisibilityBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

func (q *memQueue) changeVisibility(handle string, secs int32) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	i := q.find(handle)
	if i < 0 {
		return &sqstypes.ReceiptHandleIsInvalid{Message: aws.String("no message has receipt handle " + handle)}
	}
	q.msgs[i].visibleAt = q.clock.Now().Add(time.Duration(secs) * time.Second)
	return nil
}

func (q *memQueue) DeleteMessage(_ context.Context, in *sqs.DeleteMessageInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if i := q.find(aws.ToString(in.ReceiptHandle)); i >= 0 {
		q.msgs = slices.Delete(q.msgs, i, i+1)
	}
	return &sqs.DeleteMessageOutput{}, nil
}

// find returns the index of the message last received with handle, or -1;
// q.mu is held.
func (q *memQueue) find(handle string) int {
	return slices.IndexFunc(q.msgs, func(m *message) bool { return m.handle != "" && m.handle == handle })
}

// receive takes the message that became visible first (the oldest sent
// among equals) and hides it for the queue's visibility timeout, as an SQS
// receive does. A message received maxReceiveCount times already is moved
// to the dead letters instead, as the queue's redrive policy would, and
// returned with dead set.
func (q *memQueue) receive() (m lifecycle.Message, dead, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.clock.Now()
	var next *message
	for _, c := range q.msgs {
		if !c.visibleAt.After(now) && (next == nil || byVisibility(c, next) < 0) {
			next = c
		}
	}
	if next == nil {
		return lifecycle.Message{}, false, false
	}
	if next.receives >= maxReceiveCount {
		q.msgs = slices.DeleteFunc(q.msgs, func(c *message) bool { return c == next })
		reason := fmt.Sprintf("received %d times without being deleted (the queue's maxReceiveCount)", next.receives)
		q.dead = append(q.dead, deadLetter{body: next.body, reason: reason})
		return lifecycle.Message{ID: next.id, Body: next.body}, true, true
	}
	q.handles++
	next.receives++
	next.handle = fmt.Sprintf("rh-%d", q.handles)
	next.visibleAt = now.Add(queueVisibility)
	return lifecycle.Message{
		ID: next.id, ReceiptHandle: next.handle, Body: next.body, ReceiveCount: next.receives,
		SentAt: next.sentAt, QueueURL: next.queueURL, Queue: queueName(next.queueURL),
	}, false, true
}

// unreceive undoes the receive of the message with handle, which was not
// delivered: it is visible again at once, its receive not counted, so the
// next Run delivers it (Run stops at its bound of deliveries with it in
// hand).
func (q *memQueue) unreceive(handle string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if i := q.find(handle); i >= 0 {
		q.msgs[i].receives--
		q.msgs[i].visibleAt = q.clock.Now()
		q.msgs[i].handle = ""
	}
}

func byVisibility(a, b *message) int {
	return cmp.Or(a.visibleAt.Compare(b.visibleAt), cmp.Compare(a.seq, b.seq))
}

// nextVisible is when the next message becomes visible.
func (q *memQueue) nextVisible() (time.Time, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var at time.Time
	for _, m := range q.msgs {
		if at.IsZero() || m.visibleAt.Before(at) {
			at = m.visibleAt
		}
	}
	return at, !at.IsZero()
}

// kept returns the bodies of the messages received and not deleted:
// their workers handed them back, to come again.
func (q *memQueue) kept() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []string
	for _, m := range q.msgs {
		if m.receives > 0 {
			out = append(out, m.body)
		}
	}
	return out
}

// takeDead returns the dead letters since the last call.
func (q *memQueue) takeDead() []deadLetter {
	q.mu.Lock()
	defer q.mu.Unlock()
	d := q.dead
	q.dead = nil
	return d
}

// GetQueueUrl resolves a queue name as names does, for a client on the
// Env (Env.Client).
func (q *memQueue) GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, _ ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	url, err := names{}.URL(ctx, aws.ToString(in.QueueName))
	if err != nil {
		return nil, err
	}
	return &sqs.GetQueueUrlOutput{QueueUrl: aws.String(url)}, nil
}
