// Command hello is the smallest aws-lambda-go function that answers an SQS
// event: the baseline of BenchmarkColdStart.
package main

import (
	"context"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
)

func main() {
	lambda.Start(func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
		return events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}, nil
	})
}
