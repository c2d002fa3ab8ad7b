// Package tracing carries OpenTelemetry trace context through leasehold's
// tasks as ordinary metadata: the W3C traceparent and tracestate of the
// sending span become two entries of a token's or a task's metadata
// (package metadata), and come out of them as the remote parent of the
// attempt the token starts. It also reads the
// X-Ray trace header Lambda puts on SQS records (AWSTraceHeader), which
// becomes a span link.
//
// Nothing here runs unless a tracer is configured: the worker and the
// client call it only then, so a process without tracing pays nothing.
package tracing

import (
	"context"
	"encoding/hex"
	"maps"
	"strings"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold/internal/metadata"
)

// Asked reports whether getenv's OTEL_* variables ask for tracing:
// OTEL_TRACES_EXPORTER set to anything but "none", or an OTLP endpoint
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT),
// and OTEL_SDK_DISABLED not "true". Here rather than in otelenv, so that a
// binary that does not link the SDK (the Lambda worker's default build)
// can tell that it was asked.
func Asked(getenv func(string) string) bool {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	if e := getenv("OTEL_TRACES_EXPORTER"); e != "" {
		return e != "none"
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// ScopeName is the instrumentation scope of leasehold's spans.
const ScopeName = "github.com/leasehold/leasehold"

// Attribute keys of leasehold's spans.
const (
	AttrKind      = "leasehold.task.kind"
	AttrID        = "leasehold.task.id"
	AttrAttempt   = "leasehold.task.attempt"
	AttrFence     = "leasehold.task.fence"
	AttrOutcome   = "leasehold.outcome"
	AttrStatus    = "leasehold.task.status"
	AttrStep      = "leasehold.step"
	AttrAwait     = "leasehold.await"
	AttrMessageID = "messaging.message.id"
)

var w3c = propagation.TraceContext{}

// carrier is a TextMapCarrier over a task's metadata: Extract reads the
// caller's map; Inject writes into its own copy of it.
type carrier struct{ md map[string]string }

func (c *carrier) Get(key string) string { return c.md[key] }

func (c *carrier) Set(key, value string) { c.md[key] = value }

func (c *carrier) Keys() []string { return []string{metadata.TraceParent, metadata.TraceState} }

// Inject returns md with the W3C trace context of ctx's span as its
// "traceparent" and "tracestate" entries (a copy when that changes it), or
// md as it is when ctx has no valid span context.
func Inject(ctx context.Context, md map[string]string) map[string]string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return md
	}
	c := carrier{md: make(map[string]string, len(md)+2)} // one copy: the caller's map is never written
	maps.Copy(c.md, md)
	w3c.Inject(ctx, &c)
	return c.md
}

// Extract returns ctx with the span context of md's trace context entries
// as its remote parent; ctx as it is when md has none or they do not
// parse.
func Extract(ctx context.Context, md map[string]string) context.Context {
	if md[metadata.TraceParent] == "" {
		return ctx
	}
	return w3c.Extract(ctx, &carrier{md: md})
}

// XRayHeader is the SQS system attribute with the X-Ray trace header of
// the sender (Lambda's records carry it when the sender was traced by
// X-Ray).
const XRayHeader = "AWSTraceHeader"

// XRayLink parses an X-Ray trace header ("Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1")
// into a span context for a link: the root's two hex parts make the
// trace id, Parent the span id. ok is false when the header has no valid
// root and parent.
func XRayLink(header string) (trace.Link, bool) {
	var root, parent string
	sampled := false
	for part := range strings.SplitSeq(header, ";") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "Root":
			root = v
		case "Parent":
			parent = v
		case "Sampled":
			sampled = v == "1"
		}
	}
	// Root=1-{8 hex digits of epoch}-{24 hex digits}.
	ver, rest, ok := strings.Cut(root, "-")
	epoch, unique, ok2 := strings.Cut(rest, "-")
	if !ok || !ok2 || ver != "1" || len(epoch) != 8 || len(unique) != 24 || len(parent) != 16 {
		return trace.Link{}, false
	}
	var tid trace.TraceID
	var sid trace.SpanID
	if _, err := hex.Decode(tid[:], []byte(epoch+unique)); err != nil {
		return trace.Link{}, false
	}
	if _, err := hex.Decode(sid[:], []byte(parent)); err != nil {
		return trace.Link{}, false
	}
	cfg := trace.SpanContextConfig{TraceID: tid, SpanID: sid, Remote: true}
	if sampled {
		cfg.TraceFlags = trace.FlagsSampled
	}
	sc := trace.NewSpanContext(cfg)
	if !sc.IsValid() {
		return trace.Link{}, false
	}
	return trace.Link{SpanContext: sc}, true
}
