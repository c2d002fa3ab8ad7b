package iam_test

// Each function's flows, run against the local AWS stack with the function's
// own wiring (handlers, Enforce) and a recording middleware, must make
// exactly the calls internal/iam lists: a listed call that no flow makes is
// a grant the role does not need. The flows include the rare paths (a
// message that names no task, a task leased elsewhere, an invalid
// submission, a sweep) so that every listed call has a flow that makes it.
//
// The same runs capture every log line (at DEBUG) and metrics line and
// check that a distinctive payload never appears in them.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/jonboulle/clockwork"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/examples"
	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/internal/dispatch"
	"github.com/leasehold/leasehold/internal/iam"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/dynamo"
	"github.com/leasehold/leasehold/internal/queues"
	"github.com/leasehold/leasehold/internal/token"
	"github.com/leasehold/leasehold/settings"
)

// secret is the distinctive payload content that must never be logged.
const secret = "s3cr3t-payload-7f1d2c"

// recorder collects the calls of one function, by template resource.
type recorder struct {
	mu      sync.Mutex
	targets map[string]string // table name / queue URL -> logical id
	bucket  string            // the payload bucket, whose BUCKET/tasks/... are iam.PayloadObjects
	calls   map[iam.Grant]bool
	unknown []iam.Call
}

// newRecorder maps the stack's resources to their logical ids; named is a
// queue a task names, one of iam.NamedQueues (by URL and by name), and
// namedDLQ its dead-letter queue, one of iam.NamedDeadLetterQueues.
func newRecorder(table string, q awstest.Queues, named, namedDLQ string) *recorder {
	return &recorder{
		targets: map[string]string{
			table:                     iam.TasksTable,
			table + "/index/sweep":    iam.SweepIndex,
			q.Work:                    iam.WorkQueue,
			q.WorkDLQ:                 iam.WorkDeadLetterQueue,
			q.Intake:                  iam.IntakeQueue,
			q.IntakeDLQ:               iam.IntakeDeadLetterQueue,
			named:                     iam.NamedQueues,
			queues.NameFromURL(named): iam.NamedQueues,
			namedDLQ:                  iam.NamedDeadLetterQueues,
		},
		calls: map[iam.Grant]bool{},
	}
}

func (r *recorder) add(c iam.Call) {
	r.mu.Lock()
	defer r.mu.Unlock()
	id, ok := r.targets[c.Target]
	if r.bucket != "" && strings.HasPrefix(c.Target, r.bucket+"/tasks/") {
		id, ok = iam.PayloadObjects, true
	}
	if !ok {
		r.unknown = append(r.unknown, c)
		return
	}
	r.calls[iam.Grant{Action: c.Action, Resource: id}] = true
}

// check compares the recorded calls with f.Calls. Without a payload
// bucket in the stack the grants on it are not expected.
func (r *recorder) check(t *testing.T, f iam.Function) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.bucket == "" {
		f.Calls = slices.DeleteFunc(slices.Clone(f.Calls), func(g iam.Grant) bool { return g.Resource == iam.PayloadObjects })
	}
	for _, c := range r.unknown {
		t.Errorf("%s called %s on %q, which is none of the template's resources", f.LogicalID, c.Action, c.Target)
	}
	for g := range r.calls {
		if !contains(f.Calls, g) {
			t.Errorf("%s called %s on %s, which internal/iam does not list", f.LogicalID, g.Action, g.Resource)
		}
	}
	for _, g := range f.Calls {
		if !r.calls[g] {
			t.Errorf("no flow of %s called %s on %s: drop it from internal/iam and the role, or add the flow that needs it", f.LogicalID, g.Action, g.Resource)
		}
	}
}

func contains(gs []iam.Grant, g iam.Grant) bool {
	for _, x := range gs {
		if x == g {
			return true
		}
	}
	return false
}

// syncBuffer is a log sink for concurrent writers.
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

// lines decodes JSON lines, failing on any that is not JSON.
func lines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var ls []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not a JSON line: %q", l)
		}
		ls = append(ls, m)
	}
	return ls
}

func noSecret(t *testing.T, what, out string) {
	t.Helper()
	if out == "" {
		t.Fatalf("no %s captured", what)
	}
	if strings.Contains(out, secret) {
		t.Errorf("the payload appears in the %s:\n%s", what, out)
	}
}

// stack is one test's resources, and an unrecorded SQS client to drive them.
type stack struct {
	cfg    aws.Config
	table  string
	queues awstest.Queues
	named  string // URL of a queue that tasks name (a fleet's own queue)
	// namedDLQ is the dead-letter queue of named (its redrive policy's).
	namedDLQ string
	// bucket is the stack's payload bucket (LEASEHOLD_PAYLOAD_BUCKET),
	// empty without one.
	bucket string
	sqs    *sqs.Client
}

func setupStack(t *testing.T) *stack {
	t.Helper()
	cfg := awstest.Config(t)
	fleet := awstest.NewQueues(t, cfg)
	bucket := os.Getenv(settings.EnvPayloadBucket)
	if bucket == "" && os.Getenv("LEASEHOLD_REQUIRE_STACK") == "1" {
		t.Fatal(settings.EnvPayloadBucket + " is unset: the stack has no payload bucket (scripts/stack.sh env prints it) [LEASEHOLD_REQUIRE_STACK=1]")
	}
	return &stack{cfg: cfg, table: awstest.NewTable(t, cfg), queues: awstest.NewQueues(t, cfg),
		named: fleet.Work, namedDLQ: fleet.WorkDLQ, bucket: bucket, sqs: sqs.NewFromConfig(cfg)}
}

// namedToken is an inline token whose task names the queue s.named.
func (s *stack) namedToken(t *testing.T, kind, id, payload string, maxAttempts int) string {
	t.Helper()
	body, err := token.Token{Kind: kind, ID: id, Payload: json.RawMessage(payload), MaxAttempts: maxAttempts,
		Queue: queues.NameFromURL(s.named)}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// tokenOn waits for a token of task id on queue url.
func (s *stack) tokenOn(t *testing.T, url, id string) {
	t.Helper()
	for _, r := range s.receive(t, url, 1).Records {
		tok, err := token.Decode(r.Body)
		if err != nil || tok.ID != id {
			t.Fatalf("on %s: %q (%v), want a token of %s", url, r.Body, err, id)
		}
	}
}

// recorded returns a copy of the stack's config that records into r and
// enforces f's grants, as the function's main does.
func (s *stack) recorded(r *recorder, f iam.Function) aws.Config {
	cfg := s.cfg.Copy()
	cfg.APIOptions = append(cfg.APIOptions, iam.Record(r.add), iam.Enforce(f.Calls))
	return cfg
}

func (s *stack) send(t *testing.T, url, body string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(10*time.Second))
	defer cancel()
	if _, err := s.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(body)}); err != nil {
		t.Fatalf("send: %v", err)
	}
}

// receive returns the next n messages of url as a Lambda event, as the
// event source mapping would deliver them.
func (s *stack) receive(t *testing.T, url string, n int) events.SQSEvent {
	t.Helper()
	return awstest.ReceiveN(t, s.sqs, url, n, 20*time.Second, 60, nil)
}

// receiveTask returns the next message of url that is a token of task id
// or of one of its children (id/...), as a one-record Lambda event. Any
// other message is left to come back.
func (s *stack) receiveTask(t *testing.T, url, id string) events.SQSEvent {
	t.Helper()
	return awstest.ReceiveN(t, s.sqs, url, 1, 20*time.Second, 60, func(m events.SQSMessage) bool {
		tok, err := token.Decode(m.Body)
		return err == nil && (tok.ID == id || strings.HasPrefix(tok.ID, id+"/"))
	})
}

func inline(t *testing.T, kind, id string, payload any, maxAttempts int) string {
	t.Helper()
	raw, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	body, err := token.Inline(kind, id, raw, maxAttempts)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

func TestWorkerFlowsCallExactlyItsGrantsAndLogNoPayload(t *testing.T) {
	t.Parallel()
	s := setupStack(t)
	rec := newRecorder(s.table, s.queues, s.named, s.namedDLQ)
	rec.bucket = s.bucket
	logs, emf := &syncBuffer{}, &syncBuffer{}

	// The worker as functions/worker/main.go wires it (with the example
	// kinds, as its leasehold_demo build registers them), at DEBUG.
	handlers := leasehold.NewHandlers()
	examples.Register(handlers)
	w, err := leasehold.NewWorker(leasehold.WorkerConfig{
		AWS: s.recorded(rec, iam.Worker), Table: s.table, QueueURL: s.queues.Work,
		DeadLetterQueueURL: s.queues.WorkDLQ, Handlers: handlers, PayloadBucket: s.bucket,
		Logger:  slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Metrics: emf,
	})
	if err != nil {
		t.Fatal(err)
	}

	// A task leased by another worker: its token is hidden, not run. The
	// lease outlasts the test (an hour), so its hidden and replaced tokens
	// do not come back during it, however slow the machine.
	store := dynamo.New(dynamodb.NewFromConfig(s.cfg), s.table, lease.Options{LeaseDuration: time.Hour})
	ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(10*time.Second))
	defer cancel()
	if _, err := store.Create(ctx, lease.NewTask{ID: "held", Kind: "greet", Payload: []byte(`{"name":"` + secret + `"}`), MaxAttempts: 3}); err != nil {
		t.Fatal(err)
	}
	awstest.Claim(t, ctx, store, "held", "another-worker")

	sent := []string{
		inline(t, "greet", "ok", examples.Greeting{Name: secret}, 3),                               // create-and-claim, finish
		inline(t, "flaky", "retry", map[string]any{"succeed_on_attempt": 2, "note": secret}, 2),    // release, fresh delayed token
		`{"v":1,"kind":"greet","payload":{"name":"` + secret + `"},"unexpected":"` + secret + `"}`, // names no task: to the DLQ
		token.Ref("held"), // leased elsewhere: hidden
		token.Ref("held"), // leased elsewhere, near maxReceiveCount: replaced and deleted
		s.namedToken(t, "flaky", "retry-named", `{"succeed_on_attempt":2}`, 2), // its retry goes to the queue it names
	}
	for _, body := range sent {
		s.send(t, s.queues.Work, body)
	}
	// One batch of exactly these, even if SQS holds a send twice.
	ev := awstest.ReceiveN(t, s.sqs, s.queues.Work, len(sent), 20*time.Second, 60, awstest.Bodies(sent...))
	held := 0
	for i, r := range ev.Records {
		if r.Body == token.Ref("held") {
			if held++; held == 2 {
				ev.Records[i].Attributes["ApproximateReceiveCount"] = "8"
			}
		}
	}
	// Each invocation has its own deadline, as Lambda gives it (the worker
	// stops starting handlers near it).
	handle := func(ev events.SQSEvent) (events.SQSEventResponse, error) {
		ictx := lambdacontext.NewContext(t.Context(), &lambdacontext.LambdaContext{AwsRequestID: "req-7"})
		ictx, icancel := context.WithTimeout(ictx, awstest.Scale(time.Minute))
		defer icancel()
		return w.HandleSQS(ictx, ev)
	}
	resp, err := handle(ev)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.BatchItemFailures) != 1 {
		t.Errorf("want only the leased task's message back, got %v", resp.BatchItemFailures)
	}

	// The task that names a queue has its next token there.
	s.tokenOn(t, s.named, "retry-named")

	// The retry's fresh token carries the next attempt, which succeeds.
	ev = s.receiveTask(t, s.queues.Work, "retry")
	if resp, err := handle(ev); err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("retry: %v %v", resp, err)
	}
	// A fan-out: the parent spawns a child and suspends; the child's end
	// wakes it; the resumed parent reads its child.
	s.send(t, s.queues.Work, inline(t, "shout", "fan", map[string]any{"texts": []string{secret}}, 2))
	for _, step := range []string{"parent spawns", "child runs", "parent resumes"} {
		if resp, err := handle(s.receiveTask(t, s.queues.Work, "fan")); err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("fan-out, %s: %v %v", step, resp, err)
		}
	}
	// A payload and a result over their inline limits, through the
	// payload bucket: the payload read back, the result written there.
	if s.bucket != "" {
		c, err := leasehold.NewClient(leasehold.ClientConfig{AWS: s.cfg, Table: s.table, QueueURL: s.queues.Work, PayloadBucket: s.bucket})
		if err != nil {
			t.Fatal(err)
		}
		ectx, ecancel := context.WithTimeout(t.Context(), awstest.Scale(30*time.Second))
		defer ecancel()
		text := strings.Repeat(secret+" ", 200<<10/(len(secret)+1))
		if _, err := c.Enqueue(ectx, leasehold.Submission{ID: "big", Kind: "upper", Payload: examples.Upper{Text: text}}); err != nil {
			t.Fatal(err)
		}
		if resp, err := handle(s.receiveTask(t, s.queues.Work, "big")); err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("big: %v %v", resp, err)
		}
		if got, err := leasehold.Result[string](ectx, c, "big"); err != nil || got != strings.ToUpper(text) {
			t.Fatalf("big's result: %d bytes, %v; want the upper-cased %d-byte text", len(got), err, len(text))
		}
	}
	// (A context of its own: the flows above may take long on a busy machine.)
	gctx, gcancel := context.WithTimeout(t.Context(), awstest.Scale(10*time.Second))
	defer gcancel()
	for id, want := range map[string]lease.Status{"ok": lease.StatusSucceeded, "retry": lease.StatusSucceeded, "held": lease.StatusRunning, "fan": lease.StatusSucceeded} {
		if got, err := store.Get(gctx, id); err != nil || got.Status != want {
			t.Errorf("task %s: %v %v, want %s", id, got.Status, err, want)
		}
	}

	rec.check(t, iam.Worker)
	noSecret(t, "worker logs", logs.String())
	noSecret(t, "worker metrics", emf.String())

	// The log line of a finished task carries what an operator needs.
	var found bool
	for _, l := range lines(t, logs.String()) {
		if l["msg"] != "task succeeded" || l["task_id"] != "ok" {
			continue
		}
		found = true
		for _, key := range []string{"request_id", "message_id", "task_id", "kind", "attempt", "fence", "duration_ms"} {
			if _, ok := l[key]; !ok {
				t.Errorf("log line %v lacks %s", l, key)
			}
		}
		if l["request_id"] != "req-7" {
			t.Errorf("request_id = %v", l["request_id"])
		}
	}
	if !found {
		t.Errorf("no \"task succeeded\" line for task ok in:\n%s", logs.String())
	}
}

func TestDispatchFlowsCallExactlyItsGrantsAndLogNoPayload(t *testing.T) {
	t.Parallel()
	s := setupStack(t)
	rec := newRecorder(s.table, s.queues, s.named, s.namedDLQ)
	logs := &syncBuffer{}
	clock := clockwork.NewFakeClockAt(time.Now())

	// The dispatcher as functions/dispatch/main.go wires it, at DEBUG.
	cfg := s.recorded(rec, iam.Dispatch)
	// The template lists the named queues by ARN.
	actx, acancel := context.WithTimeout(t.Context(), awstest.Scale(10*time.Second))
	defer acancel()
	attrs, err := s.sqs.GetQueueAttributes(actx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(s.named),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	settings := dispatch.Settings{Table: s.table, QueueURL: s.queues.Work, IntakeDLQURL: s.queues.IntakeDLQ, DeadLetterQueueURL: s.queues.WorkDLQ,
		NamedQueues: []string{attrs.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]}}
	store := dynamo.New(dynamodb.NewFromConfig(cfg), settings.Table, settings.StoreOptions())
	dc := settings.Config(store, sqs.NewFromConfig(cfg), slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	dc.Clock = clock
	d, err := dispatch.New(dc)
	if err != nil {
		t.Fatal(err)
	}

	invoke := func(event any) {
		t.Helper()
		raw, err := json.Marshal(event)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(time.Minute))
		defer cancel()
		if _, err := d.Handle(ctx, raw); err != nil {
			t.Fatalf("Handle: %v", err)
		}
	}
	record := func(id, body string) events.SQSMessage {
		return events.SQSMessage{MessageId: id, Body: body, EventSource: "aws:sqs", ReceiptHandle: "rh-" + id}
	}
	invoke(events.SQSEvent{Records: []events.SQSMessage{
		record("m-now", `{"v":1,"kind":"greet","id":"now","payload":{"name":"`+secret+`"}}`),                            // store, token now
		record("m-later", `{"v":1,"kind":"greet","id":"later","payload":{"name":"`+secret+`"},"delay_seconds":3600}`),   // store, sweep later
		record("m-bad", `{"v":1,"kind":"greet","payload":{"name":"`+secret+`"},"bogus":1}`),                             // invalid: to the DLQ
		record("m-named", `{"v":1,"kind":"greet","id":"named","payload":{},"queue":"`+queues.NameFromURL(s.named)+`"}`), // token to the queue it names
	}})
	s.tokenOn(t, s.named, "named")
	// In the work dead-letter queue, and in the named queue's: a token SQS
	// moved there (no reason), which the sweep sends back, and one a
	// worker rejected, which stays.
	rejected, rejectedCancel := context.WithTimeout(t.Context(), awstest.Scale(10*time.Second))
	defer rejectedCancel()
	for _, dlq := range []string{s.queues.WorkDLQ, s.namedDLQ} {
		s.send(t, dlq, `{"v":1,"id":"dead"}`)
		if _, err := s.sqs.SendMessage(rejected, &sqs.SendMessageInput{QueueUrl: aws.String(dlq), MessageBody: aws.String(`not json`),
			MessageAttributes: map[string]sqstypes.MessageAttributeValue{"leasehold-reason": {DataType: aws.String("String"), StringValue: aws.String("not JSON")}}}); err != nil {
			t.Fatal(err)
		}
	}
	// The sweep an hour and a bit later dispatches the delayed task.
	clock.Advance(time.Hour + 5*time.Minute)
	invoke(map[string]any{"source": "aws.events", "detail-type": "Scheduled Event", "detail": map[string]any{}})

	// Tokens for both tasks reach the work queue (the sweep may also
	// re-dispatch "now", whose grace has passed on the fake clock).
	got := map[string]bool{}
	deadline := time.Now().Add(awstest.Scale(20 * time.Second))
	for !got["now"] || !got["later"] || !got["dead"] {
		if time.Now().After(deadline) {
			t.Fatalf("tokens for %v, want now, later and the dead letter's", got)
		}
		for _, r := range s.receive(t, s.queues.Work, 1).Records {
			tok, err := token.Decode(r.Body)
			if err != nil {
				t.Fatal(err)
			}
			got[tok.ID] = true
		}
	}

	// The named queue's dead letter went back to it (beside, maybe, the
	// sweep's second token of "named", whose grace has passed too).
	s.receiveTask(t, s.named, "dead")
	for _, dlq := range []string{s.queues.WorkDLQ, s.namedDLQ} {
		if left := s.receive(t, dlq, 1).Records; len(left) != 1 || left[0].Body != "not json" {
			t.Fatalf("dead-letter queue %s after the sweep: %+v, want only the rejected message", dlq, left)
		}
	}

	rec.check(t, iam.Dispatch)
	noSecret(t, "dispatch logs", logs.String())
	lines(t, logs.String())
}

// TestEnforce checks the run-time half without a stack: a granted action
// goes through, any other fails before anything is sent.
func TestEnforce(t *testing.T) {
	t.Parallel()
	errSent := fmt.Errorf("reached the transport")
	cfg := aws.Config{Region: "us-east-1", Credentials: aws.AnonymousCredentials{}}
	cfg.APIOptions = append(cfg.APIOptions, iam.Enforce([]iam.Grant{{Action: "sqs:SendMessage", Resource: iam.WorkQueue}}))
	cfg.HTTPClient = transportFunc(func() error { return errSent })
	q := sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.RetryMaxAttempts = 1 })
	ddb := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 })
	ctx := t.Context()
	url := aws.String("https://sqs.us-east-1.amazonaws.com/1/q")

	if _, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: url, MessageBody: aws.String("x")}); !errors.Is(err, errSent) {
		t.Errorf("granted SendMessage: %v, want it to reach the transport", err)
	}
	// SendMessageBatch is authorized as sqs:SendMessage.
	if _, err := q.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: url, Entries: []sqstypes.SendMessageBatchRequestEntry{{Id: aws.String("1"), MessageBody: aws.String("x")}}}); !errors.Is(err, errSent) {
		t.Errorf("granted SendMessageBatch: %v, want it to reach the transport", err)
	}
	_, err := q.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: url, ReceiptHandle: aws.String("r")})
	if !errors.Is(err, iam.ErrNotGranted) || !strings.Contains(err.Error(), "sqs:DeleteMessage") {
		t.Errorf("DeleteMessage: %v, want ErrNotGranted naming sqs:DeleteMessage", err)
	}
	_, err = ddb.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("t"), Key: map[string]ddbtypes.AttributeValue{"id": &ddbtypes.AttributeValueMemberS{Value: "x"}}})
	if !errors.Is(err, iam.ErrNotGranted) || !strings.Contains(err.Error(), "dynamodb:GetItem") {
		t.Errorf("GetItem: %v, want ErrNotGranted naming dynamodb:GetItem", err)
	}
}

// transportFunc is an HTTP client that sends nothing.
type transportFunc func() error

func (f transportFunc) Do(*http.Request) (*http.Response, error) { return nil, f() }
