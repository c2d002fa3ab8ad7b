package wiring

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/jonboulle/clockwork"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold/internal/defaults"
	"github.com/leasehold/leasehold/internal/lambdalog"
	"github.com/leasehold/leasehold/internal/lifecycle"
	"github.com/leasehold/leasehold/internal/tracing"
	"github.com/leasehold/leasehold/settings"
)

// WorkerConfig is everything a worker is configured with: the resources it
// uses, its timing, and how Run polls. Every field but AWS, Table, QueueURL
// and Handlers may stay zero for its default; package settings lists each
// field with its LEASEHOLD_* variable, default and limits (the table
// docs/worker.md shows), and NewWorkerFromEnv fills the zero fields from
// those variables.
type WorkerConfig struct {
	// AWS is the SDK configuration the worker's DynamoDB and SQS clients are
	// built from. Endpoints follow the SDK's rules, so AWS_ENDPOINT_URL_SQS
	// and AWS_ENDPOINT_URL_DYNAMODB point it at a local stack.
	AWS aws.Config
	// Table is the tasks table.
	Table string
	// QueueURL is the default work queue: where the tokens of tasks that
	// name no queue go (every worker and client sharing a table should
	// agree on it), and the queue Run polls unless QueueURLs is set.
	QueueURL string
	// QueueURLs, if set, lists the work queues this worker serves instead
	// of QueueURL (which may be among them): Run polls each, with one
	// poller group per queue. On Lambda, give the function one event
	// source mapping per queue; each record's event source ARN names its
	// queue. Retries, snoozes and sweeps go to the queue the task names,
	// whichever queue served it. Run's recovery sweep also reads the
	// dead-letter queue that each of these queues' redrive policy names,
	// as it reads DeadLetterQueueURL.
	QueueURLs []string
	// DeadLetterQueueURL, if set, receives messages that cannot name a task
	// (malformed, wrong version, missing fields, unknown task id), with the
	// reason in the "leasehold-reason" message attribute. Without it such
	// messages are reported as failures until the queue's redrive policy
	// moves them to its dead-letter queue. Run's recovery sweep also sends
	// the messages SQS moved there (those without a reason: tokens whose
	// receives ran out) back to the queue they came from, up to 3 times
	// each.
	DeadLetterQueueURL string
	// Handlers maps kinds to handlers.
	Handlers *Handlers

	// LeaseDuration is how long a claim or renewal holds a task (default
	// 20s); at least twice RenewBefore.
	LeaseDuration time.Duration
	// RenewBefore is how long before expiry the lease is renewed (default
	// 10s).
	RenewBefore time.Duration
	// MaxAttempts is the attempts of an inline task that names none
	// (default 5, at most 100).
	MaxAttempts int
	// Concurrency bounds the messages of one batch processed at once
	// (default 10).
	Concurrency int
	// ClockSkew bounds the clock difference between workers (default 2s):
	// an expired lease is taken over only after this much more.
	ClockSkew time.Duration
	// DeadlineMargin is how long before the invocation's deadline the
	// handler's context ends so that the lease can be released (default
	// 5s).
	DeadlineMargin time.Duration
	// Backoff is the delay before attempt n+1 after attempt n failed
	// (default settings.ExponentialBackoff(2*time.Second, 10*time.Minute)).
	Backoff func(attempt int) time.Duration
	// VisibilityMargin is added to the lease when a message is hidden
	// (default 10s).
	VisibilityMargin time.Duration
	// DispatchGrace is how long past its expected start (or its lease's
	// expiry plus skew) a task may go unclaimed before the sweep
	// dispatches it again (default 2m). It must match the dispatch
	// function's.
	DispatchGrace time.Duration
	// ReplaceAtReceiveCount is the receive count from which a message whose
	// task cannot run now (leased elsewhere, or a store failure) is
	// replaced by a fresh token rather than hidden, so a valid token never
	// reaches the work queue's dead-letter queue while its task can still
	// run (default 8: the template's maxReceiveCount 10 minus 2). Keep it
	// at most the queue's maxReceiveCount minus 2.
	ReplaceAtReceiveCount int
	// UnknownKindBackoffMin and UnknownKindBackoffMax bound the wait before
	// a task whose kind this worker has no handler for is offered again
	// (default 10s to 15m). Such a task uses no attempt: another worker on
	// its queue may know the kind. The wait is the time since the kind was
	// first found unknown, within these bounds, so it roughly doubles each
	// time.
	UnknownKindBackoffMin, UnknownKindBackoffMax time.Duration
	// UnknownKindLimit is how long a task's kind may stay unknown, from the
	// first time a worker found no handler for it, before the task fails
	// for good (default 7 days).
	UnknownKindLimit time.Duration
	// WaitTimeout is the deadline of a wait for children or dependencies
	// that names none of its own (workflow.AllWithin, the
	// WaitTimeout of a leasehold.Submission): at it the waiting task ends FAILED with
	// the reason. Default 7 days, at most 365.
	WaitTimeout time.Duration
	// RateLimits bounds, per queue name, how many tasks start in each
	// window, counted across every worker of the table in rate windows of
	// the tasks table (one conditional write, 1 write unit, per start). A
	// token that finds its queue's window full is held back before any
	// claim: its message waits on the queue and comes back (replaced by a
	// fresh token near maxReceiveCount), so a held task uses no attempt
	// and nothing is lost. Every worker of a queue should set the same
	// limit. docs/worker.md, "Flow control". LEASEHOLD_RATE_LIMITS sets it
	// ("leasehold-work=50/s,reports=10/m").
	RateLimits map[string]settings.RateLimit
	// KindConcurrency bounds, per kind, how many attempts run at once
	// across every worker of the table, in a slot set of the tasks table
	// (one write to take a slot after the claim, one to give it back;
	// each a write unit per KB of the set). A claimed task whose kind has
	// no free slot is released without using an attempt (a snooze, with
	// the reason) and offered again after a wait that doubles, from 1 s to
	// 5 min. A slot whose worker died frees itself at the invocation's
	// deadline. At most 100 per kind. docs/worker.md, "Flow control".
	// LEASEHOLD_KIND_CONCURRENCY sets it ("resize=3,report=1").
	KindConcurrency map[string]int
	// Unlisted makes the tasks this worker creates from inline tokens
	// unlisted: they get no entry in the listing index, which saves one of
	// the three write units of an inline task, and neither `leasehold list`
	// nor Client.List shows them (status, Get and everything else still
	// work). See docs/performance.md. LEASEHOLD_LISTING=off sets it.
	Unlisted bool
	// PayloadBucket is the S3 bucket where payloads and results over
	// their inline limits (128 KiB, 64 KiB) are kept, up to 10 MiB each
	// (docs/limits.md). Empty keeps the inline limits.
	// LEASEHOLD_PAYLOAD_BUCKET sets it.
	PayloadBucket string

	// Logger is the structured logger (default: JSON to stderr at Info).
	Logger *slog.Logger
	// Metrics, if set, receives CloudWatch metrics in embedded metric
	// format: the attempts' outcomes (succeeded, failed, retried, lease
	// lost, ...), handler durations and the claims' time from enqueue and
	// from due, in the namespace "Leasehold" with the task kind as
	// dimension, as one JSON document per kind of each batch, written
	// before HandleSQS returns (every 10 seconds and at the end under
	// Run): a document per attempt would cost about ten times the
	// CloudWatch Logs ingestion. In Lambda, use os.Stdout and CloudWatch
	// Logs extracts the metrics; see internal/metrics for the list. Off
	// by default.
	Metrics io.Writer
	// Owner names the worker in lease_owner (default: host name and a
	// random suffix).
	Owner string
	// Clock replaces the time source; for tests.
	Clock clockwork.Clock
	// Middleware wraps every handler run, the first outermost (see
	// Middleware). None by default.
	Middleware []Middleware
	// TracerProvider, if set, traces the worker with OpenTelemetry: a span
	// for each message's attempt (a child of the trace context its token
	// carries), its claim, renewals and end, each step and await, each
	// handler run (a Middleware, installed outermost); and every token
	// the worker sends carries its trace context, so a workflow is one
	// trace. Nil (the default) traces nothing, at no cost. The AWS calls
	// are traced by instrumenting AWS (otelenv.Worker does both; package
	// otelenv also builds a provider from the OTEL_* environment). See
	// docs/observability.md.
	TracerProvider trace.TracerProvider

	// Pollers is how many receive loops Run has (default 2). Each runs up
	// to two of its batches at once, starting the next while its last
	// one's tasks write their finishes: with Concurrency tasks per batch,
	// at most Pollers x 2 x Concurrency tasks run at once in this process.
	Pollers int
	// BatchSize is the most messages Run hands over as one batch (default
	// 10; above 10 needs BatchWindow).
	BatchSize int
	// BatchWindow is how long a batch may keep gathering messages after
	// its first one arrived (default 0: whatever one receive returns).
	BatchWindow time.Duration
	// InvocationTimeout is the budget of one batch under Run, the
	// counterpart of a Lambda function's timeout (default 60s, at most
	// 15m). A task still running DeadlineMargin before it ends has its
	// context cancelled with ErrDeadline and its lease released, so another
	// attempt can start at once. A graceful stop waits at most this long
	// for the batches in flight.
	InvocationTimeout time.Duration
	// LongPoll is the wait of each ReceiveMessage under Run, in whole
	// seconds up to 20s (the default).
	LongPoll time.Duration
	// ReceiveVisibility overrides the queue's visibility timeout for the
	// messages Run receives (whole seconds; default: the queue's). A
	// message whose task is running stays hidden regardless: the worker
	// extends its visibility at every lease renewal. A short value makes a
	// message that was received but never processed (say, by a process
	// that was killed) come back sooner.
	ReceiveVisibility time.Duration
	// SweepEvery is the period of the recovery sweep that Run performs
	// alongside polling (default 1m; at least 100ms); negative turns it
	// off, for a process whose table is swept elsewhere (the scheduled
	// dispatch function, or other processes). Every sweep reads the sparse
	// sweep index of the tasks table and sends a fresh dispatch token for
	// each task whose message was lost: a PENDING task still unclaimed
	// DispatchGrace after it was due, or a RUNNING task whose holder
	// stopped renewing (lease expiry + ClockSkew + DispatchGrace passed).
	// Such a task is dispatched again within that time plus one period
	// plus the sweep's own run time.
	//
	// Every process running Run sweeps; concurrent sweeps are safe (a
	// conditional write lets one of them send each token, and the claim
	// makes a duplicate token harmless), so recovery does not depend on any
	// one process staying up. Idle, one sweep is one Query per shard of the
	// sweep index (16), about 8 read units. Each task goes to the queue it
	// names, so workers serving different queues can share a table. See
	// docs/running.md.
	SweepEvery time.Duration
}

// LifecycleConfig is the executor's part of cfg: its timing, limits,
// logger, owner and clock, and its handlers run through cfg.Middleware
// (behind the tracing middleware when cfg.TracerProvider is set). The
// root's NewWorker and leaseholdtest.New both build their executor from
// it, adding the store, the SQS client and the queues, so that a test's
// Env runs the worker a program configures.
func LifecycleConfig(cfg WorkerConfig) lifecycle.Config {
	lc := lifecycle.Config{
		QueueURL:              cfg.QueueURL,
		DeadLetterURL:         cfg.DeadLetterQueueURL,
		LeaseDuration:         cmp.Or(cfg.LeaseDuration, defaults.LeaseDuration),
		RenewBefore:           cfg.RenewBefore,
		DefaultMaxAttempts:    cfg.MaxAttempts,
		Concurrency:           cfg.Concurrency,
		DeadlineMargin:        cfg.DeadlineMargin,
		Backoff:               cfg.Backoff,
		VisibilityMargin:      cfg.VisibilityMargin,
		ReplaceAtReceiveCount: cfg.ReplaceAtReceiveCount,
		UnknownKindBackoffMin: cfg.UnknownKindBackoffMin,
		UnknownKindBackoffMax: cfg.UnknownKindBackoffMax,
		UnknownKindLimit:      cfg.UnknownKindLimit,
		WaitTimeout:           cfg.WaitTimeout,
		RateLimits:            cfg.RateLimits,
		KindConcurrency:       cfg.KindConcurrency,
		Logger:                cfg.Logger,
		Owner:                 cfg.Owner,
		Clock:                 cfg.Clock,
	}
	if lc.Logger == nil {
		lc.Logger = lambdalog.New(os.Stderr, slog.LevelInfo)
	}
	if lc.Owner == "" {
		lc.Owner = defaultOwner()
	}
	mws := slices.Clone(cfg.Middleware)
	if cfg.TracerProvider != nil {
		lc.Tracer = cfg.TracerProvider.Tracer(tracing.ScopeName)
		mws = append([]Middleware{tracingMiddleware(cfg.TracerProvider)}, mws...)
	}
	if cfg.Handlers != nil {
		lc.Handlers = cfg.Handlers.lookup
		if len(mws) > 0 {
			lc.Handlers = func(kind string) (lifecycle.Handler, bool) {
				h, ok := cfg.Handlers.lookup(kind)
				if !ok {
					return nil, false
				}
				return wrap(h, mws), true
			}
		}
	}
	return lc
}

// defaultOwner names a worker whose config names none: its host and a
// random suffix.
func defaultOwner() string {
	host, _ := os.Hostname()
	if host == "" {
		host = "worker"
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return host + "-" + hex.EncodeToString(b[:])
}
