package leasehold

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/leasehold/leasehold/internal/awsenv"
	"github.com/leasehold/leasehold/internal/defaults"
	"github.com/leasehold/leasehold/settings"
)

// lookupTimeout bounds each call NewWorkerFromEnv makes to find the DLQ: a
// start-up call, like a client's.
const lookupTimeout = defaults.ClientCallTimeout

// NewWorkerFromEnv builds a worker from cfg and the environment: every
// field of cfg left zero is filled from its LEASEHOLD_* variable (package
// settings lists them; docs/worker.md shows the table), so what code sets
// wins over the environment. LEASEHOLD_LOG_LEVEL (DEBUG, INFO, WARN or
// ERROR) sets a JSON logger on stderr at that level. A bad value is an
// error wrapping ErrConfig that names the variable. cfg.AWS and
// cfg.Handlers come from the caller.
//
// The work dead-letter queue is LEASEHOLD_WORK_DLQ_URL; without it, the
// queue named LEASEHOLD_WORK_DLQ_NAME; without that, the dead-letter target
// of the work queue's redrive policy. These lookups need sqs:GetQueueUrl
// (and sqs:GetQueueAttributes for the redrive policy); the deployed
// function sets the URL and makes none. When no DLQ is found the worker
// logs a warning at start-up: messages that name no task are then left to
// the queue's redrive policy.
//
// When it looks a queue up, it first retrieves cfg.AWS's credentials; with
// none it fails with a *CredentialsError (wrapping ErrConfig) whose one
// line says what to set.
//
// Like NewWorker, it calls through a copy of cfg.AWS whose HTTPClient is
// behind GuardHTTP.
func NewWorkerFromEnv(ctx context.Context, cfg WorkerConfig) (*Worker, error) {
	cfg.AWS.HTTPClient = awsenv.GuardHTTP(cfg.AWS.HTTPClient) // cfg is a copy
	if err := fromEnv(&cfg, os.Getenv); err != nil {
		return nil, err
	}
	var dlqProblem string
	if cfg.DeadLetterQueueURL == "" && cfg.QueueURL != "" {
		// The lookup is the first AWS call: without credentials it would
		// fail with the SDK's whole provider chain.
		if err := awsenv.CheckCredentials(ctx, cfg.AWS, "", lookupTimeout); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		cfg.DeadLetterQueueURL, dlqProblem = findDeadLetterQueue(ctx, sqs.NewFromConfig(cfg.AWS), cfg.QueueURL, os.Getenv(settings.EnvWorkDLQName))
	}
	w, err := NewWorker(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.DeadLetterQueueURL == "" {
		w.log.Warn("no work dead-letter queue: messages that name no task are left to the work queue's redrive policy; set "+settings.EnvWorkDLQURL+" or "+settings.EnvWorkDLQName,
			"work_queue", cfg.QueueURL, "reason", dlqProblem)
	}
	return w, nil
}

// queueLookup is the part of the SQS client findDeadLetterQueue uses.
type queueLookup interface {
	GetQueueUrl(context.Context, *sqs.GetQueueUrlInput, ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	Options() sqs.Options
}

// findDeadLetterQueue returns the URL of the queue named name or, with no
// name, of the work queue's redrive target; or "" and why not. A queue that
// does not exist is a MissingResourceError, naming the region and endpoint
// of q.
func findDeadLetterQueue(ctx context.Context, q queueLookup, workURL, name string) (string, string) {
	// missing says that queue does not exist, and where it was looked for.
	missing := func(queue string, err error) string {
		o := q.Options()
		return (&MissingResourceError{Service: "SQS", Resource: queue, Region: o.Region, Endpoint: endpointOf(o.BaseEndpoint, "sqs", o.Region), Err: err}).Error()
	}
	notExist := func(err error) bool { return errors.As(err, new(*sqstypes.QueueDoesNotExist)) }
	if name == "" {
		cctx, cancel := context.WithTimeout(ctx, lookupTimeout)
		out, err := q.GetQueueAttributes(cctx, &sqs.GetQueueAttributesInput{
			QueueUrl:       aws.String(workURL),
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameRedrivePolicy},
		})
		cancel()
		switch {
		case notExist(err):
			return "", "read the work queue's redrive policy: " + missing(workURL, err)
		case err != nil:
			return "", "read the work queue's redrive policy: " + err.Error()
		}
		var rp struct {
			Target string `json:"deadLetterTargetArn"`
		}
		raw := out.Attributes[string(sqstypes.QueueAttributeNameRedrivePolicy)]
		if raw == "" {
			return "", "the work queue has no redrive policy"
		}
		if err := json.Unmarshal([]byte(raw), &rp); err != nil || rp.Target == "" {
			return "", "the work queue's redrive policy names no dead-letter queue"
		}
		// arn:PARTITION:sqs:REGION:ACCOUNT:NAME
		name = rp.Target[strings.LastIndexByte(rp.Target, ':')+1:]
	}
	cctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	out, err := q.GetQueueUrl(cctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
	switch {
	case notExist(err):
		return "", missing(name, err)
	case err != nil:
		return "", "look up queue " + name + ": " + err.Error()
	}
	return aws.ToString(out.QueueUrl), ""
}
