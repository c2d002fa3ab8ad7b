package demo

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/leasehold/leasehold/settings"
)

// Resources names the table and queues the demo uses.
type Resources struct {
	Table                                                  string
	WorkQueueURL, WorkDLQURL, IntakeQueueURL, IntakeDLQURL string
}

// Names of the resources `make stack-up` creates (localstack/resources.json).
const (
	defaultTable     = "leasehold-tasks"
	defaultWork      = "leasehold-work"
	defaultWorkDLQ   = "leasehold-work-dlq"
	defaultIntake    = "leasehold-intake"
	defaultIntakeDLQ = "leasehold-intake-dlq"
)

// Environment variables that override the default resources.
const (
	EnvTable          = settings.EnvTable
	EnvWorkQueueURL   = settings.EnvWorkQueueURL
	EnvWorkDLQURL     = settings.EnvWorkDLQURL
	EnvIntakeQueueURL = settings.EnvIntakeQueueURL
	EnvIntakeDLQURL   = settings.EnvIntakeDLQURL
)

// ErrMissing means a table or queue does not exist: the stack is not up.
var ErrMissing = errors.New("resource missing (run `make stack-up`)")

// ResolveResources takes each name from the environment (getenv) or else
// from the stack's defaults, looks the queue URLs up, and checks that the
// table exists.
func ResolveResources(ctx context.Context, cfg aws.Config, getenv func(string) string) (Resources, error) {
	r := Resources{Table: getenv(EnvTable)}
	if r.Table == "" {
		r.Table = defaultTable
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	_, err := dynamodb.NewFromConfig(cfg).DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(r.Table)})
	if rnf := (*ddbtypes.ResourceNotFoundException)(nil); errors.As(err, &rnf) {
		return r, fmt.Errorf("table %s: %w", r.Table, ErrMissing)
	}
	if err != nil {
		return r, fmt.Errorf("describe table %s: %w", r.Table, err)
	}
	q := sqs.NewFromConfig(cfg)
	for _, x := range []struct {
		dst       *string
		env, name string
	}{
		{&r.WorkQueueURL, EnvWorkQueueURL, defaultWork},
		{&r.WorkDLQURL, EnvWorkDLQURL, defaultWorkDLQ},
		{&r.IntakeQueueURL, EnvIntakeQueueURL, defaultIntake},
		{&r.IntakeDLQURL, EnvIntakeDLQURL, defaultIntakeDLQ},
	} {
		if *x.dst = getenv(x.env); *x.dst != "" {
			continue
		}
		out, err := q.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(x.name)})
		if qne := (*sqstypes.QueueDoesNotExist)(nil); errors.As(err, &qne) {
			return r, fmt.Errorf("queue %s: %w", x.name, ErrMissing)
		}
		if err != nil {
			return r, fmt.Errorf("look up queue %s: %w", x.name, err)
		}
		*x.dst = aws.ToString(out.QueueUrl)
	}
	return r, nil
}
