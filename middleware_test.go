package leasehold

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/jonboulle/clockwork"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/leasemem"
)

// Middleware runs around every handler run, the first outermost, sees the
// run's kind, id, attempt, fence, payload and metadata and the handler's
// result, and what it returns is the run's: a Fail it returns fails the
// task without a retry; one that skips the handler skips it; a result it
// replaces is the one recorded.
func TestMiddlewareWrapsEveryRunInOrder(t *testing.T) {
	t.Parallel()
	clock := clockwork.NewFakeClockAt(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	store := leasemem.New(lease.Options{Clock: clock, LeaseDuration: 30 * time.Second})
	var (
		mu    sync.Mutex
		trace []string
		runs  []HandlerRun
	)
	note := func(s string) { mu.Lock(); trace = append(trace, s); mu.Unlock() }
	hs := NewHandlers()
	Handle(hs, "echo", func(_ context.Context, task *Task[string]) (string, error) {
		note("handler " + task.Payload)
		return strings.ToUpper(task.Payload), nil
	})
	outer := func(ctx context.Context, r HandlerRun, next func(context.Context) ([]byte, error)) ([]byte, error) {
		mu.Lock()
		runs = append(runs, r)
		mu.Unlock()
		note("outer in")
		if r.ID == "denied" {
			return nil, Fail(errors.New("not allowed"))
		}
		out, err := next(ctx)
		note("outer out " + string(out))
		return out, err
	}
	inner := func(ctx context.Context, r HandlerRun, next func(context.Context) ([]byte, error)) ([]byte, error) {
		note("inner in " + string(r.Payload) + " tenant=" + r.Metadata["tenant"])
		out, err := next(ctx)
		note("inner out")
		if r.Metadata["wrap"] == "yes" {
			return []byte(`{"wrapped":` + string(out) + `}`), err
		}
		return out, err
	}
	w, err := newWorker(store, &recordingSQS{}, WorkerConfig{QueueURL: "https://sqs.example/work", Handlers: hs,
		Clock: clock, Logger: slog.New(slog.DiscardHandler), Owner: "test", LeaseDuration: 30 * time.Second,
		Middleware: []Middleware{outer, inner}})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"ok", "denied"} {
		body, _ := json.Marshal(map[string]any{"v": 1, "kind": "echo", "id": id, "payload": "hi",
			"md": map[string]string{"tenant": "acme", "wrap": "yes"}})
		ev := events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m-" + id, ReceiptHandle: "r", Body: string(body),
			Attributes: map[string]string{"ApproximateReceiveCount": "1"}}}}
		if _, err := w.HandleSQS(t.Context(), ev); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"outer in", `inner in "hi" tenant=acme`, "handler hi", "inner out", `outer out {"wrapped":"HI"}`, "outer in"}
	if strings.Join(trace, "|") != strings.Join(want, "|") {
		t.Errorf("trace %q, want %q", trace, want)
	}
	if len(runs) != 2 || runs[0].Kind != "echo" || runs[0].ID != "ok" || runs[0].Attempt != 1 || runs[0].Fence != 1 ||
		!runs[0].LeaseUntil.Equal(clock.Now().Add(30*time.Second)) || runs[0].MaxAttempts == 0 ||
		string(runs[0].Payload) != `"hi"` || runs[0].Metadata["tenant"] != "acme" {
		t.Errorf("runs %+v", runs)
	}
	if got, _ := store.Get(t.Context(), "ok"); got.Status != lease.StatusSucceeded || string(got.Result) != `{"wrapped":"HI"}` {
		t.Errorf("ok: %s %s", got.Status, got.Result)
	}
	if got, _ := store.Get(t.Context(), "denied"); got.Status != lease.StatusFailed || got.Attempt != 1 || !strings.Contains(got.Error, "not allowed") {
		t.Errorf("denied: %s attempt %d %q; want FAILED at once by the middleware", got.Status, got.Attempt, got.Error)
	}
}
