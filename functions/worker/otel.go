//go:build leasehold_otel

package main

import (
	"context"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/otelenv"
)

// Built with the leasehold_otel tag, the worker traces when the OTEL_*
// environment asks for it (otelenv.FromEnv), exporting with OTLP over HTTP
// (say, to the ADOT collector's Lambda layer on localhost:4318), and
// flushes its spans before each invocation returns.
func init() {
	setupTracing = func(ctx context.Context, cfg *leasehold.WorkerConfig) (func(context.Context), error) {
		tp, err := otelenv.FromEnv(ctx)
		if err != nil || tp == nil {
			return nil, err
		}
		otelenv.Worker(cfg, tp)
		return func(ctx context.Context) { _ = tp.ForceFlush(ctx) }, nil
	}
}
