package cli

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/smithy-go/logging"
	"github.com/spf13/cobra"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/admin"
	"github.com/leasehold/leasehold/internal/cli/rules"
	"github.com/leasehold/leasehold/otelenv"
	"github.com/leasehold/leasehold/settings"
)

// Environment variables and defaults of the global configuration.
const (
	EnvTable        = settings.EnvTable        // LEASEHOLD_TABLE
	EnvWorkQueueURL = settings.EnvWorkQueueURL // LEASEHOLD_WORK_QUEUE_URL

	DefaultTable         = "leasehold-tasks"
	DefaultWorkQueueName = "leasehold-work"
	// localRegion is used with an endpoint override when nothing else names
	// a region: local stacks accept any.
	localRegion = "us-east-1"
)

// app is one run of the command: its streams, the global flags and what is
// built from them on first use.
type app struct {
	io   Streams
	args []string // the command line, for error messages

	table       string
	queueURL    string
	region      string
	profile     string
	endpoint    string
	callTimeout time.Duration

	cli *leasehold.Client
	// awsCfg is the AWS configuration cli was built with.
	awsCfg aws.Config
	// tp traces the client and `leasehold run` when the OTEL_* environment
	// asks for it (tracing.go); nil otherwise.
	tp *sdktrace.TracerProvider
}

func newApp(s Streams) *app {
	if s.Getenv == nil {
		s.Getenv = func(string) string { return "" }
	}
	return &app{io: s}
}

func (a *app) env(name, fallback string) string {
	if v := a.io.Getenv(name); v != "" {
		return v
	}
	return fallback
}

func (a *app) addGlobalFlags(root *cobra.Command) {
	f := root.PersistentFlags()
	f.StringVar(&a.table, "table", a.env(EnvTable, DefaultTable), "tasks table (env "+EnvTable+")")
	f.StringVar(&a.queueURL, "queue-url", a.io.Getenv(EnvWorkQueueURL),
		"work queue URL (env "+EnvWorkQueueURL+"; default: look up the queue named "+DefaultWorkQueueName+")")
	f.StringVar(&a.region, "region", "", "AWS region (default: AWS_REGION or the profile's)")
	f.StringVar(&a.profile, "profile", "", "AWS shared config profile (default: AWS_PROFILE)")
	f.StringVar(&a.endpoint, "endpoint-url", "",
		"send DynamoDB and SQS calls to this endpoint, e.g. http://127.0.0.1:4566 (default: AWS_ENDPOINT_URL_DYNAMODB / _SQS, else AWS)")
	f.DurationVar(&a.callTimeout, "call-timeout", settings.Default().ClientCallTimeout, "timeout of each AWS call")
}

// client returns the leasehold client, building it on first use with the
// global settings. It makes no AWS call: the work queue is looked up when a
// command first needs it.
func (a *app) client(ctx context.Context) (*leasehold.Client, error) { return a.clientWith(ctx, 0) }

// clientWith is client with ClientConfig.EnqueueConcurrency (0: the
// default) for the first use.
func (a *app) clientWith(ctx context.Context, enqueueConcurrency int) (*leasehold.Client, error) {
	if a.cli != nil {
		return a.cli, nil
	}
	if a.table == "" {
		return nil, usageErrorf("--table is empty")
	}
	if a.callTimeout <= 0 {
		return nil, usageErrorf("--call-timeout must be positive")
	}
	if a.endpoint != "" {
		u, err := url.Parse(a.endpoint)
		if err != nil || u.Scheme == "" || u.Host == "" {
			return nil, usageErrorf("--endpoint-url %q is not a URL such as http://127.0.0.1:4566", a.endpoint)
		}
	}
	cfg, err := a.awsConfig(ctx)
	if err != nil {
		return nil, err
	}
	// The deployment's listing choice (template parameter TaskListing).
	unlisted, err := rules.ParseListing(os.Getenv(settings.EnvListing))
	if err != nil {
		return nil, usageErrorf("%s: %v", settings.EnvListing, err)
	}
	ccfg := leasehold.ClientConfig{
		AWS: cfg, Table: a.table, QueueURL: a.queueURL,
		CallTimeout: a.callTimeout, Unlisted: unlisted, Endpoint: a.endpoint,
		EnqueueConcurrency: enqueueConcurrency,
		// Payloads, results and answers over their inline limits: enqueue
		// stores them there, result, status and the inspector read them.
		PayloadBucket: a.io.Getenv(settings.EnvPayloadBucket),
	}
	if a.queueURL == "" {
		ccfg.QueueName = DefaultWorkQueueName
	}
	tp, err := a.tracer(ctx)
	if err != nil {
		return nil, err
	}
	otelenv.Client(&ccfg, tp)
	c, err := leasehold.NewClient(ccfg)
	if err != nil {
		return nil, err
	}
	a.cli, a.awsCfg = c, cfg
	return c, nil
}

// tasksAdmin returns the Admin whose verbs on tasks (Select, Bulk,
// ListFiltered) go through c, the client built by client: its AWS
// configuration and global settings, so that it makes no call of its own
// to set up.
func (a *app) tasksAdmin(c *leasehold.Client) *admin.Admin {
	return admin.New(admin.Config{AWS: a.awsCfg, Table: a.table, Endpoint: a.endpoint, CallTimeout: a.callTimeout, Tasks: c,
		PayloadBucket: a.io.Getenv(settings.EnvPayloadBucket)})
}

// awsConfig loads the SDK configuration (the standard chain, then the
// flags) and checks that it has credentials.
func (a *app) awsConfig(ctx context.Context) (aws.Config, error) {
	cfg, err := a.loadAWSConfig(ctx)
	if err != nil {
		return aws.Config{}, err
	}
	return cfg, a.checkCredentials(ctx, cfg)
}

// loadAWSConfig loads the AWS configuration without checking its
// credentials.
func (a *app) loadAWSConfig(ctx context.Context) (aws.Config, error) {
	opts := []func(*config.LoadOptions) error{
		// One HTTP round trip can never outlast a call.
		config.WithHTTPClient(awshttp.NewBuildableClient().WithTimeout(a.callTimeout)),
		config.WithRetryer(newRetryer),
		// The SDK's own log lines (such as "failed to discard remaining
		// HTTP response body" after a cut call) go nowhere: each command
		// reports its errors in one line, and `leasehold run` keeps stderr
		// for JSON logs (see sdkLogger).
		config.WithLogger(logging.Nop{}),
		config.WithClientLogMode(0),
	}
	if a.region != "" {
		opts = append(opts, config.WithRegion(a.region))
	}
	if a.profile != "" {
		opts = append(opts, config.WithSharedConfigProfile(a.profile))
	}
	ctx, cancel := context.WithTimeout(ctx, a.callTimeout)
	defer cancel()
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load AWS configuration: %w", err)
	}
	// After loading: LoadDefaultConfig adds AWS_CA_BUNDLE only to the
	// SDK's own client type (see leasehold.GuardHTTP).
	cfg.HTTPClient = leasehold.GuardHTTP(cfg.HTTPClient)
	if cfg.Region == "" {
		if a.endpoint == "" && a.io.Getenv("AWS_ENDPOINT_URL_DYNAMODB") == "" && a.io.Getenv("AWS_ENDPOINT_URL") == "" {
			return aws.Config{}, usageErrorf("no AWS region: set --region or AWS_REGION")
		}
		cfg.Region = localRegion
	}
	return cfg, nil
}

// checkCredentials finds out once, before any call, whether cfg has usable
// credentials (rules.CheckCredentials): without them every call fails with
// the SDK's whole provider chain in its message, where one line can say
// what to set.
func (a *app) checkCredentials(ctx context.Context, cfg aws.Config) error {
	return rules.CheckCredentials(ctx, cfg, a.profile, a.callTimeout)
}

// newRetryer is the SDK's standard retryer, except that a refused
// connection fails at once: nothing listens there, and the user should hear
// so now rather than after the backoff. There is no retry quota either: every
// call is already bounded by attempts and the call timeout, and a bulk
// enqueue must not lose its retries to a quota drained by throttling.
func newRetryer() aws.Retryer {
	return retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = 5
		o.MaxBackoff = 2 * time.Second
		o.RateLimiter = ratelimit.None
		o.Retryables = append([]retry.IsErrorRetryable{
			retry.IsErrorRetryableFunc(func(err error) aws.Ternary {
				if errors.Is(err, syscall.ECONNREFUSED) {
					return aws.FalseTernary
				}
				return aws.UnknownTernary
			}),
		}, o.Retryables...)
	})
}

// workQueueName is the name of the default work queue the client uses:
// the last part of --queue-url, or DefaultWorkQueueName without one.
func (a *app) workQueueName() string {
	if a.queueURL == "" {
		return DefaultWorkQueueName
	}
	u, err := url.Parse(a.queueURL)
	if err != nil {
		return ""
	}
	return path.Base(u.Path)
}
