package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/jonboulle/clockwork"

	"github.com/leasehold/leasehold/internal/dispatch"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/leasemem"
)

// Queues of the dead-letter tests: a fake account's URLs and ARNs.
const (
	queuePrefix = "https://sqs.us-east-1.amazonaws.com/123456789012/"
	arnPrefix   = "arn:aws:sqs:us-east-1:123456789012:"
	dlqURL      = queuePrefix + "work-dlq"
	workURL     = queuePrefix + "work"
)

// sqsQueues is SQS in memory for dead-letter recovery: queues by URL, each
// with its messages, its ARN and its redrive policy. A received message is
// hidden, oldest first, until it is deleted or made visible again (there is
// no clock: its hold never runs out). As SQS does, it refuses a message
// with more than 10 attributes (the entry of a batch fails), and gives a
// message's DeadLetterQueueSourceArn only to a receive that asks for it.
type sqsQueues struct {
	mu       sync.Mutex
	q        map[string]*fakeQueue
	receives []string // the queue URL of each receive, in order
	failSend bool
}

// fakeQueue is one queue of sqsQueues.
type fakeQueue struct {
	arn       string
	redriveTo string // the ARN its redrive policy names; empty: none
	msgs      []types.Message
	hidden    map[string]bool // by receipt handle
	sent      []types.SendMessageBatchRequestEntry
	visible   []string // receipt handles made visible again
	// receiveErr fails every receive; attrsErr every read of attributes.
	receiveErr, attrsErr error
}

// newQueues makes the named queues, with the work queue's redrive policy
// naming work-dlq when both are among them.
func newQueues(names ...string) *sqsQueues {
	q := &sqsQueues{q: map[string]*fakeQueue{}}
	for _, n := range names {
		q.q[queuePrefix+n] = &fakeQueue{arn: arnPrefix + n, hidden: map[string]bool{}}
	}
	if q.q[dlqURL] != nil && q.q[workURL] != nil {
		q.redrive("work", "work-dlq")
	}
	return q
}

// redrive gives queue from a redrive policy that names the queue to.
func (q *sqsQueues) redrive(from, to string) { q.q[queuePrefix+from].redriveTo = arnPrefix + to }

func (q *sqsQueues) queue(name string) *fakeQueue { return q.q[queuePrefix+name] }

// put adds a message to the queue called name; from, when set, is the
// queue SQS moved it from (its DeadLetterQueueSourceArn).
func (q *sqsQueues) put(name, id, body string, attrs map[string]string, from string) {
	m := types.Message{MessageId: aws.String(id), ReceiptHandle: aws.String("rh-" + id), Body: aws.String(body),
		MessageAttributes: map[string]types.MessageAttributeValue{}, Attributes: map[string]string{}}
	for k, v := range attrs {
		m.MessageAttributes[k] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	if from != "" {
		m.Attributes[string(types.MessageSystemAttributeNameDeadLetterQueueSourceArn)] = arnPrefix + from
	}
	fq := q.queue(name)
	fq.msgs = append(fq.msgs, m)
}

// ids lists the ids of the messages left on the queue called name.
func (q *sqsQueues) ids(name string) []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	var ids []string
	for _, m := range q.queue(name).msgs {
		ids = append(ids, aws.ToString(m.MessageId))
	}
	return ids
}

// bodies lists the bodies sent to the queue called name.
func (q *sqsQueues) bodies(name string) []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []string
	for _, e := range q.queue(name).sent {
		out = append(out, aws.ToString(e.MessageBody))
	}
	return out
}

func (q *sqsQueues) at(url *string) (*fakeQueue, error) {
	fq, ok := q.q[aws.ToString(url)]
	if !ok {
		return nil, &types.QueueDoesNotExist{Message: aws.String("no queue " + aws.ToString(url))}
	}
	return fq, nil
}

func (q *sqsQueues) ReceiveMessage(_ context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.receives = append(q.receives, aws.ToString(in.QueueUrl))
	fq, err := q.at(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	if fq.receiveErr != nil {
		return nil, fq.receiveErr
	}
	source := slices.Contains(in.MessageSystemAttributeNames, types.MessageSystemAttributeNameDeadLetterQueueSourceArn) ||
		slices.Contains(in.MessageSystemAttributeNames, types.MessageSystemAttributeNameAll)
	out := &sqs.ReceiveMessageOutput{}
	for _, m := range fq.msgs {
		if len(out.Messages) < int(in.MaxNumberOfMessages) && !fq.hidden[aws.ToString(m.ReceiptHandle)] {
			fq.hidden[aws.ToString(m.ReceiptHandle)] = true
			if !source {
				m.Attributes = nil
			}
			out.Messages = append(out.Messages, m)
		}
	}
	return out, nil
}

func (q *sqsQueues) DeleteMessageBatch(_ context.Context, in *sqs.DeleteMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	fq, err := q.at(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	for _, e := range in.Entries {
		for i, m := range fq.msgs {
			if aws.ToString(m.ReceiptHandle) == aws.ToString(e.ReceiptHandle) {
				fq.msgs = append(fq.msgs[:i], fq.msgs[i+1:]...)
				delete(fq.hidden, aws.ToString(e.ReceiptHandle))
				break
			}
		}
	}
	return &sqs.DeleteMessageBatchOutput{}, nil
}

func (q *sqsQueues) ChangeMessageVisibilityBatch(_ context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	fq, err := q.at(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	for _, e := range in.Entries {
		if e.VisibilityTimeout != 0 {
			return nil, errors.New("a dead letter left in the queue must be visible again at once")
		}
		fq.visible = append(fq.visible, aws.ToString(e.ReceiptHandle))
		delete(fq.hidden, aws.ToString(e.ReceiptHandle))
	}
	return &sqs.ChangeMessageVisibilityBatchOutput{}, nil
}

func (q *sqsQueues) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.failSend {
		return nil, errors.New("send refused")
	}
	fq, err := q.at(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		if n := len(e.MessageAttributes); n > dispatch.MaxMessageAttributes {
			out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InvalidParameterValue"), SenderFault: true,
				Message: aws.String(fmt.Sprintf("Number of message attributes [%d] exceeds the allowed maximum [%d].", n, dispatch.MaxMessageAttributes))})
			continue
		}
		fq.sent = append(fq.sent, e)
		out.Successful = append(out.Successful, types.SendMessageBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

func (q *sqsQueues) SendMessage(context.Context, *sqs.SendMessageInput, ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	return nil, errors.New("unexpected SendMessage")
}

func (q *sqsQueues) GetQueueAttributes(_ context.Context, in *sqs.GetQueueAttributesInput, _ ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	fq, err := q.at(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	if fq.attrsErr != nil {
		return nil, fq.attrsErr
	}
	attrs := map[string]string{}
	for _, a := range in.AttributeNames {
		switch a {
		case types.QueueAttributeNameQueueArn:
			attrs[string(a)] = fq.arn
		case types.QueueAttributeNameRedrivePolicy:
			if fq.redriveTo != "" {
				attrs[string(a)] = `{"deadLetterTargetArn":"` + fq.redriveTo + `","maxReceiveCount":10}`
			}
		}
	}
	return &sqs.GetQueueAttributesOutput{Attributes: attrs}, nil
}

func (q *sqsQueues) GetQueueUrl(_ context.Context, in *sqs.GetQueueUrlInput, _ ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	u := queuePrefix + aws.ToString(in.QueueName)
	if _, ok := q.q[u]; !ok || aws.ToString(in.QueueOwnerAWSAccountId) != "123456789012" {
		return nil, &types.QueueDoesNotExist{Message: aws.String("no queue " + aws.ToString(in.QueueName))}
	}
	return &sqs.GetQueueUrlOutput{QueueUrl: aws.String(u)}, nil
}

// newRedriver is a dispatcher on q whose default work queue is work, with
// work-dlq as its dead-letter queue, and named the named queues.
func newRedriver(t *testing.T, q dispatch.SQSClient, named ...string) *dispatch.Dispatcher {
	t.Helper()
	return newRedriverOn(t, leasemem.New(lease.Options{}), q, named...)
}

func newRedriverOn(t *testing.T, store dispatch.Store, q dispatch.SQSClient, named ...string) *dispatch.Dispatcher {
	t.Helper()
	d, err := dispatch.New(dispatch.Config{Store: store, SQS: q, WorkQueueURL: workURL, WorkDLQURL: dlqURL,
		NamedQueues: named, Clock: clockwork.NewFakeClock()})
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
	q := newQueues("work", "work-dlq")
	q.put("work-dlq", "moved", `{"v":1,"id":"a"}`, map[string]string{"custom": "kept"}, "work")
	q.put("work-dlq", "again", `{"v":1,"id":"b"}`, map[string]string{dispatch.AttrRedrives: "2"}, "")
	q.put("work-dlq", "rejected", `not json`, map[string]string{"leasehold-reason": "not JSON"}, "")
	q.put("work-dlq", "tired", `{"v":1,"id":"c"}`, map[string]string{dispatch.AttrRedrives: strconv.Itoa(dispatch.MaxDeadLetterRedrives)}, "work")
	st, err := newRedriver(t, q).RedriveDeadLetters(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if st != (dispatch.RedriveStats{Redriven: 2, Left: 2}) {
		t.Fatalf("stats %+v, want 2 redriven and 2 left", st)
	}
	work := q.queue("work").sent
	if len(work) != 2 {
		t.Fatalf("sent to the work queue: %d, want 2", len(work))
	}
	for i, want := range []struct{ body, redrives string }{{`{"v":1,"id":"a"}`, "1"}, {`{"v":1,"id":"b"}`, "3"}} {
		e := work[i]
		if aws.ToString(e.MessageBody) != want.body || aws.ToString(e.MessageAttributes[dispatch.AttrRedrives].StringValue) != want.redrives {
			t.Errorf("sent %d: %q with redrives %q, want %q with %q", i, aws.ToString(e.MessageBody), aws.ToString(e.MessageAttributes[dispatch.AttrRedrives].StringValue), want.body, want.redrives)
		}
	}
	if v := work[0].MessageAttributes["custom"]; aws.ToString(v.StringValue) != "kept" {
		t.Errorf("the moved message's own attribute was not kept: %+v", work[0].MessageAttributes)
	}
	if ids := q.ids("work-dlq"); !slices.Equal(ids, []string{"rejected", "tired"}) {
		t.Fatalf("left in the dead-letter queue: %v, want rejected and tired", ids)
	}
	if dlq := q.queue("work-dlq"); len(dlq.visible) < 2 || len(dlq.hidden) != 0 {
		t.Fatalf("made visible again: %v, still hidden %v; want the two left visible", dlq.visible, dlq.hidden)
	}
}

// A token SQS moved there is found behind any number of rejected messages
// (up to the receives of one sweep): those stay hidden while the sweep
// reads on, then are all made visible again.
func TestRedriveReachesPastRejectedMessages(t *testing.T) {
	t.Parallel()
	q := newQueues("work", "work-dlq")
	for i := range 45 {
		q.put("work-dlq", "rejected-"+strconv.Itoa(i), `not json`, map[string]string{"leasehold-reason": "not JSON"}, "")
	}
	q.put("work-dlq", "moved", `{"v":1,"id":"a"}`, nil, "work")
	st, err := newRedriver(t, q).RedriveDeadLetters(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if sent := q.bodies("work"); st.Redriven != 1 || !slices.Equal(sent, []string{`{"v":1,"id":"a"}`}) {
		t.Fatalf("stats %+v, sent %q: want the moved token sent back from behind 45 rejected messages", st, sent)
	}
	if left, dlq := q.ids("work-dlq"), q.queue("work-dlq"); len(left) != 45 || len(dlq.hidden) != 0 {
		t.Fatalf("left %d, %d of them still hidden; want the 45 rejected, all visible", len(left), len(dlq.hidden))
	}
}

// A dead letter that cannot be sent back stays in the queue, visible, for
// the next sweep.
func TestRedriveKeepsWhatItCannotSend(t *testing.T) {
	t.Parallel()
	q := newQueues("work", "work-dlq")
	q.failSend = true
	q.put("work-dlq", "moved", `{"v":1,"id":"a"}`, nil, "work")
	st, err := newRedriver(t, q).RedriveDeadLetters(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if left, dlq := q.ids("work-dlq"), q.queue("work-dlq"); st.Redriven != 0 || st.Left != 1 || len(left) != 1 || len(dlq.visible) == 0 {
		t.Fatalf("stats %+v, left %v, visible %v; want it left and visible", st, left, dlq.visible)
	}
}

// Dead-letter recovery needs a client that can receive from the queue.
func TestRedriveNeedsADeadLetterClient(t *testing.T) {
	t.Parallel()
	_, err := dispatch.New(dispatch.Config{Store: leasemem.New(lease.Options{}), SQS: sendOnly{}, WorkQueueURL: workURL, WorkDLQURL: dlqURL})
	if !errors.Is(err, dispatch.ErrConfig) {
		t.Fatalf("New with a send-only client and a dead-letter queue: %v, want ErrConfig", err)
	}
	// Named queues' dead-letter queues are found through their redrive
	// policies: the client must read queue attributes too.
	q := newQueues("work")
	_, err = dispatch.New(dispatch.Config{Store: leasemem.New(lease.Options{}), SQS: noAttributes{q, q}, WorkQueueURL: workURL,
		NamedQueues: []string{queuePrefix + "images"}})
	if !errors.Is(err, dispatch.ErrConfig) {
		t.Fatalf("New with named queues and a client that reads no queue attributes: %v, want ErrConfig", err)
	}
	for _, bad := range []string{"images", "https://q", "arn:aws:sns:us-east-1:1:topic", queuePrefix + "jobs.fifo"} {
		_, err = dispatch.New(dispatch.Config{Store: leasemem.New(lease.Options{}), SQS: newQueues("work"), WorkQueueURL: workURL, NamedQueues: []string{bad}})
		if !errors.Is(err, dispatch.ErrConfig) {
			t.Errorf("New with named queue %q: %v, want ErrConfig", bad, err)
		}
	}
}

// noAttributes is a client that receives but reads no queue attributes.
type noAttributes struct {
	dispatch.SQSClient
	dispatch.DeadLetterClient
}

type sendOnly struct{}

func (sendOnly) SendMessageBatch(context.Context, *sqs.SendMessageBatchInput, ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	return nil, errors.New("unused")
}

func (sendOnly) SendMessage(context.Context, *sqs.SendMessageInput, ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	return nil, errors.New("unused")
}

// Each sweep also reads the dead-letter queues of the named queues, found
// through their redrive policies, and sends each message back to the queue
// SQS moved it from (never to the default work queue by mistake): images
// has a dead-letter queue of its own, named by ARN; thumbs shares the work
// queue's; reports has no redrive policy and is skipped. What came from a
// queue the dispatcher does not know stays, as does a message without a
// source in a dead-letter queue that several queues share.
func TestRedriveSendsEachDeadLetterBackToItsOwnQueue(t *testing.T) {
	t.Parallel()
	q := newQueues("work", "work-dlq", "images", "images-dlq", "thumbs", "reports")
	q.redrive("images", "images-dlq")
	q.redrive("thumbs", "work-dlq")
	q.put("images-dlq", "from-images", `{"v":1,"id":"i"}`, map[string]string{"custom": "kept"}, "images")
	q.put("work-dlq", "from-work", `{"v":1,"id":"w"}`, nil, "work")
	q.put("work-dlq", "from-thumbs", `{"v":1,"id":"t"}`, nil, "thumbs")
	q.put("work-dlq", "from-elsewhere", `{"v":1,"id":"e"}`, nil, "elsewhere")
	q.put("work-dlq", "from-unknown", `{"v":1,"id":"u"}`, nil, "")
	d := newRedriver(t, q, arnPrefix+"images", queuePrefix+"thumbs", queuePrefix+"reports")
	st, err := d.RedriveDeadLetters(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if st != (dispatch.RedriveStats{Redriven: 3, Left: 2}) {
		t.Errorf("stats %+v, want 3 redriven, 2 left", st)
	}
	for queue, want := range map[string][]string{
		"images": {`{"v":1,"id":"i"}`}, "work": {`{"v":1,"id":"w"}`}, "thumbs": {`{"v":1,"id":"t"}`}, "reports": nil,
	} {
		if got := q.bodies(queue); !slices.Equal(got, want) {
			t.Errorf("sent to %s: %q, want %q", queue, got, want)
		}
	}
	if e := q.queue("images").sent; len(e) == 1 && (aws.ToString(e[0].MessageAttributes["custom"].StringValue) != "kept" ||
		aws.ToString(e[0].MessageAttributes[dispatch.AttrRedrives].StringValue) != "1") {
		t.Errorf("sent to images with attributes %v, want its own kept and %s 1", e[0].MessageAttributes, dispatch.AttrRedrives)
	}
	if left := q.ids("work-dlq"); !slices.Equal(left, []string{"from-elsewhere", "from-unknown"}) {
		t.Errorf("left in work-dlq: %v, want the messages of no known queue", left)
	}
	if left := q.ids("images-dlq"); len(left) != 0 {
		t.Errorf("left in images-dlq: %v, want nothing", left)
	}
	for _, u := range q.receives {
		if u != dlqURL && u != queuePrefix+"images-dlq" {
			t.Errorf("received from %s, which is no dead-letter queue", u)
		}
	}
}

// A dead-letter queue that cannot be read, and a named queue whose redrive
// policy cannot be read, are counted in the sweep's stats and named in its
// error; the other dead-letter queues are read all the same, and a later
// sweep tries them again.
func TestRedriveReportsQueuesItCannotRead(t *testing.T) {
	t.Parallel()
	q := newQueues("work", "work-dlq", "images", "images-dlq", "gone", "gone-dlq", "locked")
	q.redrive("images", "images-dlq")
	q.redrive("gone", "gone-dlq")
	q.queue("gone-dlq").receiveErr = &types.QueueDoesNotExist{Message: aws.String("deleted")}
	q.queue("locked").attrsErr = errors.New("AccessDenied")
	q.put("images-dlq", "from-images", `{"v":1,"id":"i"}`, nil, "images")
	q.put("work-dlq", "from-work", `{"v":1,"id":"w"}`, nil, "work")
	d := newRedriver(t, q, queuePrefix+"gone", queuePrefix+"locked", queuePrefix+"images")
	st, err := d.Sweep(t.Context(), time.Now())
	if !errors.Is(err, dispatch.ErrSweep) {
		t.Fatalf("sweep: %v, want ErrSweep", err)
	}
	for _, name := range []string{"gone-dlq", "locked"} {
		if !strings.Contains(err.Error(), queuePrefix+name) {
			t.Errorf("the sweep's error does not name %s: %v", name, err)
		}
	}
	if st.Redriven != 2 || st.DeadLetterQueuesUnread != 2 {
		t.Errorf("stats %+v, want 2 redriven and 2 dead-letter queues unread", st)
	}
	if got := q.bodies("images"); len(got) != 1 {
		t.Errorf("sent to images: %q, want its dead letter", got)
	}

	// Once readable, the next sweep reads them.
	q.mu.Lock()
	q.queue("gone-dlq").receiveErr, q.queue("locked").attrsErr = nil, nil
	q.mu.Unlock()
	q.redrive("locked", "work-dlq")
	q.put("gone-dlq", "from-gone", `{"v":1,"id":"g"}`, nil, "gone")
	q.put("work-dlq", "from-locked", `{"v":1,"id":"l"}`, nil, "locked")
	if st, err := d.Sweep(t.Context(), time.Now()); err != nil || st.Redriven != 2 || st.DeadLetterQueuesUnread != 0 {
		t.Fatalf("the next sweep: %+v, %v; want both sent back", st, err)
	}
	if g, l := q.bodies("gone"), q.bodies("locked"); len(g) != 1 || len(l) != 1 {
		t.Fatalf("sent to gone %q and to locked %q, want one each", g, l)
	}
}

// One sweep makes at most 30 receives in all, taken in turn from every
// dead-letter queue: a busy one (the work queue's, full of rejected
// messages) does not keep the others from being read in the same sweep.
// With more dead-letter queues than that, the next sweep starts where this
// one stopped, so every queue is reached within a few sweeps.
func TestRedriveIsBoundedAndFairAcrossQueues(t *testing.T) {
	t.Parallel()
	const named = 40
	names := []string{"work", "work-dlq"}
	var refs []string
	for i := range named {
		n := fmt.Sprintf("q%02d", i)
		names = append(names, n, n+"-dlq")
		refs = append(refs, queuePrefix+n)
	}
	q := newQueues(names...)
	for i := range 400 {
		q.put("work-dlq", "rejected-"+strconv.Itoa(i), `not json`, map[string]string{"leasehold-reason": "not JSON"}, "")
	}
	for i := range named {
		n := fmt.Sprintf("q%02d", i)
		q.redrive(n, n+"-dlq")
		q.put(n+"-dlq", "from-"+n, `{"v":1,"id":"`+n+`"}`, nil, n)
	}
	d := newRedriver(t, q, refs...)

	// The first sweep: one receive from each of the first 30 queues (the
	// work queue's and 29 named), then its receives are spent.
	st, err := d.RedriveDeadLetters(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(q.receives) != 30 || st.Redriven != 29 {
		t.Fatalf("first sweep: %d receives, %d sent back; want 30 receives, 29 sent back", len(q.receives), st.Redriven)
	}
	// Then every queue is reached: each sweep at most 30 receives.
	for sweep := 2; sweep <= 4; sweep++ {
		before := len(q.receives)
		if _, err := d.RedriveDeadLetters(t.Context()); err != nil {
			t.Fatal(err)
		}
		if n := len(q.receives) - before; n > 30 {
			t.Fatalf("sweep %d made %d receives, want at most 30", sweep, n)
		}
	}
	for i := range named {
		n := fmt.Sprintf("q%02d", i)
		if got := q.bodies(n); len(got) != 1 {
			t.Errorf("after 4 sweeps, %s got %d of its dead letters back, want 1", n, len(got))
		}
	}

	// Two busy queues and a quiet one: the quiet one's message goes back in
	// the first round; the busy ones share the rest.
	q = newQueues("work", "work-dlq", "busy", "busy-dlq", "quiet", "quiet-dlq")
	q.redrive("busy", "busy-dlq")
	q.redrive("quiet", "quiet-dlq")
	for i := range 400 {
		q.put("work-dlq", "w-"+strconv.Itoa(i), `not json`, map[string]string{"leasehold-reason": "not JSON"}, "")
		q.put("busy-dlq", "b-"+strconv.Itoa(i), `not json`, map[string]string{"leasehold-reason": "not JSON"}, "")
	}
	q.put("quiet-dlq", "from-quiet", `{"v":1,"id":"quiet"}`, nil, "quiet")
	if _, err := newRedriver(t, q, queuePrefix+"busy", queuePrefix+"quiet").RedriveDeadLetters(t.Context()); err != nil {
		t.Fatal(err)
	}
	per := map[string]int{}
	for _, u := range q.receives {
		per[strings.TrimPrefix(u, queuePrefix)]++
	}
	if len(q.receives) != 30 || per["quiet-dlq"] != 2 || per["work-dlq"] != 14 || per["busy-dlq"] != 14 || len(q.bodies("quiet")) != 1 {
		t.Fatalf("receives %v (%d), sent to quiet %q; want 14 each from the busy ones, 2 from the quiet one, whose message went back", per, len(q.receives), q.bodies("quiet"))
	}
}

// A dead letter that already has SQS's 10 message attributes has no room
// for leasehold-redrives: SQS would refuse it with an 11th. It goes back
// with its own 10, its count kept in the store, so it is sent back at most
// 3 times; then it stays, visible, and no later sweep tries to send it.
// One with 9 attributes still takes the attribute.
func TestRedriveDeadLetterWithTenAttributes(t *testing.T) {
	t.Parallel()
	full, nine := map[string]string{}, map[string]string{}
	for i := range dispatch.MaxMessageAttributes {
		full["a"+strconv.Itoa(i)] = "v"
		if i < dispatch.MaxMessageAttributes-1 {
			nine["a"+strconv.Itoa(i)] = "v"
		}
	}
	q := newQueues("work", "work-dlq")
	store := leasemem.New(lease.Options{})
	d := newRedriverOn(t, store, q)
	q.put("work-dlq", "nine", `{"v":1,"id":"nine"}`, nine, "work")
	for sweep := 1; sweep <= dispatch.MaxDeadLetterRedrives+2; sweep++ {
		// SQS moved it back to the dead-letter queue after each redrive.
		q.mu.Lock()
		q.put("work-dlq", "full-"+strconv.Itoa(sweep), `{"v":1,"id":"full"}`, full, "work")
		q.mu.Unlock()
		st, err := d.RedriveDeadLetters(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		sent := 0
		for _, e := range q.queue("work").sent {
			if aws.ToString(e.MessageBody) == `{"v":1,"id":"full"}` {
				sent++
				if len(e.MessageAttributes) != dispatch.MaxMessageAttributes {
					t.Fatalf("sweep %d sent it with %d attributes, want its own %d", sweep, len(e.MessageAttributes), dispatch.MaxMessageAttributes)
				}
			}
		}
		if want := min(sweep, dispatch.MaxDeadLetterRedrives); sent != want {
			t.Fatalf("after sweep %d (%+v) it was sent back %d times, want %d", sweep, st, sent, want)
		}
	}
	// It stays, visible, unsent since its count ran out.
	left := q.ids("work-dlq")
	if len(left) != 2 || !strings.HasPrefix(left[0], "full-") || len(q.queue("work-dlq").hidden) != 0 {
		t.Errorf("left %v, hidden %v; want the two copies after its count ran out, visible", left, q.queue("work-dlq").hidden)
	}
	if e := q.queue("work").sent[0]; aws.ToString(e.MessageBody) != `{"v":1,"id":"nine"}` || aws.ToString(e.MessageAttributes[dispatch.AttrRedrives].StringValue) != "1" || len(e.MessageAttributes) != 10 {
		t.Errorf("the message of 9 attributes went back as %q with %v, want its 9 and %s 1", aws.ToString(e.MessageBody), e.MessageAttributes, dispatch.AttrRedrives)
	}

	// A store that keeps no counts leaves such a message where it is.
	q = newQueues("work", "work-dlq")
	q.put("work-dlq", "full", `{"v":1,"id":"full"}`, full, "work")
	st, err := newRedriverOn(t, countless{store}, q).RedriveDeadLetters(t.Context())
	if err != nil || st != (dispatch.RedriveStats{Left: 1}) || len(q.queue("work").sent) != 0 {
		t.Fatalf("without counts: %+v, %v, sent %d; want it left and nothing sent", st, err, len(q.queue("work").sent))
	}
}

// countless is a store without redrive counts.
type countless struct{ dispatch.Store }
