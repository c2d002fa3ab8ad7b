// Package admin is the operator's side of leasehold: what the `leasehold`
// command needs beyond leasehold.Client, for tools of your own that manage
// a stack. It reads as one sentence: build one Admin (New), call its verbs.
//
// An *Admin is built from a Config: the AWS configuration, the tasks
// table's name and, for the verbs on tasks, the client they go through
// (Config.Tasks, a *leasehold.Client). Its verbs look queues up (QueueURL,
// QueueARN) and read or pause them (QueueStats, Pause, Paused), handle
// dead letters (PeekDeadLetters, RedriveDeadLetter), check that the table
// exists (CheckTable), pick and change many tasks at once (Select, Bulk
// with CancelOne or RetryOne, ListFiltered), run the worker with the
// intake dispatcher and fired schedules as one long-lived process (Run:
// `leasehold run`), and manage the EventBridge Scheduler schedules that
// start tasks (ScheduleGroup; a ScheduleSpec is checked by its Parse).
// Every failure that means "the stack is not there" is a
// *leasehold.UnreachableError or a *leasehold.MissingResourceError, as the
// client's are; a bad argument matches leasehold.ErrInvalid, and a
// schedule or a dead letter that is not there leasehold.ErrNotFound.
package admin

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/awsenv"
	"github.com/leasehold/leasehold/internal/claimcheck"
	"github.com/leasehold/leasehold/internal/defaults"
)

// Config says which stack an Admin manages and how it calls AWS.
type Config struct {
	// AWS is the SDK configuration the DynamoDB, SQS and EventBridge
	// Scheduler clients are built from. Its HTTP client is put behind
	// leasehold.GuardHTTP.
	AWS aws.Config
	// Table is the tasks table. Required by CheckTable and by Run's
	// dispatcher.
	Table string
	// Endpoint, when set, sends the DynamoDB, SQS and EventBridge
	// Scheduler calls to this one URL, such as a local stack's
	// http://127.0.0.1:4566.
	Endpoint string
	// CallTimeout bounds each AWS call (default
	// settings.Default().ClientCallTimeout).
	CallTimeout time.Duration
	// Tasks is the client the verbs on tasks go through (Select, Bulk and
	// its actions, ListFiltered): a *leasehold.Client, or a fake in tests.
	// Required by those verbs only.
	Tasks Tasks
	// PayloadBucket is the payload bucket (LEASEHOLD_PAYLOAD_BUCKET), which
	// Histories reads the values that histories refer to from (GetObject
	// only); "" for none: such a history keeps its references unresolved.
	PayloadBucket string
}

// Admin manages one stack. It is safe for concurrent use.
type Admin struct {
	table       string
	callTimeout time.Duration
	awsCfg      aws.Config
	ddb         *dynamodb.Client
	sqs         *sqs.Client
	queues      queueAPI // a.sqs; a fake in tests
	scheduler   *scheduler.Client
	tasks       Tasks
	claims      *claimcheck.Checker // the payload bucket, read-only; nil for none
}

// New builds an Admin. It makes no AWS call.
func New(cfg Config) *Admin {
	a := &Admin{table: cfg.Table, callTimeout: cfg.CallTimeout, tasks: cfg.Tasks}
	if a.callTimeout <= 0 {
		a.callTimeout = defaults.ClientCallTimeout
	}
	cfg.AWS.HTTPClient = awsenv.GuardHTTP(cfg.AWS.HTTPClient) // cfg is a copy
	if cfg.Endpoint != "" {
		cfg.AWS.BaseEndpoint = aws.String(cfg.Endpoint)
	}
	a.awsCfg = cfg.AWS
	a.ddb = dynamodb.NewFromConfig(cfg.AWS)
	a.sqs = sqs.NewFromConfig(cfg.AWS)
	a.queues = a.sqs
	a.scheduler = scheduler.NewFromConfig(cfg.AWS)
	if cfg.PayloadBucket != "" {
		a.claims = &claimcheck.Checker{Blobs: &claimcheck.S3{Client: claimcheck.NewS3Client(cfg.AWS, cfg.Endpoint), Bucket: cfg.PayloadBucket}}
	}
	return a
}

// QueueURL looks the URL of the SQS queue called name up.
func (a *Admin) QueueURL(ctx context.Context, name string) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, a.callTimeout)
	defer cancel()
	out, err := a.queues.GetQueueUrl(cctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
	if err != nil {
		return "", a.queueErr(err, name, "look up queue "+name)
	}
	return aws.ToString(out.QueueUrl), nil
}

// QueueARN reads the ARN of the SQS queue at url: the target of a schedule.
func (a *Admin) QueueARN(ctx context.Context, url string) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, a.callTimeout)
	defer cancel()
	out, err := a.queues.GetQueueAttributes(cctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return "", a.queueErr(err, url, "read the ARN of queue "+url)
	}
	arn := out.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]
	if arn == "" {
		return "", fmt.Errorf("queue %s has no QueueArn attribute", url)
	}
	return arn, nil
}

// queueErr explains err, the failure of an SQS call about queue (its name
// or URL): a queue that does not exist, an endpoint that does not answer,
// or else err after what the call did.
func (a *Admin) queueErr(err error, queue, what string) error {
	if errors.As(err, new(*sqstypes.QueueDoesNotExist)) {
		return a.missing("SQS", queue, err)
	}
	if u := a.unreachable(err); u != nil {
		return u
	}
	return fmt.Errorf("%s: %w", what, err)
}

// CheckTable asks DynamoDB whether the tasks table exists. It returns a
// *leasehold.MissingResourceError when it does not, a
// *leasehold.UnreachableError when DynamoDB does not answer, and the SDK's
// error for any other failure (a role without dynamodb:DescribeTable, say),
// which the table's own calls may not share.
func (a *Admin) CheckTable(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, a.callTimeout)
	defer cancel()
	_, err := a.ddb.DescribeTable(cctx, &dynamodb.DescribeTableInput{TableName: aws.String(a.table)})
	switch {
	case errors.As(err, new(*ddbtypes.ResourceNotFoundException)):
		return a.missing("DynamoDB", a.table, err)
	case err != nil:
		if u := a.unreachable(err); u != nil {
			return u
		}
	}
	return err
}

// missing reports a table or queue that does not exist, naming the region
// and endpoint the call went to: a resource in another region or behind
// another endpoint is the usual cause.
func (a *Admin) missing(service, resource string, err error) error {
	endpoint := aws.ToString(a.awsCfg.BaseEndpoint)
	if endpoint == "" && a.awsCfg.Region != "" {
		endpoint = "https://" + strings.ToLower(service) + "." + a.awsCfg.Region + ".amazonaws.com"
	}
	return &leasehold.MissingResourceError{Service: service, Resource: resource, Region: a.awsCfg.Region, Endpoint: endpoint, Err: err}
}

// unreachable recognises a call that never got an answer, as the client
// does (nil for other errors).
func (a *Admin) unreachable(err error) *leasehold.UnreachableError {
	u, ok := awsenv.ClassifyUnreachable(err, nil, a.callTimeout)
	if !ok {
		return nil
	}
	return &leasehold.UnreachableError{Service: u.Service, Endpoint: u.Endpoint, Reason: u.Reason, Err: err}
}

// matching is err, printed as itself, that also matches kind, the
// client's sentinel for its kind of failure (leasehold.ErrInvalid,
// ErrNotFound, ErrConflict): a caller tests an admin verb's errors with
// the sentinels it tests a task's with.
type matching struct{ err, kind error }

func (e matching) Error() string   { return e.err.Error() }
func (e matching) Unwrap() []error { return []error{e.err, e.kind} }
