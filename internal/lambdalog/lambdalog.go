// Package lambdalog is how the Lambda functions log: JSON lines, with the
// request id of the invocation.
package lambdalog

import (
	"context"
	"io"
	"log/slog"

	"github.com/aws/aws-lambda-go/lambdacontext"
)

// RequestIDKey is the attribute that carries the Lambda request id.
const RequestIDKey = "request_id"

// New returns the worker's logger: JSON lines on w (in Lambda, stderr) at
// level. Its lines about a batch carry the request id because the worker
// adds it (Worker.HandleSQS), not through the context.
func New(w io.Writer, level slog.Leveler) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level}))
}

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
