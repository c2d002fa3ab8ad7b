package tracing

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold/internal/token"
)

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6}, TraceFlags: trace.FlagsSampled,
	})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	in := &sqs.SendMessageInput{QueueUrl: aws.String("q"), MessageBody: aws.String(token.Ref("a"))}
	out := SendInput(ctx, in)
	if *in.MessageBody != token.Ref("a") {
		t.Fatalf("SendInput changed its input: %s", *in.MessageBody)
	}
	tok, err := token.Decode(*out.MessageBody)
	if err != nil {
		t.Fatal(err)
	}
	got := trace.SpanContextFromContext(Extract(context.Background(), tok.TraceParent, tok.TraceState))
	if got.TraceID() != sc.TraceID() || got.SpanID() != sc.SpanID() || !got.IsSampled() || !got.IsRemote() {
		t.Errorf("extracted %v, want %v", got, sc)
	}
	if tp, _ := Inject(context.Background()); tp != "" {
		t.Errorf("Inject without a span = %q", tp)
	}
	if SendInput(context.Background(), in) != in {
		t.Error("SendInput without a span copied its input")
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
