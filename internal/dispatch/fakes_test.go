package dispatch_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/jonboulle/clockwork"

	"github.com/leasehold/leasehold/internal/dispatch"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/leasemem"
	"github.com/leasehold/leasehold/internal/token"
)

var _ dispatch.SQSClient = (*sqs.Client)(nil)

// sentToken is one dispatch token the fake queue accepted.
type sentToken struct {
	ID    string // task id the token refers to
	Delay int32
	Queue string // the queue URL it was sent to
	// CreateToken is set on a token sent before its task was stored (an
	// inline token that carries the task).
	CreateToken string
}

// fakeSQS records what is sent. Entries for the task ids in failIDs are
// refused one by one; a batch holding a task id in failCall fails as a
// whole.
type fakeSQS struct {
	mu        sync.Mutex
	tokens    []sentToken
	batches   []int // entries per SendMessageBatch call
	dlq       []sqs.SendMessageInput
	failIDs   map[string]bool
	failCall  map[string]bool
	failAll   bool
	failDLQ   bool
	nextMsgID int
	// onSend, if set, sees each token accepted, under mu: a worker or
	// another caller acting on it.
	onSend func(tok token.Token)
}

func newFakeSQS() *fakeSQS {
	return &fakeSQS{failIDs: map[string]bool{}, failCall: map[string]bool{}}
}

func (f *fakeSQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(in.Entries) == 0 || len(in.Entries) > dispatch.MaxBatchEntries {
		return nil, fmt.Errorf("fake: %d entries in a batch", len(in.Entries))
	}
	f.batches = append(f.batches, len(in.Entries))
	ids := map[string]bool{}
	var sent []sentToken
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		if ids[aws.ToString(e.Id)] {
			return nil, fmt.Errorf("fake: duplicate entry id %s", aws.ToString(e.Id))
		}
		ids[aws.ToString(e.Id)] = true
		tok, err := token.Decode(aws.ToString(e.MessageBody))
		if err != nil || (tok.Inline() && tok.CreateToken == "") {
			return nil, fmt.Errorf("fake: body %q is neither a reference token nor one sent before its create: %v", aws.ToString(e.MessageBody), err)
		}
		if f.failAll || f.failCall[tok.ID] {
			return nil, errors.New("fake: service unavailable")
		}
		if f.failIDs[tok.ID] {
			out.Failed = append(out.Failed, types.BatchResultErrorEntry{
				Id: e.Id, Code: aws.String("InternalError"), Message: aws.String("fake refusal"), SenderFault: false,
			})
			continue
		}
		sent = append(sent, sentToken{ID: tok.ID, Delay: e.DelaySeconds, Queue: aws.ToString(in.QueueUrl), CreateToken: tok.CreateToken})
		if f.onSend != nil {
			f.onSend(tok)
		}
		f.nextMsgID++
		out.Successful = append(out.Successful, types.SendMessageBatchResultEntry{
			Id: e.Id, MessageId: aws.String("m-" + strconv.Itoa(f.nextMsgID)),
		})
	}
	f.tokens = append(f.tokens, sent...)
	return out, nil
}

func (f *fakeSQS) SendMessage(ctx context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failDLQ {
		return nil, errors.New("fake: dead-letter queue unavailable")
	}
	f.dlq = append(f.dlq, *in)
	return &sqs.SendMessageOutput{MessageId: aws.String("dlq")}, nil
}

// take returns and forgets the tokens sent so far.
func (f *fakeSQS) take() []sentToken {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.tokens
	f.tokens = nil
	return out
}

func (f *fakeSQS) deadLetters() []sqs.SendMessageInput {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]sqs.SendMessageInput(nil), f.dlq...)
}

func (f *fakeSQS) set(fn func(f *fakeSQS)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

// The unit tests' fixed times.
var t0 = time.Date(2031, time.March, 14, 15, 9, 26, 0, time.UTC)

const (
	grace     = 2 * time.Minute
	workQueue = "https://sqs.test/leasehold-work"
	intakeDLQ = "https://sqs.test/leasehold-intake-dlq"
)

// unitEnv is a dispatcher on the in-memory store, a fake queue and a fake
// clock.
type unitEnv struct {
	clock *clockwork.FakeClock
	store *leasemem.Store
	sqs   *fakeSQS
	d     *dispatch.Dispatcher
	logs  *syncBuffer
}

func setupUnit(t *testing.T, mods ...func(*dispatch.Config)) *unitEnv {
	t.Helper()
	clock := clockwork.NewFakeClockAt(t0)
	e := &unitEnv{
		clock: clock,
		store: leasemem.New(lease.Options{Clock: clock, DispatchGrace: grace}),
		sqs:   newFakeSQS(),
		logs:  &syncBuffer{},
	}
	cfg := dispatch.Config{
		Store:         e.store,
		SQS:           e.sqs,
		WorkQueueURL:  workQueue,
		IntakeDLQURL:  intakeDLQ,
		DispatchGrace: grace,
		Clock:         clock,
		Logger:        slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	for _, m := range mods {
		m(&cfg)
	}
	d, err := dispatch.New(cfg)
	if err != nil {
		t.Fatalf("dispatch.New: %v", err)
	}
	e.d = d
	return e
}

func (e *unitEnv) get(t *testing.T, id string) lease.Task {
	t.Helper()
	task, err := e.store.Get(t.Context(), id)
	if err != nil {
		t.Fatalf("Get(%s): %v", id, err)
	}
	return task
}

func (e *unitEnv) intake(t *testing.T, ev events.SQSEvent) map[string]bool {
	t.Helper()
	resp, err := e.d.HandleIntake(t.Context(), ev)
	if err != nil {
		t.Fatalf("HandleIntake: %v", err)
	}
	return failures(resp)
}

func (e *unitEnv) sweep(t *testing.T) dispatch.SweepStats {
	t.Helper()
	st, err := e.d.Sweep(t.Context(), e.clock.Now())
	if err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	return st
}

func failures(resp events.SQSEventResponse) map[string]bool {
	out := map[string]bool{}
	for _, f := range resp.BatchItemFailures {
		out[f.ItemIdentifier] = true
	}
	return out
}

// message is an intake record.
type message struct{ id, body string }

func event(msgs ...message) events.SQSEvent {
	var ev events.SQSEvent
	for _, m := range msgs {
		ev.Records = append(ev.Records, events.SQSMessage{
			MessageId: m.id, ReceiptHandle: "rh-" + m.id, Body: m.body, EventSource: "aws:sqs",
			Attributes: map[string]string{"ApproximateReceiveCount": "1"},
		})
	}
	return ev
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// tokenIDs counts tokens by task id.
func tokenIDs(tokens []sentToken) map[string]int {
	out := map[string]int{}
	for _, tk := range tokens {
		out[tk.ID]++
	}
	return out
}
