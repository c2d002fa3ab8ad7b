// Command worker is the SQS-triggered Lambda function that runs tasks. It
// only wires things: configuration from the environment, the AWS calls the
// function's role allows (internal/iam), metrics on stdout, the task kinds
// of registerKinds, and the leasehold worker's HandleSQS as the Lambda
// handler.
//
// A deployment registers its own kinds in registerKinds (kinds.go), or
// keeps them in a project of its own that `leasehold init` writes
// (docs/deploy.md), whose template nests leasehold's with
// DeployWorker=false. Built as it is, it serves no kinds, so every task it
// receives is offered again later as an unknown kind, without using an
// attempt (docs/worker.md, "Unknown kinds"). The example kinds (examples.Register) are compiled in only with the
// leasehold_demo build tag, for the demo and the Runtime Interface Emulator
// test; see docs/operations.md.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/events"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/awsenv"
	"github.com/leasehold/leasehold/internal/iam"
	"github.com/leasehold/leasehold/internal/lambdalog"
	"github.com/leasehold/leasehold/internal/lambdarun"
	"github.com/leasehold/leasehold/internal/settingstable"
	"github.com/leasehold/leasehold/internal/tracing"
	"github.com/leasehold/leasehold/settings"
)

func main() {
	level := new(slog.LevelVar) // INFO
	log := lambdalog.New(os.Stderr, level)
	if v := os.Getenv(settings.EnvLogLevel); v != "" {
		if err := level.UnmarshalText([]byte(v)); err != nil {
			log.Error("read configuration", "error", err)
			os.Exit(1)
		}
	}
	// From the environment only: Lambda passes the role's credentials and
	// the region there (internal/awsenv says what else is read, and why
	// not LoadDefaultConfig).
	awsCfg, err := awsenv.Load()
	if err != nil {
		log.Error("load AWS configuration", "error", err)
		os.Exit(1)
	}
	// A call the role does not allow fails here, in every environment, with
	// a message naming the list to update.
	awsCfg.APIOptions = append(awsCfg.APIOptions, iam.Enforce(iam.Worker.Calls))
	handlers := leasehold.NewHandlers()
	registerKinds(handlers)
	if len(handlers.Kinds()) == 0 {
		log.Warn("this worker serves no task kinds: register yours in functions/worker/kinds.go (docs/operations.md)")
	}
	// Every other setting from its LEASEHOLD_* variable; the function is
	// given the dead-letter queue's URL, so nothing is looked up.
	cfg := leasehold.WorkerConfig{AWS: awsCfg, Handlers: handlers, Logger: log, Metrics: os.Stdout}
	if err := settingstable.Load(&cfg, settingstable.Worker, os.Getenv); err != nil {
		log.Error("read configuration", "error", err)
		os.Exit(1)
	}
	var flush func(context.Context)
	switch {
	case setupTracing != nil:
		if flush, err = setupTracing(context.Background(), &cfg); err != nil {
			log.Error("configure tracing", "error", err)
			os.Exit(1)
		}
	case tracing.Asked(os.Getenv):
		log.Warn("OTEL_* asks for tracing, but this bootstrap was built without it: build it with the leasehold_otel tag (docs/observability.md)")
	}
	w, err := leasehold.NewWorker(cfg)
	if err != nil {
		log.Error("configure worker", "error", err)
		os.Exit(1)
	}
	// SIGTERM enabled (internal/lambdarun): when Lambda shuts the
	// environment down, spans still buffered are flushed and the process
	// exits 0 before the SIGKILL.
	if flush == nil {
		lambdarun.Start(w.HandleSQS, log, nil)
		return
	}
	// Lambda freezes the process between invocations: spans are exported
	// before each one returns.
	lambdarun.Start(func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		resp, err := w.HandleSQS(ctx, ev)
		flush(ctx)
		return resp, err
	}, log, flush)
}

// setupTracing, set by the leasehold_otel build (otel.go), configures
// cfg's tracing from the OTEL_* environment and returns the flush to run
// after each invocation (nil when the environment asks for no tracing).
var setupTracing func(ctx context.Context, cfg *leasehold.WorkerConfig) (flush func(context.Context), err error)
