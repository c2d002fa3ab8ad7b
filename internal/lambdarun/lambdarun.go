// Package lambdarun starts the Lambda functions' handlers so that they stop
// cleanly when Lambda shuts their execution environment down.
//
// By default Lambda stops a runtime with SIGKILL: nothing the process holds
// (buffered spans, a last log line) leaves it. aws-lambda-go's
// WithEnableSIGTERM registers an internal extension, which makes Lambda send
// SIGTERM first and SIGKILL about 500 ms later (AWS documents the 500 ms for
// a function with internal extensions). Start uses it: on SIGTERM the
// function's stop hook runs within StopBudget, a line is logged and the
// process exits 0, before the SIGKILL.
//
// A task's safety does not depend on this: an invocation still running at a
// shutdown (a timeout's reset) loses its lease when the lease runs out, as
// under SIGKILL. The worker releases its running tasks at the invocation's
// deadline minus LEASEHOLD_DEADLINE_MARGIN, before any timeout.
package lambdarun

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
)

// Stopped is the message of the line logged on SIGTERM, once the stop
// hook has returned.
const Stopped = "execution environment shutting down (SIGTERM): stopped"

// StopBudget bounds the stop hook, well inside the 500 ms between SIGTERM
// and SIGKILL.
const StopBudget = 300 * time.Millisecond

// Start serves handler (any handler lambda.Start takes) with SIGTERM
// enabled. On SIGTERM, stop (nil for none) runs with a context that ends
// after StopBudget, then the process logs and exits 0. It does not return.
func Start(handler any, log *slog.Logger, stop func(context.Context)) {
	lambda.StartWithOptions(handler, lambda.WithEnableSIGTERM(func() {
		Stopping(log, stop, os.Exit)
	}))
}

// Stopping is what Start does on SIGTERM, with exit in place of os.Exit.
func Stopping(log *slog.Logger, stop func(context.Context), exit func(int)) {
	start := time.Now()
	if stop != nil {
		ctx, cancel := context.WithTimeout(context.Background(), StopBudget)
		stop(ctx)
		cancel()
	}
	log.Info(Stopped, "stop_ms", time.Since(start).Milliseconds())
	exit(0)
}
