package lifecycle_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/leasemem"
	"github.com/leasehold/leasehold/internal/lifecycle"
	"github.com/leasehold/leasehold/internal/token"
)

// expiringStore is an in-memory store whose tasks expire as soon as they
// finish, as if their retention had passed.
type expiringStore struct{ *leasemem.Store }

func (s expiringStore) Finish(ctx context.Context, l lease.Lease, result []byte) (lease.Task, error) {
	t, err := s.Store.Finish(ctx, l, result)
	if err == nil && !s.Expire(l.TaskID) {
		return t, fmt.Errorf("finished task %s did not expire", l.TaskID)
	}
	return t, err
}

// BenchmarkProcessInline measures the worker's own cost per task (decode,
// create-and-claim, handler goroutine, renewer armed and stopped, finish)
// with the in-memory store, so AWS latency is left out. A worker keeps no
// task in its heap (tasks live in DynamoDB), so here a task leaves the store
// when it finishes (Expire, counted in the time): a fake that kept every
// task of the run would make the garbage collector's work per task, and so
// the time, grow with the run. BenchmarkProcessInlineStoreKeepsAll measures
// that case.
func BenchmarkProcessInline(b *testing.B) {
	clock := clockwork.NewRealClock()
	benchProcessInline(b, expiringStore{leasemem.New(lease.Options{Clock: clock})}, clock)
}

// BenchmarkProcessInlineStoreKeepsAll is BenchmarkProcessInline with one
// in-memory store that keeps every task of the run.
func BenchmarkProcessInlineStoreKeepsAll(b *testing.B) {
	clock := clockwork.NewRealClock()
	benchProcessInline(b, leasemem.New(lease.Options{Clock: clock}), clock)
}

func benchProcessInline(b *testing.B, store lease.Store, clock clockwork.Clock) {
	exec, err := lifecycle.New(lifecycle.Config{
		Store: store, SQS: newFakeSQS(), QueueURL: workURL, Owner: "bench", Clock: clock,
		Logger: slog.New(slog.DiscardHandler),
		Handlers: func(string) (lifecycle.Handler, bool) {
			return func(_ context.Context, t lease.Task) ([]byte, error) { return t.Payload, nil }, true
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		body, _ := token.Inline("echo", fmt.Sprintf("t-%d", i), []byte(`{"n":1}`), 0)
		if res := exec.Process(ctx, nil, lifecycle.Message{ID: "m", ReceiptHandle: "r", Body: body}); res.Outcome != lifecycle.OutcomeSucceeded {
			b.Fatalf("result %+v", res)
		}
	}
}

// BenchmarkJSONBaseline is the yardstick BenchmarkProcessInline is read
// against, measured in the same run on the same machine: decoding the same
// inline token with encoding/json and encoding a task record of the same
// fields. Absolute times move with the machine; their ratio (make bench
// prints it in docs/performance.md) much less.
func BenchmarkJSONBaseline(b *testing.B) {
	type inline struct {
		V           int             `json:"v"`
		Kind        string          `json:"kind"`
		ID          string          `json:"id"`
		Payload     json.RawMessage `json:"payload"`
		MaxAttempts int             `json:"max_attempts,omitempty"`
	}
	type record struct {
		ID, Kind, Status, Owner string
		Payload, Result         json.RawMessage
		Attempt, MaxAttempts    int
		Fence                   int64
		LeaseUntil, CreatedAt   time.Time
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		body, _ := token.Inline("echo", fmt.Sprintf("t-%d", i), []byte(`{"n":1}`), 0)
		var tok inline
		if err := json.Unmarshal([]byte(body), &tok); err != nil {
			b.Fatal(err)
		}
		now := time.Now()
		if _, err := json.Marshal(record{ID: tok.ID, Kind: tok.Kind, Status: "SUCCEEDED", Owner: "bench", Payload: tok.Payload, Result: tok.Payload,
			Attempt: 1, MaxAttempts: 5, Fence: 1, LeaseUntil: now, CreatedAt: now}); err != nil {
			b.Fatal(err)
		}
	}
}
