package leasehold

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold/internal/tracing"
)

// traceWith makes c trace with tp (ClientConfig.TracerProvider): an
// EnqueueMiddleware outermost, and the callback's span; nothing without tp.
func (c *Client) traceWith(tp trace.TracerProvider) {
	if tp == nil {
		return
	}
	c.opts.tracer = tp.Tracer(tracing.ScopeName)
	c.opts.middleware = append([]EnqueueMiddleware{tracingEnqueue(c.opts.tracer)}, c.opts.middleware...)
}

// tracingEnqueue is the EnqueueMiddleware of a traced client: a producer
// span "leasehold.enqueue" around the call, whose W3C trace context goes
// into every submission's metadata, so that the worker's attempt of each
// task is the span's child.
func tracingEnqueue(tracer trace.Tracer) EnqueueMiddleware {
	return func(ctx context.Context, subs []Submission, next func(context.Context) ([]EnqueueResult, error)) (res []EnqueueResult, err error) {
		ctx, span := tracer.Start(ctx, "leasehold.enqueue", trace.WithSpanKind(trace.SpanKindProducer),
			trace.WithAttributes(attribute.Int("leasehold.enqueue.tasks", len(subs))))
		if len(subs) == 1 {
			span.SetAttributes(attribute.String(tracing.AttrKind, subs[0].Kind))
		}
		defer func() { endClientSpan(span, res, err) }()
		for i := range subs {
			subs[i].Metadata = tracing.Inject(ctx, subs[i].Metadata)
		}
		return next(ctx)
	}
}

// traceRef is the metadata of a reference token the client sends under
// ctx: the trace context of ctx's span when the client traces.
func (c *Client) traceRef(ctx context.Context) map[string]string {
	if c.opts.tracer == nil {
		return nil
	}
	return tracing.Inject(ctx, nil)
}

// endClientSpan ends a client call's span, with an error status when the
// call or any of its tasks failed, and the task's id when there is one.
func endClientSpan(span trace.Span, res []EnqueueResult, err error) {
	if len(res) == 1 {
		span.SetAttributes(attribute.String(tracing.AttrID, res[0].ID))
	}
	for _, r := range res {
		if r.Err != nil && err == nil {
			err = r.Err
		}
	}
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
