package leasehold

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold/internal/tracing"
)

// traceWith makes c trace with tp (ClientConfig.TracerProvider); nothing
// without tp.
func (c *Client) traceWith(tp trace.TracerProvider) {
	if tp == nil {
		return
	}
	c.opts.tracer = tp.Tracer(tracing.ScopeName)
	c.sqs = tracedClientSQS{c.sqs}
}

// tracedClientSQS sends every token with the trace context of the span it
// is sent under: the caller's, or the client's own enqueue or callback
// span.
type tracedClientSQS struct{ clientSQS }

func (t tracedClientSQS) SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	return t.clientSQS.SendMessage(ctx, tracing.SendInput(ctx, in), optFns...)
}

func (t tracedClientSQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	return t.clientSQS.SendMessageBatch(ctx, tracing.BatchInput(ctx, in), optFns...)
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
