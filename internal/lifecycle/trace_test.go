package lifecycle_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lifecycle"
	"github.com/leasehold/leasehold/internal/token"
)

// With a Tracer, a long attempt has a span per renewal under its attempt
// span, the handler's context carries the attempt span, and a failed
// attempt's span has an error status; the retry's token carries the
// attempt's trace context.
func TestTracerSpansRenewalsAndFailures(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	e := setup(t, func(c *lifecycle.Config) { c.Tracer = tp.Tracer("test") })
	release := make(chan struct{})
	var inHandler trace.SpanContext
	e.handlers["slow"] = func(ctx context.Context, _ lease.Task) ([]byte, error) {
		inHandler = trace.SpanContextFromContext(ctx)
		<-release
		return nil, errors.New("boom")
	}
	wait := e.processAsync(t.Context(), msg("m1", inline(t, "slow", "long", "", 3)))
	for range 2 {
		if err := e.clock.BlockUntilContext(t.Context(), 1); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(10 * time.Second)
		<-e.sqs.changed
	}
	close(release)
	if res := wait(); res.Outcome != lifecycle.OutcomeRetried {
		t.Fatalf("result %+v", res)
	}
	var attempt sdktrace.ReadOnlySpan
	renewals := 0
	for _, s := range rec.Ended() {
		if s.Name() == "leasehold.attempt" {
			attempt = s
		}
	}
	if attempt == nil {
		t.Fatal("no attempt span")
	}
	for _, s := range rec.Ended() {
		if s.Name() == "leasehold.renew" && s.Parent().SpanID() == attempt.SpanContext().SpanID() {
			renewals++
		}
	}
	if renewals != 2 {
		t.Errorf("%d renewal spans under the attempt, want 2", renewals)
	}
	if attempt.Status().Code != codes.Error {
		t.Errorf("failed attempt's status %+v", attempt.Status())
	}
	if inHandler.SpanID() != attempt.SpanContext().SpanID() {
		t.Errorf("the handler's context carries span %s, want the attempt's %s", inHandler.SpanID(), attempt.SpanContext().SpanID())
	}
	sent := e.sqs.sentTo(workURL)
	if len(sent) == 0 {
		t.Fatal("no retry token sent")
	}
	tok, err := token.Decode(*sent[len(sent)-1].MessageBody)
	traceparent := tok.Metadata["traceparent"]
	if err != nil || traceparent == "" {
		t.Fatalf("retry token %+v, %v: no trace context", tok, err)
	}
	if want := attempt.SpanContext().TraceID().String(); traceparent[3:35] != want {
		t.Errorf("retry token's traceparent %s, want trace %s", traceparent, want)
	}
}
