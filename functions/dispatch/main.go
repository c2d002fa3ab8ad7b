// Command dispatch is the producer-side Lambda function. It only wires
// things: configuration from the environment, the DynamoDB lease store, the
// SQS client, and the dispatcher's Handle as the Lambda handler, which
// routes intake-queue batches to the intake and EventBridge scheduled events
// to the sweep.
package main

import (
	"log/slog"
	"os"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/leasehold/leasehold/internal/awsenv"
	"github.com/leasehold/leasehold/internal/dispatch"
	"github.com/leasehold/leasehold/internal/iam"
	"github.com/leasehold/leasehold/internal/lambdalog"
	"github.com/leasehold/leasehold/internal/lambdarun"
	"github.com/leasehold/leasehold/internal/lease/dynamo"
)

func main() {
	// JSON lines on stderr, at INFO unless LEASEHOLD_LOG_LEVEL says
	// otherwise. Records logged with an invocation's context carry its
	// request id.
	log := slog.New(lambdalog.Handler(slog.NewJSONHandler(os.Stderr, nil)))
	s, err := dispatch.SettingsFromEnv()
	if err != nil {
		log.Error("read configuration", "error", err)
		os.Exit(1)
	}
	if s.Logger != nil {
		log = slog.New(lambdalog.Handler(s.Logger.Handler()))
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
	// a message naming the list to update (internal/iam).
	awsCfg.APIOptions = append(awsCfg.APIOptions, iam.Enforce(iam.Dispatch.Calls))
	store := dynamo.New(dynamodb.NewFromConfig(awsCfg), s.Table, s.StoreOptions())
	d, err := dispatch.New(s.Config(store, sqs.NewFromConfig(awsCfg), log))
	if err != nil {
		log.Error("configure dispatcher", "error", err)
		os.Exit(1)
	}
	// SIGTERM enabled (internal/lambdarun): a shutdown logs and exits 0
	// before the SIGKILL.
	lambdarun.Start(d.Handle, log, nil)
}
