package cli

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold/internal/cli/rules"
	"github.com/leasehold/leasehold/otelenv"
)

// tracer returns the tracer provider the OTEL_* environment asks for
// (otelenv.FromEnv), built once, or nil when it asks for none: the
// client's enqueues and callbacks, and `leasehold run`'s worker, are then
// traced, and the tokens they send carry the trace context.
func (a *app) tracer(ctx context.Context) (trace.TracerProvider, error) {
	if a.tp != nil {
		return a.tp, nil
	}
	if !rules.TracingAsked(a.io.Getenv) {
		return nil, nil
	}
	tp, err := otelenv.FromEnv(ctx)
	if err != nil {
		return nil, usageErrorf("%v", err)
	}
	if tp == nil {
		return nil, nil
	}
	a.tp = tp
	return tp, nil
}

// stopTracing exports the spans still buffered, for at most 5 seconds.
func (a *app) stopTracing() {
	if a.tp == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.tp.Shutdown(ctx); err != nil {
		fmt.Fprintln(a.io.Err, "leasehold: exporting traces:", err)
	}
}
