// Command worker is the SQS-triggered Lambda function that runs tasks. It
// only wires things: configuration from the environment, the example
// handlers, and the leasehold worker's HandleSQS as the Lambda handler.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/examples"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	awsCfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Error("load AWS configuration", "error", err)
		os.Exit(1)
	}
	handlers := leasehold.NewHandlers()
	examples.Register(handlers)
	cfg, opts, err := leasehold.WorkerConfigFromEnv(awsCfg, handlers)
	if err != nil {
		log.Error("read configuration", "error", err)
		os.Exit(1)
	}
	w, err := leasehold.NewWorker(cfg, append(opts, leasehold.WithLogger(log))...)
	if err != nil {
		log.Error("configure worker", "error", err)
		os.Exit(1)
	}
	lambda.Start(w.HandleSQS)
}
