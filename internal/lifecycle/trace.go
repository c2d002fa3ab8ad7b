package lifecycle

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold/internal/tracing"
)

// Tracing (Config.Tracer). An execution's spans:
//
//	leasehold.attempt   the message's execution, a consumer span; its
//	                    parent is the trace context of the token (or none:
//	                    a new trace), with a link to the X-Ray header of the
//	                    message, if any
//	  leasehold.claim   the claim, create-and-claim or resume-and-claim write
//	  leasehold.renew   each lease renewal
//	  (the handler's context carries the attempt span)
//	  leasehold.await   the suspension for children or a callback: the
//	                    children's tokens are sent under it
//	  leasehold.finish  the write that ends the attempt (any status)
//
// and, under the handler's span, leasehold.step for each step and
// leasehold.await for each sleep and condition (durable.StepOf, SleepOf, PollOf).
// Every token the execution sends carries the context of the span it is
// sent under, as two entries of the token's metadata (carry); a
// dead-lettered body goes as it came. Without a Tracer none of this runs:
// x.tr stays nil and no call allocates.

// traced is an execution's spans.
type traced struct {
	attempt, await trace.Span
	// claimed: the attempt span names the claimed task, attempt and fence.
	claimed bool
}

// startAttempt starts the attempt span, once the token is decoded, and
// makes it the parent of every later call.
func (x *execution) startAttempt() {
	if x.cfg.Tracer == nil {
		return
	}
	parent := tracing.Extract(x.detached, x.in.tok.Metadata)
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(attribute.String(tracing.AttrMessageID, x.msg.ID))}
	if l, ok := tracing.XRayLink(x.msg.TraceHeader); ok {
		opts = append(opts, trace.WithLinks(l))
	}
	name := "leasehold.attempt"
	if x.in.tok.IsCallback() {
		name = "leasehold.callback"
	}
	ctx, span := x.cfg.Tracer.Start(parent, name, opts...)
	x.detached = ctx
	x.tr = &traced{attempt: span}
}

// carry returns the metadata a token the execution sends now carries: md
// (the task's, for a token that creates a task; nil for a reference) with
// the trace context of the span the execution is in (the attempt's, or
// the await's once it suspends) when the worker traces; a copy: md itself
// is never changed.
func (x *execution) carry(md map[string]string) map[string]string {
	if x.cfg.Tracer == nil {
		return md
	}
	return tracing.Inject(x.detached, md)
}

// claimedSpan records the claimed attempt on the attempt span.
func (x *execution) claimedSpan() {
	if x.tr == nil {
		return
	}
	x.tr.attempt.SetAttributes(attribute.String(tracing.AttrID, x.task.ID), attribute.String(tracing.AttrKind, x.task.Kind),
		attribute.Int(tracing.AttrAttempt, x.task.Attempt), attribute.Int64(tracing.AttrFence, x.task.Fence))
	x.tr.claimed = true
}

// endAttempt ends the execution's spans with what it came to: the task, its
// attempt and fence, the outcome; an error status for an attempt that
// failed or retried, lost its lease, or left its message to come back.
func (x *execution) endAttempt() {
	if x.tr == nil {
		return
	}
	if x.tr.await != nil {
		x.tr.await.End()
	}
	s := x.tr.attempt
	var attrs []attribute.KeyValue
	if !x.tr.claimed {
		id, kind := x.task.ID, x.task.Kind
		if id == "" {
			id, kind = x.log.taskID, x.log.kind
		}
		attrs = append(attrs, attribute.String(tracing.AttrID, id), attribute.String(tracing.AttrKind, kind))
	}
	if x.result.Outcome != "" {
		attrs = append(attrs, attribute.String(tracing.AttrOutcome, string(x.result.Outcome)))
	}
	s.SetAttributes(attrs...)
	switch x.result.Outcome {
	case OutcomeFailed, OutcomeRetried, OutcomeLeaseLost:
		s.SetStatus(codes.Error, x.outcomeReason())
	default:
		if !x.result.Ack {
			s.SetStatus(codes.Error, x.outcomeReason())
		}
	}
	s.End()
}

// outcomeReason words an attempt's failure for its span's status.
func (x *execution) outcomeReason() string {
	if x.result.Reason != "" {
		return x.result.Reason
	}
	if x.running.finished && x.running.handlerResult.err != nil {
		return x.running.handlerResult.err.Error()
	}
	return string(x.result.Outcome)
}

// startSpan starts a span named name under ctx's, with attrs, or does
// nothing (a nil span) without a Tracer.
func (x *execution) startSpan(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if x.cfg.Tracer == nil {
		return ctx, nil
	}
	return x.cfg.Tracer.Start(ctx, name, trace.WithAttributes(attrs...))
}

// awaitSpan starts the span of the suspension for what (children, n of
// them, or a callback): the rest of the execution runs under it.
func (x *execution) awaitSpan(what string, n int) {
	if x.tr == nil {
		return
	}
	attrs := []attribute.KeyValue{attribute.String(tracing.AttrAwait, what)}
	if n > 0 {
		attrs = append(attrs, attribute.Int("leasehold.await.children", n))
	}
	ctx, span := x.cfg.Tracer.Start(x.detached, "leasehold.await", trace.WithAttributes(attrs...))
	x.detached = ctx
	x.tr.await = span
}

// endSpan ends span (when not nil), with an error status for err.
func endSpan(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
