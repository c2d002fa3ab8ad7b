package wiring

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/jonboulle/clockwork"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold/internal/claimcheck"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/query"
)

// ClientConfig configures a client: the resources it uses and how it
// calls them. Zero fields take the defaults that package settings lists.
// M is the client's middleware type, leasehold.EnqueueMiddleware, which
// names the root's submissions and results: leasehold.ClientConfig is
// this type with M set to it.
type ClientConfig[M any] struct {
	// AWS is the SDK configuration the DynamoDB and SQS clients are built
	// from; AWS_ENDPOINT_URL_DYNAMODB and AWS_ENDPOINT_URL_SQS point it at a
	// local stack.
	AWS aws.Config
	// Table is the tasks table (required).
	Table string
	// QueueURL is the default work queue, as WorkerConfig.QueueURL: where
	// the tokens of tasks that name no queue go. Enqueue and EnqueueMany
	// need it (or QueueName); without either, Retry leaves the dispatch of
	// the retried task to the sweeper. Get, List and Cancel do not use it.
	QueueURL string
	// QueueName, used when QueueURL is empty, is looked up with
	// GetQueueUrl on first use.
	QueueName string
	// KindQueues names the queue of each kind that does not go to the
	// default work queue (QueueURL or QueueName): the SQS queue name,
	// resolved with GetQueueUrl on first use. The Queue of one task's
	// Submission overrides it.
	KindQueues map[string]string
	// MaxAttempts is the max attempts of a task enqueued with none (a
	// Submission's MaxAttempts of 0), as WorkerConfig's is of an inline
	// token that names none (0: settings.Default().MaxAttempts, 5; at most
	// 100).
	MaxAttempts int
	// WaitPoll is the longest pause between two reads of a task in
	// Client.Wait and Result, which start at 100ms (or WaitPoll, if
	// shorter) and double up to it (0: 2s).
	WaitPoll time.Duration
	// CallTimeout bounds each call to DynamoDB or SQS (0:
	// settings.Default().ClientCallTimeout, 10s).
	CallTimeout time.Duration
	// EnqueueConcurrency bounds the calls EnqueueMany makes at once (0:
	// settings.Default().EnqueueConcurrency, 10).
	EnqueueConcurrency int
	// CreateWait, when positive, leaves the create of each task enqueued
	// to start now (no RunAt ahead, no After) to the worker that receives
	// its token, which creates it already claimed: 3 write units a task in
	// all instead of 4 (docs/enqueue.md, "Who stores the task"). Enqueue
	// then reads the task until that create is seen, for at most
	// CreateWait, and stores the task itself only after that, so it
	// returns a stored task either way, later by a worker's pick-up (and
	// by CreateWait where no worker polls the queue). Its pauses run on
	// Clock: a fake clock must be advanced. 0 (the default): Enqueue
	// stores every task itself, at once.
	CreateWait time.Duration
	// Unlisted makes the tasks this client enqueues unlisted: no entry in
	// the listing index (one write unit less each), so List and `leasehold
	// list` do not show them. LEASEHOLD_LISTING=off sets it for the CLI.
	Unlisted bool
	// PayloadBucket is the S3 bucket where payloads over 128 KiB go, up to
	// 10 MiB (docs/limits.md), and from which Get and Wait read payloads
	// and results kept there. Empty keeps the inline limits.
	// LEASEHOLD_PAYLOAD_BUCKET sets it for the CLI.
	PayloadBucket string
	// Endpoint, if set, receives every DynamoDB and SQS call, such as a
	// local stack at http://127.0.0.1:4566, whatever AWS and the
	// AWS_ENDPOINT_URL* variables say.
	Endpoint string
	// Clock replaces the client's time source (Delay, Wait); for tests.
	Clock clockwork.Clock
	// Middleware wraps every Enqueue and EnqueueMany, the first outermost
	// (see leasehold.EnqueueMiddleware). None by default.
	Middleware []M
	// TracerProvider, if set, traces the client with OpenTelemetry: a
	// producer span for each Enqueue and EnqueueMany (an EnqueueMiddleware,
	// installed outermost) and a span for each callback's answer
	// (otelenv.Client adds the AWS calls); the span's W3C trace context
	// goes into each task's metadata, so the worker's attempts join the
	// caller's trace. Nil (the default) traces nothing. See
	// docs/observability.md.
	TracerProvider trace.TracerProvider

	// backend, when set (SetClientBackend), replaces the DynamoDB store
	// and the SQS client that NewClient would build from AWS.
	backend *ClientBackend
}

// ClientStore lists the lease store calls a client makes; both stores
// (DynamoDB and in-memory) satisfy it.
type ClientStore interface {
	Create(ctx context.Context, t lease.NewTask) (lease.Task, error)
	Get(ctx context.Context, id string) (lease.Task, error)
	RequestCancel(ctx context.Context, id string) (lease.Task, error)
	CreateCancelled(ctx context.Context, id, parent, reason string) (lease.Task, error)
	Retry(ctx context.Context, id string, extraAttempts int) (lease.Task, error)
	List(ctx context.Context, status lease.Status, limit int, cursor string) ([]lease.Task, string, error)
	// ListBy is List of one kind or named queue (query.Admin.ListBy).
	ListBy(ctx context.Context, status lease.Status, by query.ListBy, limit int, cursor string) ([]lease.Task, string, error)
	EndWait(ctx context.Context, e lease.WaitEnd) (lease.Task, error)
	// BeatCallback records a heartbeat of a callback wait (rules.BeatLands).
	BeatCallback(ctx context.Context, e lease.WaitEnd) (lease.Task, error)
	// ReadSteps reads a history past its task's item (lease.ReadHistory).
	ReadSteps(ctx context.Context, id string, from, n int) ([]lease.Step, error)
}

// ClientSQS lists the SQS calls a client makes, with the SDK's signatures.
type ClientSQS interface {
	GetQueueUrl(ctx context.Context, params *sqs.GetQueueUrlInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	SendMessage(ctx context.Context, params *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	SendMessageBatch(ctx context.Context, params *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
}

// ClientBackend is what a client calls instead of the AWS services its
// config names: leaseholdtest's in-memory store and queues.
type ClientBackend struct {
	Store ClientStore
	SQS   ClientSQS
	// Blobs, if set, is the payload bucket's stand-in (leaseholdtest's
	// memory).
	Blobs claimcheck.Blobs
}

// SetClientBackend makes leasehold.NewClient(*cfg) build its client on b
// rather than on DynamoDB and SQS clients made from cfg.AWS: every other
// field of cfg (the queues, defaults, clock, tracer) keeps its meaning.
// It is how leaseholdtest builds a Client on its Env; nothing public can
// set it, so a program's client always talks to AWS.
func SetClientBackend[M any](cfg *ClientConfig[M], b ClientBackend) { cfg.backend = &b }

// ClientBackendOf returns the backend SetClientBackend set on cfg.
func ClientBackendOf[M any](cfg ClientConfig[M]) (ClientBackend, bool) {
	if cfg.backend == nil {
		return ClientBackend{}, false
	}
	return *cfg.backend, true
}
