package leasehold

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/jonboulle/clockwork"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold/internal/awsenv"
	"github.com/leasehold/leasehold/internal/dispatch"
	"github.com/leasehold/leasehold/internal/eventsource"
	"github.com/leasehold/leasehold/internal/lambdalog"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lifecycle"
	"github.com/leasehold/leasehold/internal/metrics"
	"github.com/leasehold/leasehold/internal/queues"
	"github.com/leasehold/leasehold/internal/settingstable"
	"github.com/leasehold/leasehold/internal/tracing"
	"github.com/leasehold/leasehold/settings"
)

// RateLimit bounds how many tasks of one queue start in each window
// (WorkerConfig.RateLimits): Starts per Per, Per a whole number of seconds.
type RateLimit = settings.RateLimit

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
	// (default ExponentialBackoff(2*time.Second, 10*time.Minute)).
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
	// that names none of its own (workflow.AwaitChildrenWithin, the
	// WaitTimeout enqueue option): at it the waiting task ends FAILED with
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
	RateLimits map[string]RateLimit
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

	// Logger is the structured logger (default: JSON to stderr at Info).
	Logger *slog.Logger
	// Metrics, if set, receives CloudWatch metrics in embedded metric
	// format, one JSON line per attempt when it ends (its outcome:
	// succeeded, failed, retried, lease lost, ...; with handler duration
	// and the claim's time from enqueue and from due), in the namespace
	// "Leasehold" with the task kind as dimension. In Lambda, use
	// os.Stdout and CloudWatch Logs extracts the metrics; see
	// internal/metrics for the list. Off by default.
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

	// Pollers is how many batches Run receives and runs at the same time
	// (default 2). With Concurrency tasks per batch, at most Pollers x
	// Concurrency tasks run at once in this process.
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

// ExponentialBackoff returns a backoff for WorkerConfig.Backoff that
// doubles from base after each failed attempt, up to max. Each delay is
// drawn at random from [d/2, d], so delays never shrink from one attempt
// to the next and tasks that failed together do not retry together. The
// worker's default is ExponentialBackoff(2*time.Second, 10*time.Minute).
func ExponentialBackoff(base, max time.Duration) func(attempt int) time.Duration {
	return lifecycle.ExponentialBackoff(base, max)
}

// ErrConfig wraps every configuration error.
var ErrConfig = lifecycle.ErrConfig

// fromEnv fills cfg's zero fields from the LEASEHOLD_* variables of the
// settings table, read through getenv: what code set wins.
func (cfg *WorkerConfig) fromEnv(getenv func(string) string) error {
	if err := settingstable.Load(cfg, settingstable.Worker, getenv); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return nil
}

// lifecycleConfig is the executor's part of cfg; NewWorker adds the store,
// the SQS client and the queues.
func (cfg WorkerConfig) lifecycleConfig() lifecycle.Config {
	lc := lifecycle.Config{
		QueueURL:              cfg.QueueURL,
		DeadLetterURL:         cfg.DeadLetterQueueURL,
		LeaseDuration:         cmp.Or(cfg.LeaseDuration, settings.DefaultLeaseDuration),
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

// check rejects what neither lifecycle nor the store checks; newWorker
// calls it (NewWorker checks Table first: the tests' stores have none).
func (cfg WorkerConfig) check() error {
	switch {
	case cfg.QueueURL == "":
		return fmt.Errorf("%w: the work queue URL is required", ErrConfig)
	case cfg.Handlers == nil:
		return fmt.Errorf("%w: handlers are required", ErrConfig)
	case cfg.MaxAttempts < 0:
		return fmt.Errorf("%w: max attempts must be at least 1, got %d", ErrConfig, cfg.MaxAttempts)
	case cfg.Concurrency < 0:
		return fmt.Errorf("%w: concurrency must be at least 1, got %d", ErrConfig, cfg.Concurrency)
	case cfg.ReplaceAtReceiveCount < 0:
		return fmt.Errorf("%w: the receive count at which tokens are replaced must be at least 1, got %d", ErrConfig, cfg.ReplaceAtReceiveCount)
	case cfg.DispatchGrace < 0:
		return fmt.Errorf("%w: dispatch grace cannot be negative", ErrConfig)
	case cfg.ClockSkew < 0:
		return fmt.Errorf("%w: clock skew cannot be negative", ErrConfig)
	}
	for _, u := range cfg.QueueURLs {
		if err := queues.CheckName(queues.NameFromURL(u)); err != nil {
			return fmt.Errorf("%w: work queue URL %q: %w", ErrConfig, u, err)
		}
	}
	return nil
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
	// run is how Run polls each queue (its QueueURL is set per queue);
	// sweepEvery is WorkerConfig.SweepEvery.
	run        eventsource.Config
	sweepEvery time.Duration
	// pauses reads whether a queue is paused (its queues.PausedTag), at
	// most once per pauseCheckEvery per queue: for Run's pollers and for
	// the batches HandleSQS gets on Lambda. Nil when the SQS client cannot
	// read tags (a test's fake): then no queue is paused.
	pauses *queues.PauseChecks
}

// NewWorker checks cfg and returns a worker. Impossible settings, such as
// a lease shorter than twice the renewal period or a negative attempt
// count, are rejected with an error wrapping ErrConfig. Its SDK clients
// use a copy of cfg.AWS whose HTTPClient is behind GuardHTTP.
func NewWorker(cfg WorkerConfig) (*Worker, error) {
	if cfg.Table == "" {
		return nil, fmt.Errorf("%w: the tasks table name is required", ErrConfig)
	}
	cfg.AWS.HTTPClient = awsenv.GuardHTTP(cfg.AWS.HTTPClient) // cfg is a copy
	store := lease.NewDynamoStore(dynamodb.NewFromConfig(cfg.AWS), cfg.Table, lease.Options{
		Clock:         cfg.Clock,
		LeaseDuration: cmp.Or(cfg.LeaseDuration, settings.DefaultLeaseDuration),
		Skew:          cfg.ClockSkew,
		DispatchGrace: cfg.DispatchGrace,
		Unlisted:      cfg.Unlisted,
	})
	q := sqs.NewFromConfig(cfg.AWS)
	w, err := newWorker(store, q, cfg)
	if err != nil {
		return nil, err
	}
	w.source = q // Run polls the work queue with it
	return w, nil
}

// pauseCheckEvery is how often a worker reads a queue's tags to see
// whether it is paused: per process under Run, per container on Lambda.
const pauseCheckEvery = 2 * time.Second

// newWorker builds a worker on store and q; NewWorker's, and the tests'.
func newWorker(store lease.Store, q lifecycle.SQSClient, cfg WorkerConfig) (*Worker, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	lc := cfg.lifecycleConfig()
	lc.Store = store
	lc.SQS = q
	lookup, _ := q.(queues.SQSClient)
	resolver := queues.NewResolver(lookup, cfg.QueueURL, lc.CallTimeout, cfg.QueueURLs...)
	lc.Queues = resolver
	if cfg.Metrics != nil {
		lc.Observer = metrics.NewEMF(cfg.Metrics, lc.Clock)
	}
	exec, err := lifecycle.New(lc)
	if err != nil {
		return nil, err
	}
	w := &Worker{
		exec: exec, store: store, log: lc.Logger, queues: resolver,
		queueURL: cfg.QueueURL, queueURLs: distinct(cfg.QueueURLs),
		run: eventsource.Config{
			QueueURL: cfg.QueueURL, Logger: lc.Logger,
			Pollers: cfg.Pollers, BatchSize: cfg.BatchSize, BatchWindow: cfg.BatchWindow,
			InvocationTimeout: cfg.InvocationTimeout, WaitTime: cfg.LongPoll, VisibilityTimeout: cfg.ReceiveVisibility,
		},
		sweepEvery: cfg.SweepEvery,
	}
	w.run.Prepare = w.prepare
	w.run.Release = w.release
	if tags, ok := q.(queues.TagLister); ok {
		log := lc.Logger
		w.pauses = &queues.PauseChecks{Client: tags, Every: pauseCheckEvery, CallTimeout: exec.Config().CallTimeout,
			OnError: func(url string, err error) {
				log.Warn("could not read the queue's tags to see whether it is paused; taking it as not paused", "queue_url", url, "error", err)
			}}
	}
	ds, okStore := store.(dispatch.Store)
	dq, okSQS := q.(dispatch.SQSClient)
	if okStore && okSQS {
		// The sweep sends each task to its own queue, with the store's
		// grace, and what SQS moved to the dead-letter queues of the work
		// queue and of the other queues this worker serves back to where
		// it came from (a client that cannot receive from them, a test's
		// fake, skips that part).
		var (
			dlq   string
			named []string
		)
		if _, ok := q.(dispatch.DeadLetterClient); ok {
			dlq = cfg.DeadLetterQueueURL
			if _, ok := q.(dispatch.QueueAttributesClient); ok {
				for _, u := range w.queueURLs {
					if u != cfg.QueueURL {
						named = append(named, u)
					}
				}
			}
		}
		w.sweeper, err = dispatch.New(dispatch.Config{
			Store: ds, SQS: dq, WorkQueueURL: cfg.QueueURL, Queues: resolver, WorkDLQURL: dlq, NamedQueues: named,
			DispatchGrace: cfg.DispatchGrace, Clock: lc.Clock, CallTimeout: lc.CallTimeout,
			Logger: lc.Logger.With("activity", "sweep"), // not "part": leasehold run names the worker part
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
//
// The messages of a paused queue (`leasehold pause`: the queue's
// leasehold-paused tag, read at most every 2 s per queue and container)
// are handed back unrun: nothing is written for their tasks, so no attempt
// is used; each is hidden for a hold that grows with its receives (10 s
// doubling, at most 15 minutes) and, near the queue's maxReceiveCount,
// replaced by a fresh delayed token, so a paused backlog never reaches the
// dead-letter queue. A queue whose tags cannot be read counts as not
// paused (logged once).
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
	prepared, _ := ctx.Value(preparedKey{}).(*lifecycle.Prepared)
	if prepared == nil {
		// A batch Worker.Run hands over (prepared) was checked by its
		// event source just before: a batch of a paused queue is handed
		// back there, whole and at once, since Run receives no more from
		// it. On Lambda the mapping keeps receiving, so each message is
		// held back here instead.
		w.markPaused(ctx, log, msgs)
	}
	results := w.exec.ProcessPrepared(ctx, log, msgs, prepared, func(i int, r lifecycle.Result) {
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

// markPaused sets Paused on the messages of msgs whose queue is paused,
// asking once per queue of the batch, and logs how many it holds back.
func (w *Worker) markPaused(ctx context.Context, log *slog.Logger, msgs []lifecycle.Message) {
	if w.pauses == nil {
		return
	}
	paused := map[string]bool{}
	held := map[string]int{}
	for i := range msgs {
		m := &msgs[i]
		u := m.QueueURL
		if u == "" {
			if m.Queue != "" {
				continue // its queue's URL is unknown (sourceQueue warned): not asked about
			}
			u = w.queueURL
		}
		p, asked := paused[u]
		if !asked {
			p = w.pauses.Paused(ctx, u)
			paused[u] = p
		}
		if p {
			m.Paused = true
			held[u]++
		}
	}
	for u, n := range held {
		log.Info("queue paused: handing back its messages unrun, to come back later (leasehold resume)", "queue_url", u, "count", n)
	}
}

// preparedKey carries a batch's lifecycle.Prepared from Worker.Run's
// receive to HandleSQS.
type preparedKey struct{}

// prepare is Worker.Run's eventsource.Config.Prepare: a batch received
// ahead has its listing entry written while it waits for its turn, so the
// write costs the batch no time of its own. HandleSQS joins it.
func (w *Worker) prepare(ctx context.Context, ev events.SQSEvent) context.Context {
	msgs := make([]lifecycle.Message, len(ev.Records))
	for i, r := range ev.Records {
		msgs[i] = lifecycle.Message{ID: r.MessageId, Body: r.Body}
	}
	return context.WithValue(ctx, preparedKey{}, w.exec.Prepare(ctx, w.log, msgs))
}

// release is Worker.Run's eventsource.Config.Release: a batch prepared but
// handed back unrun (its queue was paused) has its listing write joined.
// The tasks it listed are not created yet; the batch that creates them
// lists them again.
func (w *Worker) release(ctx context.Context) {
	if p, ok := ctx.Value(preparedKey{}).(*lifecycle.Prepared); ok {
		p.Wait()
	}
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
	m := lifecycle.Message{ID: r.MessageId, ReceiptHandle: r.ReceiptHandle, Body: r.Body, TraceHeader: r.Attributes[tracing.XRayHeader]}
	if n, err := strconv.Atoi(r.Attributes["ApproximateReceiveCount"]); err == nil {
		m.ReceiveCount = n
	}
	if ms, err := strconv.ParseInt(r.Attributes["SentTimestamp"], 10, 64); err == nil {
		m.SentAt = time.UnixMilli(ms)
	}
	return m
}
