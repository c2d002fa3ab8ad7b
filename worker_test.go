package leasehold

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/jonboulle/clockwork"

	"github.com/leasehold/leasehold/internal/durable"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/leasemem"
	"github.com/leasehold/leasehold/internal/wiring"
	"github.com/leasehold/leasehold/settings"
)

// recordingSQS stands in for the SQS calls the worker makes.
type recordingSQS struct {
	mu   sync.Mutex
	sent []sqs.SendMessageInput
}

func (r *recordingSQS) ChangeMessageVisibility(context.Context, *sqs.ChangeMessageVisibilityInput, ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	return &sqs.ChangeMessageVisibilityOutput{}, nil
}

func (r *recordingSQS) ChangeMessageVisibilityBatch(_ context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	out := &sqs.ChangeMessageVisibilityBatchOutput{}
	for _, e := range in.Entries {
		out.Successful = append(out.Successful, sqstypes.ChangeMessageVisibilityBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

func (r *recordingSQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		if _, err := r.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: in.QueueUrl, MessageBody: e.MessageBody}); err != nil {
			return nil, err
		}
		out.Successful = append(out.Successful, sqstypes.SendMessageBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

func (r *recordingSQS) DeleteMessage(context.Context, *sqs.DeleteMessageInput, ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	return &sqs.DeleteMessageOutput{}, nil
}

func (r *recordingSQS) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sent = append(r.sent, *in)
	return &sqs.SendMessageOutput{MessageId: aws.String("m")}, nil
}

type upper struct {
	Text string `json:"text"`
}

func TestHandleSQSDecodesCapturedEvent(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("testdata/sqs-batch.json")
	if err != nil {
		t.Fatal(err)
	}
	var ev events.SQSEvent
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	clock := clockwork.NewFakeClockAt(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	store := leasemem.New(lease.Options{Clock: clock})
	q := &recordingSQS{}
	hs := NewHandlers()
	Handle(hs, "upper", func(_ context.Context, task *Task[upper]) (string, error) {
		return strings.ToUpper(task.Payload.Text), nil
	})
	w, err := newWorker(store, q, WorkerConfig{QueueURL: "https://sqs.example/work", DeadLetterQueueURL: "https://sqs.example/dlq", Handlers: hs,
		Clock: clock, Logger: slog.New(slog.DiscardHandler), Owner: "test"})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := w.HandleSQS(t.Context(), ev)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("HandleSQS = %+v, %v; want no failures", resp, err)
	}
	for id, want := range map[string]string{ev.Records[0].MessageId: `"HELLO"`, "client-chosen-id": `"WORLD"`} {
		task, err := store.Get(t.Context(), id)
		if err != nil || task.Status != lease.StatusSucceeded || string(task.Result) != want {
			t.Errorf("task %s: %+v, %v; want result %s", id, task, err, want)
		}
	}
	if got, _ := store.Get(t.Context(), "client-chosen-id"); got.MaxAttempts != 2 {
		t.Errorf("max attempts %d, want 2 from the token", got.MaxAttempts)
	}
	if len(q.sent) != 1 || aws.ToString(q.sent[0].QueueUrl) != "https://sqs.example/dlq" {
		t.Fatalf("dead-lettered %+v, want the malformed message", q.sent)
	}
}

func TestNewWorkerRejectsImpossibleSettings(t *testing.T) {
	t.Parallel()
	with := func(f func(*WorkerConfig)) WorkerConfig {
		c := WorkerConfig{Table: "t", QueueURL: "https://sqs.example/work", Handlers: NewHandlers()}
		f(&c)
		return c
	}
	cases := []struct {
		name string
		cfg  WorkerConfig
		want string
	}{
		{"lease below twice the renewal", with(func(c *WorkerConfig) { c.LeaseDuration, c.RenewBefore = 15*time.Second, 10*time.Second }), "at least twice"},
		{"negative attempts", with(func(c *WorkerConfig) { c.MaxAttempts = -1 }), "max attempts"},
		{"attempts over the limit", with(func(c *WorkerConfig) { c.MaxAttempts = 101 }), "max attempts"},
		{"negative concurrency", with(func(c *WorkerConfig) { c.Concurrency = -1 }), "concurrency"},
		{"negative skew", with(func(c *WorkerConfig) { c.ClockSkew = -time.Second }), "skew"},
		{"negative replace-at receive count", with(func(c *WorkerConfig) { c.ReplaceAtReceiveCount = -1 }), "receive count"},
		{"no table", WorkerConfig{QueueURL: "q", Handlers: NewHandlers()}, "table"},
		{"no queue", WorkerConfig{Table: "t", Handlers: NewHandlers()}, "queue"},
		{"no handlers", WorkerConfig{Table: "t", QueueURL: "q"}, "handlers"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := NewWorker(c.cfg)
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("NewWorker = %v, want ErrConfig mentioning %q", err, c.want)
			}
		})
	}
}

func TestWorkerConfigFromEnvReadsReplaceAtReceiveCount(t *testing.T) {
	var cfg WorkerConfig
	if err := fromEnv(&cfg, func(k string) string { return map[string]string{settings.EnvReplaceAtReceiveCount: "3"}[k] }); err != nil {
		t.Fatal(err)
	}
	if cfg.ReplaceAtReceiveCount != 3 {
		t.Errorf("replace-at receive count from %s = %d, want 3", settings.EnvReplaceAtReceiveCount, cfg.ReplaceAtReceiveCount)
	}
}

func TestWorkerConfigFromEnvRejectsBadValues(t *testing.T) {
	for env, bad := range map[string]string{settings.EnvLeaseDuration: "twenty", settings.EnvMaxAttempts: "0", settings.EnvListing: "maybe", settings.EnvPollers: "-2"} {
		var cfg WorkerConfig
		if err := fromEnv(&cfg, func(k string) string { return map[string]string{env: bad}[k] }); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), env) {
			t.Errorf("%s=%q: err = %v, want ErrConfig naming it", env, bad, err)
		}
	}
}

func TestHandleRejectsDuplicateKinds(t *testing.T) {
	t.Parallel()
	hs := NewHandlers()
	h := func(context.Context, *Task[upper]) (string, error) { return "", nil }
	Handle(hs, "k", h)
	defer func() {
		if recover() == nil {
			t.Error("registering a kind twice did not panic")
		}
	}()
	Handle(hs, "k", h)
}

func TestSteeringErrors(t *testing.T) {
	t.Parallel()
	hs := NewHandlers()
	Handle(hs, "bad-payload", func(context.Context, *Task[upper]) (string, error) { return "", nil })
	h, _ := wiring.Lookup(hs, "bad-payload")
	_, err := h(t.Context(), lease.Task{Kind: "bad-payload", Payload: []byte(`[1,2]`)})
	if err == nil || !strings.Contains(err.Error(), "does not decode") {
		t.Fatalf("undecodable payload: %v", err)
	}
	var perm *durable.PermanentError
	if !errors.As(err, &perm) {
		t.Errorf("undecodable payload should fail without retry (a permanent error), got %T", err)
	}
}

// An absent payload is JSON null: the zero value of the handler's payload
// type, nil for a pointer type, which tells it apart from an empty object.
func TestAbsentPayloadIsNull(t *testing.T) {
	t.Parallel()
	type p struct{ N int }
	hs := NewHandlers()
	var gotPtr *p
	var gotVal p
	Handle(hs, "ptr", func(_ context.Context, task *Task[*p]) (int, error) { gotPtr = task.Payload; return 0, nil })
	Handle(hs, "val", func(_ context.Context, task *Task[p]) (int, error) { gotVal = task.Payload; return 0, nil })
	run := func(kind string, payload []byte) {
		t.Helper()
		h, ok := wiring.Lookup(hs, kind)
		if !ok {
			t.Fatalf("no handler for %s", kind)
		}
		if _, err := h(t.Context(), lease.Task{ID: "x", Kind: kind, Payload: payload}); err != nil {
			t.Fatalf("%s with payload %q: %v", kind, payload, err)
		}
	}
	run("ptr", nil)
	if gotPtr != nil {
		t.Errorf("absent payload into *p = %+v, want nil", gotPtr)
	}
	run("ptr", []byte(`{}`))
	if gotPtr == nil {
		t.Error("empty object into *p = nil, want a zero p")
	}
	gotVal = p{N: 7}
	run("val", nil)
	if gotVal != (p{}) {
		t.Errorf("absent payload into p = %+v, want the zero value", gotVal)
	}
}
