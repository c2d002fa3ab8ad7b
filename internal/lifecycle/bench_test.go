package lifecycle_test

import (
	"context"
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

// BenchmarkProcessInline measures the worker's own cost per task (decode,
// create-and-claim, handler goroutine, renewer start and join, finish) with
// the in-memory store, so AWS latency is left out.
func BenchmarkProcessInline(b *testing.B) {
	clock := clockwork.NewRealClock()
	store := leasemem.New(lease.Options{Clock: clock})
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
