package leasehold_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/leasemem"
	"github.com/leasehold/leasehold/workflow"
)

const traceQueueURL = "https://sqs.test/work"

// memQueue is a work queue in memory: what is sent waits in order until
// the test takes it. A delayed message (a callback's timeout) is kept
// aside: it is never due within the test.
type memQueue struct {
	mu      sync.Mutex
	n       int
	ready   []events.SQSMessage
	delayed []string
}

func (q *memQueue) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.n++
	id := "m" + strconv.Itoa(q.n)
	if in.DelaySeconds > 0 {
		q.delayed = append(q.delayed, aws.ToString(in.MessageBody))
	} else {
		q.ready = append(q.ready, events.SQSMessage{MessageId: id, ReceiptHandle: id, Body: aws.ToString(in.MessageBody),
			Attributes: map[string]string{"ApproximateReceiveCount": "1"}})
	}
	return &sqs.SendMessageOutput{MessageId: aws.String(id)}, nil
}

func (q *memQueue) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		if _, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: in.QueueUrl, MessageBody: e.MessageBody, DelaySeconds: e.DelaySeconds}); err != nil {
			return nil, err
		}
		out.Successful = append(out.Successful, sqstypes.SendMessageBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

func (*memQueue) ChangeMessageVisibility(context.Context, *sqs.ChangeMessageVisibilityInput, ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	return &sqs.ChangeMessageVisibilityOutput{}, nil
}

func (*memQueue) ChangeMessageVisibilityBatch(_ context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	out := &sqs.ChangeMessageVisibilityBatchOutput{}
	for _, e := range in.Entries {
		out.Successful = append(out.Successful, sqstypes.ChangeMessageVisibilityBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

func (*memQueue) DeleteMessage(context.Context, *sqs.DeleteMessageInput, ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	return &sqs.DeleteMessageOutput{}, nil
}

func (*memQueue) GetQueueUrl(_ context.Context, in *sqs.GetQueueUrlInput, _ ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	return &sqs.GetQueueUrlOutput{QueueUrl: aws.String("https://sqs.test/" + aws.ToString(in.QueueName))}, nil
}

// take removes and returns the messages ready now.
func (q *memQueue) take() []events.SQSMessage {
	q.mu.Lock()
	defer q.mu.Unlock()
	m := q.ready
	q.ready = nil
	return m
}

// drain hands the worker every ready message, a batch at a time, until
// none is left; a message the worker does not acknowledge fails the test.
func drain(t *testing.T, w *leasehold.Worker, q *memQueue) {
	t.Helper()
	for range 100 {
		msgs := q.take()
		if len(msgs) == 0 {
			return
		}
		resp, err := w.HandleSQS(t.Context(), events.SQSEvent{Records: msgs})
		if err != nil || len(resp.BatchItemFailures) > 0 {
			t.Fatalf("HandleSQS: %v, failures %v", err, resp.BatchItemFailures)
		}
	}
	t.Fatal("the queue never drained")
}

// A workflow is one trace: the client's enqueue, the parent's attempts,
// the 5 children it fans out to, the wake-up, the callback answered
// through the client by a caller who got the trace context with the token,
// and the resumed run that returns. Each child's attempt descends from the
// parent's first attempt; the run after the callback descends from the
// callback's span.
func TestTracingFanOutAndCallbackAreOneTrace(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	store := leasemem.New(lease.Options{LeaseDuration: 30 * time.Second})
	q := &memQueue{}

	type handedOut struct {
		token string
		sc    trace.SpanContext
	}
	var (
		mu       sync.Mutex
		callback []handedOut
	)
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "kid", func(ctx context.Context, task *leasehold.Task[int]) (int, error) {
		return workflow.Step(ctx, "double", func(context.Context) (int, error) { return 2 * task.Payload, nil })
	})
	leasehold.Handle(hs, "fan", func(ctx context.Context, task *leasehold.Task[int]) (int, error) {
		kids := make([]workflow.Child, 5)
		for i := range kids {
			kids[i] = workflow.Child{Kind: "kid", Payload: i}
		}
		outs, err := workflow.All(ctx, "kids", kids...)
		if err != nil {
			return 0, err
		}
		sum := 0
		for _, o := range outs {
			var v int
			if err := json.Unmarshal(o.Result, &v); err != nil {
				return 0, err
			}
			sum += v
		}
		bonus, err := workflow.WaitForCallback[int](ctx, "approve", time.Hour, func(ctx context.Context, tok string) error {
			// The outside system gets the trace context with the token,
			// as it would in a traced request's headers.
			mu.Lock()
			callback = append(callback, handedOut{tok, trace.SpanContextFromContext(ctx)})
			mu.Unlock()
			return nil
		})
		if err != nil {
			return 0, err
		}
		return sum + bonus, nil
	})
	w, err := leasehold.NewWorkerOn(store, q, leasehold.WorkerConfig{QueueURL: traceQueueURL, Handlers: hs,
		Logger: slog.New(slog.DiscardHandler), Owner: "test", TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	c := leasehold.NewClientOn(store, q, traceQueueURL, tp)

	info, err := c.Enqueue(t.Context(), leasehold.Submission{Kind: "fan", Payload: 0, ID: "fan-1"})
	if err != nil {
		t.Fatal(err)
	}
	drain(t, w, q)
	mu.Lock()
	if len(callback) != 1 {
		t.Fatalf("%d callback tokens handed out, want 1", len(callback))
	}
	cb := callback[0]
	mu.Unlock()
	caller := trace.ContextWithRemoteSpanContext(t.Context(), cb.sc)
	if _, err := c.CompleteCallback(caller, cb.token, 100); err != nil {
		t.Fatal(err)
	}
	drain(t, w, q)
	got, err := c.Get(t.Context(), info.ID)
	if err != nil || got.Status != leasehold.StatusSucceeded || string(got.Result) != "120" {
		t.Fatalf("parent: %+v, %v", got, err)
	}

	spans := rec.Ended()
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byID[s.SpanContext().SpanID()] = s
	}
	root := spans[0].SpanContext().TraceID()
	for _, s := range spans {
		if s.SpanContext().TraceID() != root {
			t.Errorf("span %s (%v) is in trace %s, want %s", s.Name(), s.Attributes(), s.SpanContext().TraceID(), root)
		}
	}
	attr := func(s sdktrace.ReadOnlySpan, key string) string {
		for _, a := range s.Attributes() {
			if string(a.Key) == key {
				return a.Value.String()
			}
		}
		return ""
	}
	// descends reports whether s has anc among its ancestors.
	descends := func(s sdktrace.ReadOnlySpan, anc trace.SpanID) bool {
		for p := s.Parent(); p.IsValid(); {
			if p.SpanID() == anc {
				return true
			}
			ps, ok := byID[p.SpanID()]
			if !ok {
				return false
			}
			p = ps.Parent()
		}
		return false
	}
	var enqueue, answer sdktrace.ReadOnlySpan
	var parentAttempts, kidAttempts []sdktrace.ReadOnlySpan
	names := map[string]int{}
	for _, s := range spans {
		names[s.Name()]++
		switch {
		case s.Name() == "leasehold.enqueue":
			enqueue = s
		case s.Name() == "leasehold.callback" && s.SpanKind() == trace.SpanKindProducer:
			answer = s
		case s.Name() == "leasehold.attempt" && attr(s, "leasehold.task.kind") == "fan":
			parentAttempts = append(parentAttempts, s)
		case s.Name() == "leasehold.attempt" && attr(s, "leasehold.task.kind") == "kid":
			kidAttempts = append(kidAttempts, s)
		}
	}
	if enqueue == nil || answer == nil {
		t.Fatalf("no enqueue or callback span among %v", names)
	}
	if enqueue.Parent().IsValid() {
		t.Errorf("the enqueue span has a parent: %v", enqueue.Parent())
	}
	for _, n := range []string{"leasehold.claim", "leasehold.finish", "leasehold.step", "leasehold.await", "leasehold.run"} {
		if names[n] == 0 {
			t.Errorf("no %s span among %v", n, names)
		}
	}
	if len(kidAttempts) != 5 {
		t.Fatalf("%d child attempt spans, want 5 (%v)", len(kidAttempts), names)
	}
	// The parent's first attempt: the enqueue's child, which spawned the
	// children.
	var first sdktrace.ReadOnlySpan
	for _, s := range parentAttempts {
		if s.Parent().SpanID() == enqueue.SpanContext().SpanID() {
			first = s
		}
	}
	if first == nil {
		t.Fatalf("no attempt of the parent is the enqueue span's child (%d parent attempts)", len(parentAttempts))
	}
	if attr(first, "leasehold.task.id") != "fan-1" || attr(first, "leasehold.task.attempt") != "1" || attr(first, "leasehold.task.fence") == "" {
		t.Errorf("first attempt's attributes: %v", first.Attributes())
	}
	for _, k := range kidAttempts {
		if !descends(k, first.SpanContext().SpanID()) {
			t.Errorf("child attempt %s does not descend from the parent's first attempt", attr(k, "leasehold.task.id"))
		}
	}
	// The callback's answer comes from the caller, who had the context of
	// the run that handed the token out; the parent's last run descends
	// from the answer.
	if !descends(answer, first.SpanContext().SpanID()) {
		// The token was handed out by the run after the children, which
		// descends from a child: the answer must still be in the trace.
		var resumed bool
		for _, s := range parentAttempts {
			if descends(answer, s.SpanContext().SpanID()) {
				resumed = true
			}
		}
		if !resumed {
			t.Errorf("the callback's span descends from no attempt of the parent")
		}
	}
	var last sdktrace.ReadOnlySpan
	for _, s := range parentAttempts {
		if attr(s, "leasehold.outcome") == "succeeded" {
			last = s
		}
	}
	if last == nil || !descends(last, answer.SpanContext().SpanID()) {
		t.Errorf("the parent's succeeding attempt does not descend from the callback's span")
	}
	// No payload reaches a span.
	for _, s := range spans {
		for _, a := range s.Attributes() {
			if v := a.Value.String(); v == "120" || v == "100" {
				t.Errorf("span %s has attribute %s=%s, a payload or result", s.Name(), a.Key, v)
			}
		}
	}
	if t.Failed() {
		for _, s := range spans {
			t.Logf("%s %s parent %s %v", s.Name(), s.SpanContext().SpanID(), s.Parent().SpanID(), s.Attributes())
		}
	}
}

// A record with an X-Ray trace header (the AWSTraceHeader system
// attribute) links its attempt span to that trace; a token without a
// trace context starts a new trace.
func TestTracingLinksXRayHeader(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	store := leasemem.New(lease.Options{LeaseDuration: 30 * time.Second})
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "echo", func(_ context.Context, task *leasehold.Task[string]) (string, error) { return task.Payload, nil })
	w, err := leasehold.NewWorkerOn(store, &memQueue{}, leasehold.WorkerConfig{QueueURL: traceQueueURL, Handlers: hs,
		Logger: slog.New(slog.DiscardHandler), Owner: "test", TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	ev := events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m1", ReceiptHandle: "r", Body: `{"v":1,"kind":"echo","id":"e","payload":"hi"}`,
		Attributes: map[string]string{"ApproximateReceiveCount": "1",
			"AWSTraceHeader": "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"}}}}
	if resp, err := w.HandleSQS(t.Context(), ev); err != nil || len(resp.BatchItemFailures) > 0 {
		t.Fatalf("HandleSQS: %v, %v", resp, err)
	}
	var found bool
	for _, s := range rec.Ended() {
		if s.Name() != "leasehold.attempt" {
			continue
		}
		found = true
		if s.Parent().IsValid() {
			t.Errorf("attempt of a token without a trace context has parent %v", s.Parent())
		}
		links := s.Links()
		if len(links) != 1 || links[0].SpanContext.TraceID().String() != "5759e988bd862e3fe1be46a994272793" ||
			links[0].SpanContext.SpanID().String() != "53995c3f42cd8ad8" {
			t.Errorf("attempt links %+v, want the X-Ray trace", links)
		}
	}
	if !found {
		t.Fatal("no attempt span")
	}
}

// Without a tracer provider the worker adds no trace context to the tokens
// it sends, even under a traced invocation.
func TestTracingOffSendsNoTraceContext(t *testing.T) {
	t.Parallel()
	store := leasemem.New(lease.Options{LeaseDuration: 30 * time.Second})
	q := &memQueue{}
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "kid", func(context.Context, *leasehold.Task[int]) (int, error) { return 1, nil })
	leasehold.Handle(hs, "fan", func(ctx context.Context, _ *leasehold.Task[int]) (int, error) {
		_, err := workflow.All(ctx, "kids", workflow.Child{Kind: "kid"}, workflow.Child{Kind: "kid"})
		return 0, err
	})
	w, err := leasehold.NewWorkerOn(store, q, leasehold.WorkerConfig{QueueURL: traceQueueURL, Handlers: hs,
		Logger: slog.New(slog.DiscardHandler), Owner: "test"})
	if err != nil {
		t.Fatal(err)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled})
	ctx := trace.ContextWithSpanContext(t.Context(), sc)
	ev := events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m0", ReceiptHandle: "r", Body: `{"v":1,"kind":"fan","id":"f"}`,
		Attributes: map[string]string{"ApproximateReceiveCount": "1"}}}}
	if resp, err := w.HandleSQS(ctx, ev); err != nil || len(resp.BatchItemFailures) > 0 {
		t.Fatalf("HandleSQS: %v, %v", resp, err)
	}
	sent := q.take()
	if len(sent) != 2 {
		t.Fatalf("%d tokens sent, want the 2 children's", len(sent))
	}
	for _, m := range sent {
		if strings.Contains(m.Body, `"tp"`) || strings.Contains(m.Body, `traceparent`) {
			t.Errorf("token %s carries a trace context with tracing off", m.Body)
		}
	}
}
