package eventsource_test

import (
	"context"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/leasehold/leasehold/internal/eventsource"
)

// handle is an ordinary Lambda SQS handler: under Lambda it would be passed
// to lambda.Start.
func handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	var resp events.SQSEventResponse
	for _, m := range ev.Records {
		if err := process(ctx, m); err != nil {
			resp.BatchItemFailures = append(resp.BatchItemFailures,
				events.SQSBatchItemFailure{ItemIdentifier: m.MessageId})
		}
	}
	return resp, nil
}

func process(context.Context, events.SQSMessage) error { return nil }

// Run a Lambda handler as a long-lived process. The example is compiled but
// not run: it needs a queue.
func Example() {
	// SIGTERM (ECS stopping the task) or Ctrl-C starts a graceful stop.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	context.AfterFunc(ctx, stop) // after the first signal, a second one kills the process

	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	runner, err := eventsource.New(sqs.NewFromConfig(cfg), eventsource.Config{
		QueueURL:          os.Getenv("QUEUE_URL"),
		BatchSize:         10,
		BatchWindow:       time.Second,
		Pollers:           4,
		InvocationTimeout: 5 * time.Minute,
	}, handle)
	if err != nil {
		log.Fatal(err)
	}
	if err := runner.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
