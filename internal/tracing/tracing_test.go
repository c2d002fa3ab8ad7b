package tracing

import (
	"context"
	"maps"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold/internal/metadata"
)

// The trace context goes into metadata as two ordinary entries and comes
// back out of it; the caller's map is never written.
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6}, TraceFlags: trace.FlagsSampled,
	})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	mine := map[string]string{"tenant": "acme"}
	md := Inject(ctx, mine)
	if len(mine) != 1 {
		t.Fatalf("Inject changed its input: %v", mine)
	}
	if md["tenant"] != "acme" || md[metadata.TraceParent] == "" {
		t.Fatalf("Inject = %v", md)
	}
	got := trace.SpanContextFromContext(Extract(context.Background(), md))
	if got.TraceID() != sc.TraceID() || got.SpanID() != sc.SpanID() || !got.IsSampled() || !got.IsRemote() {
		t.Errorf("extracted %v, want %v", got, sc)
	}
	if md := Inject(context.Background(), mine); !maps.Equal(md, mine) {
		t.Errorf("Inject without a span = %v", md)
	}
	if md := Inject(context.Background(), nil); md != nil {
		t.Errorf("Inject without a span into nil = %v", md)
	}
	if ctx := Extract(context.Background(), mine); trace.SpanContextFromContext(ctx).IsValid() {
		t.Error("Extract without a traceparent made a span context")
	}
}

func TestXRayLink(t *testing.T) {
	t.Parallel()
	l, ok := XRayLink("Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1")
	if !ok {
		t.Fatal("no link")
	}
	if got := l.SpanContext.TraceID().String(); got != "5759e988bd862e3fe1be46a994272793" {
		t.Errorf("trace id %s", got)
	}
	if got := l.SpanContext.SpanID().String(); got != "53995c3f42cd8ad8" || !l.SpanContext.IsSampled() {
		t.Errorf("span id %s, sampled %v", got, l.SpanContext.IsSampled())
	}
	for _, bad := range []string{"", "Root=1-5759e988-bd862e3fe1be46a994272793", "Root=2-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8",
		"Root=1-5759e98g-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8", "Root=1-00000000-000000000000000000000000;Parent=0000000000000000"} {
		if _, ok := XRayLink(bad); ok {
			t.Errorf("XRayLink(%q) is ok", bad)
		}
	}
}
