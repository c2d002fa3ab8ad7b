package admin

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
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/lifecycle"
)

const (
	fakeDLQ  = "https://sqs.test.invalid/000000000000/work-dlq"
	fakeWork = "https://sqs.test.invalid/000000000000/work"
)

func fakeARN(url string) string {
	return "arn:aws:sqs:test:000000000000:" + url[strings.LastIndexByte(url, '/')+1:]
}

type fakeMessage struct {
	id, body string
	from     string // DeadLetterQueueSourceArn; empty: not set
	hidden   bool
	receives int
	handle   string // of its latest receive
}

// fakeSQS is one dead-letter queue for the dead-letter functions. A
// receive hands out at most batch of its visible messages (SQS answers
// with a sample); the first emptyFirst receives answer nothing.
type fakeSQS struct {
	mu         sync.Mutex
	msgs       []*fakeMessage
	batch      int
	emptyFirst int
	sendErr    error
	deleteErr  error
	// onSend runs in SendMessage (a request cancelled after the send).
	onSend func()

	receives  int
	waits     []int32
	sent      []*sqs.SendMessageInput
	deleted   []string
	released  []string
	deleteCtx error // the context's error as DeleteMessage saw it
}

func newFakeSQS(n int) *fakeSQS {
	f := &fakeSQS{batch: 10}
	for i := range n {
		f.msgs = append(f.msgs, &fakeMessage{id: fmt.Sprintf("m-%d", i), body: fmt.Sprintf("body %d", i)})
	}
	return f
}

func (f *fakeSQS) GetQueueUrl(_ context.Context, in *sqs.GetQueueUrlInput, _ ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	return &sqs.GetQueueUrlOutput{QueueUrl: aws.String("https://sqs.test.invalid/000000000000/" + aws.ToString(in.QueueName))}, nil
}

func (f *fakeSQS) GetQueueAttributes(_ context.Context, in *sqs.GetQueueAttributesInput, _ ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	url := aws.ToString(in.QueueUrl)
	visible := 0
	if url == fakeDLQ {
		for _, m := range f.msgs {
			if !m.hidden {
				visible++
			}
		}
	}
	return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{
		string(sqstypes.QueueAttributeNameApproximateNumberOfMessages): strconv.Itoa(visible),
		string(sqstypes.QueueAttributeNameQueueArn):                    fakeARN(url),
	}}, nil
}

func (f *fakeSQS) ReceiveMessage(_ context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.receives++
	f.waits = append(f.waits, in.WaitTimeSeconds)
	out := &sqs.ReceiveMessageOutput{}
	if f.receives <= f.emptyFirst {
		return out, nil
	}
	for _, m := range f.msgs {
		if m.hidden || len(out.Messages) >= min(int(in.MaxNumberOfMessages), f.batch) {
			continue
		}
		m.hidden = true
		m.receives++
		m.handle = fmt.Sprintf("%s#%d", m.id, m.receives)
		attrs := map[string]string{string(sqstypes.MessageSystemAttributeNameApproximateReceiveCount): strconv.Itoa(m.receives)}
		if m.from != "" {
			attrs[string(sqstypes.MessageSystemAttributeNameDeadLetterQueueSourceArn)] = m.from
		}
		out.Messages = append(out.Messages, sqstypes.Message{
			MessageId: aws.String(m.id), Body: aws.String(m.body), ReceiptHandle: aws.String(m.handle), Attributes: attrs,
			MessageAttributes: map[string]sqstypes.MessageAttributeValue{
				lifecycle.AttrReason: {DataType: aws.String("String"), StringValue: aws.String("rejected")},
				"keep":               {DataType: aws.String("String"), StringValue: aws.String("yes")},
			},
		})
	}
	return out, nil
}

func (f *fakeSQS) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.onSend != nil {
		f.onSend()
	}
	if f.sendErr != nil {
		return nil, f.sendErr
	}
	f.sent = append(f.sent, in)
	return &sqs.SendMessageOutput{MessageId: aws.String("new")}, nil
}

func (f *fakeSQS) DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deleteCtx = ctx.Err()
	if f.deleteErr != nil {
		return nil, f.deleteErr
	}
	h := aws.ToString(in.ReceiptHandle)
	f.deleted = append(f.deleted, h)
	f.msgs = slices.DeleteFunc(f.msgs, func(m *fakeMessage) bool { return m.handle == h })
	return &sqs.DeleteMessageOutput{}, nil
}

func (f *fakeSQS) ChangeMessageVisibilityBatch(_ context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(in.Entries) > 10 {
		return nil, errors.New("too many entries in one batch")
	}
	for _, e := range in.Entries {
		h := aws.ToString(e.ReceiptHandle)
		f.released = append(f.released, h)
		for _, m := range f.msgs {
			if m.handle == h && e.VisibilityTimeout == 0 {
				m.hidden = false
			}
		}
	}
	return &sqs.ChangeMessageVisibilityBatchOutput{}, nil
}

// hidden lists the ids of the messages left hidden.
func (f *fakeSQS) hidden() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []string
	for _, m := range f.msgs {
		if m.hidden {
			ids = append(ids, m.id)
		}
	}
	return ids
}

func adminOn(f *fakeSQS) *Admin {
	return &Admin{callTimeout: 5 * time.Second, queues: f}
}

func TestPeekDeadLettersReadsUntilTheDepthIsSeenAndShowsThemAgain(t *testing.T) {
	f := newFakeSQS(7)
	f.batch, f.emptyFirst = 3, 1
	got, err := adminOn(f).PeekDeadLetters(t.Context(), fakeDLQ, 50)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 7 {
		t.Fatalf("peeked %d of 7 messages", len(got))
	}
	if got[0].Reason != "rejected" || got[0].Receives != 1 || got[0].Body != "body 0" {
		t.Errorf("first letter: %+v", got[0])
	}
	// An empty receive, then 3, 3 and 1: it stops once it has seen the 7
	// the depth promised.
	if f.receives != 4 {
		t.Errorf("%d receives, want 4", f.receives)
	}
	for _, w := range f.waits {
		if w != 1 {
			t.Errorf("a receive waited %d s, want 1", w)
		}
	}
	if h := f.hidden(); len(h) != 0 || len(f.released) != 7 {
		t.Errorf("after the peek: hidden %v, %d released", h, len(f.released))
	}
}

func TestPeekDeadLettersStopsAtMax(t *testing.T) {
	f := newFakeSQS(25)
	got, err := adminOn(f).PeekDeadLetters(t.Context(), fakeDLQ, 12)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 12 || f.receives != 2 {
		t.Fatalf("%d letters in %d receives, want 12 in 2", len(got), f.receives)
	}
	if h := f.hidden(); len(h) != 0 {
		t.Errorf("left hidden: %v", h)
	}
}

func TestRedriveDeadLetter(t *testing.T) {
	boom := errors.New("boom")
	cases := []struct {
		name    string
		target  string
		setup   func(f *fakeSQS)
		wantErr error  // errors.Is
		errText string // in the message
		sent    bool
		deleted bool
	}{
		{name: "found in the middle of a batch", target: "m-2", sent: true, deleted: true},
		{name: "found in a later receive", target: "m-4", setup: func(f *fakeSQS) { f.batch = 2 }, sent: true, deleted: true},
		{name: "found after an empty receive", target: "m-0", setup: func(f *fakeSQS) { f.emptyFirst = 2 }, sent: true, deleted: true},
		{name: "not found", target: "m-9", wantErr: leasehold.ErrNotFound},
		{name: "send fails", target: "m-2", setup: func(f *fakeSQS) { f.sendErr = boom }, wantErr: boom, errText: "send to"},
		{name: "delete fails", target: "m-2", setup: func(f *fakeSQS) { f.deleteErr = boom }, wantErr: boom, errText: "was sent", sent: true},
		{name: "from its own queue", target: "m-2", setup: func(f *fakeSQS) { f.msgs[2].from = fakeARN(fakeWork) }, sent: true, deleted: true},
		{name: "from another queue", target: "m-2", setup: func(f *fakeSQS) { f.msgs[2].from = fakeARN("https://sqs.test.invalid/000000000000/other") }, wantErr: ErrDeadLetterSource, errText: "other"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeSQS(5)
			if c.setup != nil {
				c.setup(f)
			}
			err := adminOn(f).RedriveDeadLetter(t.Context(), fakeDLQ, fakeWork, c.target)
			if c.wantErr == nil && err != nil || c.wantErr != nil && !errors.Is(err, c.wantErr) || !strings.Contains(fmt.Sprint(err), c.errText) {
				t.Fatalf("err = %v, want %v with %q", err, c.wantErr, c.errText)
			}
			if c.sent != (len(f.sent) == 1) || len(f.sent) > 1 {
				t.Fatalf("%d sends, want sent=%t", len(f.sent), c.sent)
			}
			if c.sent {
				in := f.sent[0]
				if aws.ToString(in.QueueUrl) != fakeWork || aws.ToString(in.MessageBody) != "body "+c.target[2:] {
					t.Errorf("sent %s to %s", aws.ToString(in.MessageBody), aws.ToString(in.QueueUrl))
				}
				if _, ok := in.MessageAttributes[lifecycle.AttrReason]; ok || in.MessageAttributes["keep"].StringValue == nil {
					t.Errorf("sent attributes %v: want keep and not the reason", in.MessageAttributes)
				}
			}
			if c.deleted != (len(f.deleted) == 1) {
				t.Fatalf("deleted %v, want deleted=%t", f.deleted, c.deleted)
			}
			// Every message it held is shown again but one sent and not
			// deleted, which shows again when its visibility ends.
			var wantHidden []string
			if c.sent && !c.deleted {
				wantHidden = []string{c.target}
			}
			if h := f.hidden(); !slices.Equal(h, wantHidden) {
				t.Errorf("hidden after the redrive: %v, want %v", h, wantHidden)
			}
			for _, w := range f.waits {
				if w != 1 {
					t.Errorf("a receive waited %d s, want 1", w)
				}
			}
		})
	}
}

// The delete after a successful send runs even when the request's context
// ends in between.
func TestRedriveDeletesAfterTheRequestIsCancelled(t *testing.T) {
	f := newFakeSQS(3)
	ctx, cancel := context.WithCancel(t.Context())
	f.onSend = cancel
	if err := adminOn(f).RedriveDeadLetter(ctx, fakeDLQ, fakeWork, "m-1"); err != nil {
		t.Fatal(err)
	}
	if len(f.deleted) != 1 || f.deleteCtx != nil {
		t.Fatalf("deleted %v with a context error %v", f.deleted, f.deleteCtx)
	}
	if h := f.hidden(); len(h) != 0 {
		t.Errorf("left hidden: %v", h)
	}
}
