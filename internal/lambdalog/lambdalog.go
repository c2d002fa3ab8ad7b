// Package lambdalog adds the Lambda request id to structured log records.
package lambdalog

import (
	"context"
	"log/slog"

	"github.com/aws/aws-lambda-go/lambdacontext"
)

// RequestIDKey is the attribute that carries the Lambda request id.
const RequestIDKey = "request_id"

// Handler wraps h so that every record logged with a context from a Lambda
// invocation (the *Context logging methods) carries its request id.
func Handler(h slog.Handler) slog.Handler { return handler{h} }

type handler struct{ slog.Handler }

func (h handler) Handle(ctx context.Context, r slog.Record) error {
	if lc, ok := lambdacontext.FromContext(ctx); ok && lc.AwsRequestID != "" {
		r = r.Clone()
		r.AddAttrs(slog.String(RequestIDKey, lc.AwsRequestID))
	}
	return h.Handler.Handle(ctx, r)
}

func (h handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return handler{h.Handler.WithAttrs(attrs)}
}

func (h handler) WithGroup(name string) slog.Handler {
	return handler{h.Handler.WithGroup(name)}
}
