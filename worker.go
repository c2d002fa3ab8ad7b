package leasehold

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/jonboulle/clockwork"

	"github.com/leasehold/leasehold/internal/awsenv"
	"github.com/leasehold/leasehold/internal/dispatch"
	"github.com/leasehold/leasehold/internal/eventsource"
	"github.com/leasehold/leasehold/internal/lambdalog"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lifecycle"
	"github.com/leasehold/leasehold/internal/metrics"
	"github.com/leasehold/leasehold/internal/queues"
	"github.com/leasehold/leasehold/settings"
)

// WorkerConfig names the resources a worker uses.
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
	// whichever queue served it.
	QueueURLs []string
	// DeadLetterQueueURL, if set, receives messages that cannot name a task
	// (malformed, wrong version, missing fields, unknown task id), with the
	// reason in the "leasehold-reason" message attribute. Without it such
	// messages are reported as failures until the queue's redrive policy
	// moves them to its dead-letter queue.
	DeadLetterQueueURL string
	// Handlers maps kinds to handlers.
	Handlers *Handlers
}

// ExponentialBackoff returns a backoff for WithBackoff that doubles from
// base after each failed attempt, up to max. Each delay is drawn at random
// from [d/2, d], so delays never shrink from one attempt to the next and
// tasks that failed together do not retry together. The worker's default
// is ExponentialBackoff(2*time.Second, 10*time.Minute).
func ExponentialBackoff(base, max time.Duration) func(attempt int) time.Duration {
	return lifecycle.ExponentialBackoff(base, max)
}

// ErrConfig wraps every configuration error.
var ErrConfig = lifecycle.ErrConfig

// WorkerConfigFromEnv fills the resource names from LEASEHOLD_* variables and
// returns the options the timing variables ask for. It reads neither
// LEASEHOLD_LOG_LEVEL nor the Worker.Run variables and looks nothing up:
// NewWorkerFromEnv does all of that.
func WorkerConfigFromEnv(awsCfg aws.Config, handlers *Handlers) (WorkerConfig, []WorkerOption, error) {
	cfg := WorkerConfig{
		AWS:                awsCfg,
		Table:              os.Getenv(settings.EnvTable),
		QueueURL:           os.Getenv(settings.EnvWorkQueueURL),
		DeadLetterQueueURL: os.Getenv(settings.EnvWorkDLQURL),
		Handlers:           handlers,
	}
	var opts []WorkerOption
	durations := []struct {
		env string
		opt func(time.Duration) WorkerOption
	}{
		{settings.EnvLeaseDuration, WithLeaseDuration},
		{settings.EnvRenewBefore, WithRenewBefore},
		{settings.EnvClockSkew, WithClockSkew},
		{settings.EnvDeadlineMargin, WithDeadlineMargin},
		{settings.EnvDispatchGrace, WithDispatchGrace},
		{settings.EnvVisibilityMargin, WithVisibilityMargin},
		{settings.EnvUnknownKindLimit, WithUnknownKindLimit},
		{settings.EnvWaitTimeout, WithWaitTimeout},
	}
	for _, d := range durations {
		if v := os.Getenv(d.env); v != "" {
			dur, err := time.ParseDuration(v)
			if err != nil {
				return cfg, nil, fmt.Errorf("%w: %s=%q: %w", ErrConfig, d.env, v, err)
			}
			opts = append(opts, d.opt(dur))
		}
	}
	ints := []struct {
		env string
		opt func(int) WorkerOption
	}{
		{settings.EnvMaxAttempts, WithMaxAttempts},
		{settings.EnvConcurrency, WithConcurrency},
		{settings.EnvReplaceAtReceiveCount, WithReplaceAtReceiveCount},
	}
	for _, n := range ints {
		if v := os.Getenv(n.env); v != "" {
			i, err := strconv.Atoi(v)
			if err != nil {
				return cfg, nil, fmt.Errorf("%w: %s=%q: %w", ErrConfig, n.env, v, err)
			}
			opts = append(opts, n.opt(i))
		}
	}
	pairs := []struct {
		env string
		opt func(a, b time.Duration) WorkerOption
	}{
		{settings.EnvBackoff, func(base, max time.Duration) WorkerOption { return WithBackoff(ExponentialBackoff(base, max)) }},
		{settings.EnvUnknownKindBackoff, WithUnknownKindBackoff},
	}
	for _, p := range pairs {
		if v := os.Getenv(p.env); v != "" {
			a, b, err := parseDurationPair(v)
			if err != nil {
				return cfg, nil, fmt.Errorf("%w: %s=%q: %w", ErrConfig, p.env, v, err)
			}
			opts = append(opts, p.opt(a, b))
		}
	}
	unlisted, err := lease.ParseListing(os.Getenv(settings.EnvListing))
	if err != nil {
		return cfg, nil, fmt.Errorf("%w: %s: %w", ErrConfig, settings.EnvListing, err)
	}
	if unlisted {
		opts = append(opts, WithoutListing())
	}
	return cfg, opts, nil
}

// parseDurationPair reads "A,B", two positive durations with A <= B.
func parseDurationPair(v string) (a, b time.Duration, err error) {
	first, second, ok := strings.Cut(v, ",")
	if !ok {
		return 0, 0, errors.New(`want two durations, "MIN,MAX"`)
	}
	if a, err = time.ParseDuration(strings.TrimSpace(first)); err != nil {
		return 0, 0, err
	}
	if b, err = time.ParseDuration(strings.TrimSpace(second)); err != nil {
		return 0, 0, err
	}
	if a <= 0 || b < a {
		return 0, 0, fmt.Errorf("want 0 < %s <= %s", a, b)
	}
	return a, b, nil
}

// WorkerOption tunes a worker.
type WorkerOption func(*workerOptions)

type workerOptions struct {
	lc          lifecycle.Config
	skew        time.Duration
	grace       time.Duration
	maxAttempts *int // set explicitly: zero is then a mistake, not "default"
	concurrency *int
	replaceAt   *int
	metrics     io.Writer
	unlisted    bool
}

// WithoutListing makes the tasks this worker creates from inline tokens
// unlisted: they get no entry in the listing index, which saves one of the
// three write units of an inline task, and neither `leasehold list` nor
// Client.List shows them (status, Get and everything else still work). See
// docs/performance.md. LEASEHOLD_LISTING=off sets it.
func WithoutListing() WorkerOption {
	return func(o *workerOptions) { o.unlisted = true }
}

// WithLeaseDuration sets how long a claim or renewal holds a task (default
// 20s). It must be at least twice the renewal period.
func WithLeaseDuration(d time.Duration) WorkerOption {
	return func(o *workerOptions) { o.lc.LeaseDuration = d }
}

// WithRenewBefore sets how long before expiry the lease is renewed (default
// 10s).
func WithRenewBefore(d time.Duration) WorkerOption {
	return func(o *workerOptions) { o.lc.RenewBefore = d }
}

// WithMaxAttempts sets the attempts of an inline task that names none
// (default 5).
func WithMaxAttempts(n int) WorkerOption {
	return func(o *workerOptions) { o.maxAttempts = &n }
}

// WithBackoff sets the delay before attempt n+1 after attempt n failed.
// The default is ExponentialBackoff(2*time.Second, 10*time.Minute).
func WithBackoff(f func(attempt int) time.Duration) WorkerOption {
	return func(o *workerOptions) { o.lc.Backoff = f }
}

// WithConcurrency bounds the messages of one batch processed at once
// (default 10).
func WithConcurrency(n int) WorkerOption {
	return func(o *workerOptions) { o.concurrency = &n }
}

// WithReplaceAtReceiveCount sets the receive count from which a message
// whose task cannot run now (leased elsewhere, or a store failure) is
// replaced by a fresh token rather than hidden or left to reappear, so a
// valid token never reaches the work queue's dead-letter queue while its
// task can still run (default 8: the template's maxReceiveCount 10 minus
// 2). Keep it at most the queue's maxReceiveCount minus 2.
func WithReplaceAtReceiveCount(n int) WorkerOption {
	return func(o *workerOptions) { o.replaceAt = &n }
}

// WithClockSkew bounds the clock difference between workers (default 2s): an
// expired lease is taken over only after this much more.
func WithClockSkew(d time.Duration) WorkerOption {
	return func(o *workerOptions) { o.skew = d }
}

// WithDeadlineMargin sets how long before the Lambda deadline the handler's
// context ends so that the lease can be released (default 5s).
func WithDeadlineMargin(d time.Duration) WorkerOption {
	return func(o *workerOptions) { o.lc.DeadlineMargin = d }
}

// WithDispatchGrace sets how long past its expected start (or its lease's
// expiry plus skew) a task may go unclaimed before the sweeper dispatches it
// again (default 2m). It must match the dispatch function's setting.
func WithDispatchGrace(d time.Duration) WorkerOption {
	return func(o *workerOptions) { o.grace = d }
}

// WithVisibilityMargin sets what is added to the lease when a message is
// hidden (default 10s).
func WithVisibilityMargin(d time.Duration) WorkerOption {
	return func(o *workerOptions) { o.lc.VisibilityMargin = d }
}

// WithUnknownKindBackoff bounds the wait before a task whose kind this
// worker has no handler for is offered again (default 10s to 15m). Such a
// task uses no attempt: another worker on its queue may know the kind. The
// wait is the time since the kind was first found unknown, within these
// bounds, so it roughly doubles each time.
func WithUnknownKindBackoff(minWait, maxWait time.Duration) WorkerOption {
	return func(o *workerOptions) { o.lc.UnknownKindBackoffMin, o.lc.UnknownKindBackoffMax = minWait, maxWait }
}

// WithUnknownKindLimit sets how long a task's kind may stay unknown, from
// the first time a worker found no handler for it, before the task fails for
// good (default 7 days).
func WithUnknownKindLimit(d time.Duration) WorkerOption {
	return func(o *workerOptions) { o.lc.UnknownKindLimit = d }
}

// WithWaitTimeout sets the deadline of a wait for children or
// dependencies that names none of its own (AwaitChildrenWithin, the
// WaitTimeout enqueue option): at it the waiting task ends FAILED with the
// reason. Default 7 days, at most 365.
func WithWaitTimeout(d time.Duration) WorkerOption {
	return func(o *workerOptions) { o.lc.WaitTimeout = d }
}

// WithLogger sets the structured logger (default: JSON to stderr at Info).
func WithLogger(l *slog.Logger) WorkerOption {
	return func(o *workerOptions) { o.lc.Logger = l }
}

// WithMetrics writes CloudWatch metrics in embedded metric format to w, one
// JSON line per attempt when it ends (its outcome: succeeded, failed,
// retried, lease lost, ...; with handler duration and the claim's time from
// enqueue and from due), in the namespace "Leasehold" with the task kind as
// dimension. In Lambda, w is
// os.Stdout and CloudWatch Logs extracts the metrics; see internal/metrics
// for the list. Off by default.
func WithMetrics(w io.Writer) WorkerOption {
	return func(o *workerOptions) { o.metrics = w }
}

// WithClock replaces the time source; for tests.
func WithClock(c clockwork.Clock) WorkerOption {
	return func(o *workerOptions) { o.lc.Clock = c }
}

// WithOwner names the worker in lease_owner (default: host name and a random
// suffix).
func WithOwner(name string) WorkerOption {
	return func(o *workerOptions) { o.lc.Owner = name }
}

// Worker runs registered handlers for the tasks its queue delivers.
type Worker struct {
	exec  *lifecycle.Executor
	store lease.Store
	log   *slog.Logger

	// For Run (runner.go): the work queues (the default first) and the
	// client that polls them.
	queueURL  string
	queueURLs []string
	source    eventsource.SQSClient
	// queues resolves task queue names and event source ARNs to URLs.
	queues *queues.Resolver
	// sweeper re-dispatches tasks whose message was lost; Run runs its
	// SweepLoop. Nil when the store or the SQS client cannot sweep.
	sweeper *dispatch.Dispatcher
}

// NewWorker checks cfg and opts and returns a worker. Impossible settings,
// such as a lease shorter than twice the renewal period or zero attempts,
// are rejected with an error wrapping ErrConfig. Its SDK clients use a copy
// of cfg.AWS whose HTTPClient is behind GuardHTTP.
func NewWorker(cfg WorkerConfig, opts ...WorkerOption) (*Worker, error) {
	switch {
	case cfg.Table == "":
		return nil, fmt.Errorf("%w: the tasks table name is required", ErrConfig)
	case cfg.QueueURL == "":
		return nil, fmt.Errorf("%w: the work queue URL is required", ErrConfig)
	case cfg.Handlers == nil:
		return nil, fmt.Errorf("%w: handlers are required", ErrConfig)
	}
	for _, u := range cfg.QueueURLs {
		if err := queues.CheckName(queues.NameFromURL(u)); err != nil {
			return nil, fmt.Errorf("%w: work queue URL %q: %w", ErrConfig, u, err)
		}
	}
	o, err := applyOptions(opts)
	if err != nil {
		return nil, err
	}
	cfg.AWS.HTTPClient = awsenv.GuardHTTP(cfg.AWS.HTTPClient) // cfg is a copy
	store := lease.NewDynamoStore(dynamodb.NewFromConfig(cfg.AWS), cfg.Table, lease.Options{
		Clock:         o.lc.Clock,
		LeaseDuration: o.lc.LeaseDuration,
		Skew:          o.skew,
		DispatchGrace: o.grace,
		Unlisted:      o.unlisted,
	})
	q := sqs.NewFromConfig(cfg.AWS)
	w, err := newWorker(store, q, cfg, o)
	if err != nil {
		return nil, err
	}
	w.source = q // Run polls the work queue with it
	return w, nil
}

// applyOptions applies opts over the defaults and checks what newWorker
// does not.
func applyOptions(opts []WorkerOption) (workerOptions, error) {
	o := workerOptions{}
	for _, opt := range opts {
		opt(&o)
	}
	if o.lc.Logger == nil {
		o.lc.Logger = lambdalog.New(os.Stderr, slog.LevelInfo)
	}
	if o.lc.Owner == "" {
		o.lc.Owner = defaultOwner()
	}
	if o.maxAttempts != nil {
		if *o.maxAttempts < 1 {
			return o, fmt.Errorf("%w: max attempts must be at least 1, got %d", ErrConfig, *o.maxAttempts)
		}
		o.lc.DefaultMaxAttempts = *o.maxAttempts
	}
	if o.concurrency != nil {
		if *o.concurrency < 1 {
			return o, fmt.Errorf("%w: concurrency must be at least 1, got %d", ErrConfig, *o.concurrency)
		}
		o.lc.Concurrency = *o.concurrency
	}
	if o.replaceAt != nil {
		if *o.replaceAt < 1 {
			return o, fmt.Errorf("%w: the receive count at which tokens are replaced must be at least 1, got %d", ErrConfig, *o.replaceAt)
		}
		o.lc.ReplaceAtReceiveCount = *o.replaceAt
	}
	if o.grace < 0 {
		return o, fmt.Errorf("%w: dispatch grace cannot be negative", ErrConfig)
	}
	if o.skew < 0 {
		return o, fmt.Errorf("%w: clock skew cannot be negative", ErrConfig)
	}
	if o.lc.LeaseDuration == 0 {
		o.lc.LeaseDuration = lease.DefaultLeaseDuration
	}
	return o, nil
}

func newWorker(store lease.Store, q lifecycle.SQSClient, cfg WorkerConfig, o workerOptions) (*Worker, error) {
	lc := o.lc
	lc.Store = store
	lc.SQS = q
	lc.QueueURL = cfg.QueueURL
	lc.DeadLetterURL = cfg.DeadLetterQueueURL
	lc.Handlers = cfg.Handlers.lookup
	lookup, _ := q.(queues.SQSClient)
	resolver := queues.NewResolver(lookup, cfg.QueueURL, lc.CallTimeout, cfg.QueueURLs...)
	lc.Queues = resolver
	if o.metrics != nil {
		lc.Observer = metrics.NewEMF(o.metrics, lc.Clock)
	}
	exec, err := lifecycle.New(lc)
	if err != nil {
		return nil, err
	}
	w := &Worker{
		exec: exec, store: store, log: lc.Logger, queues: resolver,
		queueURL: cfg.QueueURL, queueURLs: distinct(cfg.QueueURLs),
	}
	ds, okStore := store.(dispatch.Store)
	dq, okSQS := q.(dispatch.SQSClient)
	if okStore && okSQS {
		// The sweep sends each task to its own queue, with the store's
		// grace.
		w.sweeper, err = dispatch.New(dispatch.Config{
			Store: ds, SQS: dq, WorkQueueURL: cfg.QueueURL, Queues: resolver,
			DispatchGrace: o.grace, Clock: lc.Clock, CallTimeout: lc.CallTimeout,
			Logger: lc.Logger.With("part", "sweep"),
		})
		if err != nil {
			return nil, fmt.Errorf("%w: sweep: %w", ErrConfig, err)
		}
	}
	return w, nil
}

func defaultOwner() string {
	host, _ := os.Hostname()
	if host == "" {
		host = "worker"
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return host + "-" + hex.EncodeToString(b[:])
}

// HandleSQS is the Lambda handler for the work queue's event source mapping
// (configure it with ReportBatchItemFailures). Messages are processed
// concurrently; the response lists the ones to deliver again. It returns
// only when every message is done.
func (w *Worker) HandleSQS(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	log := w.log
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		log = log.With("request_id", lc.AwsRequestID)
	}
	msgs := make([]lifecycle.Message, len(ev.Records))
	for i, r := range ev.Records {
		msgs[i] = messageOf(r)
		w.sourceQueue(ctx, log, &msgs[i], r.EventSourceARN)
	}
	// Off Lambda, the event source deletes each acknowledged message at
	// once (eventsource.Ack); on Lambda the response below decides.
	results := w.exec.ProcessBatchEach(ctx, log, msgs, func(i int, r lifecycle.Result) {
		if r.Ack {
			eventsource.Ack(ctx, msgs[i].ID)
		}
	})
	var resp events.SQSEventResponse
	for i, res := range results {
		if !res.Ack {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: msgs[i].ID})
		}
	}
	return resp, nil
}

// sourceQueue sets the queue a message came from, from its record's event
// source ARN: its name is recorded on the task an inline token creates, and
// its URL takes the message's visibility changes. Without an ARN (a
// hand-made event) the message is taken to come from the default queue.
func (w *Worker) sourceQueue(ctx context.Context, log *slog.Logger, m *lifecycle.Message, arn string) {
	name, _ := queues.NameFromARN(arn)
	if name == "" {
		return
	}
	m.Queue = name
	u, err := w.queues.URLOf(ctx, arn)
	if err != nil {
		// The message is still processed; its visibility changes go to the
		// default queue and fail there harmlessly (the lease guards the
		// task, not the message).
		log.Warn("could not find the URL of the message's queue", "queue", name, "message_id", m.ID, "error", err)
		return
	}
	m.QueueURL = u
}

// distinct returns urls without empty strings and repeats, in order.
func distinct(urls []string) []string {
	var out []string
	for _, u := range urls {
		if u != "" && !slices.Contains(out, u) {
			out = append(out, u)
		}
	}
	return out
}

func messageOf(r events.SQSMessage) lifecycle.Message {
	m := lifecycle.Message{ID: r.MessageId, ReceiptHandle: r.ReceiptHandle, Body: r.Body}
	if n, err := strconv.Atoi(r.Attributes["ApproximateReceiveCount"]); err == nil {
		m.ReceiveCount = n
	}
	if ms, err := strconv.ParseInt(r.Attributes["SentTimestamp"], 10, 64); err == nil {
		m.SentAt = time.UnixMilli(ms)
	}
	return m
}
