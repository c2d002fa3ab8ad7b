package leasehold

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/leasehold/leasehold/internal/awsenv"
	"github.com/leasehold/leasehold/internal/claimcheck"
	"github.com/leasehold/leasehold/internal/defaults"
	"github.com/leasehold/leasehold/internal/dispatch"
	"github.com/leasehold/leasehold/internal/eventsource"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/dynamo"
	"github.com/leasehold/leasehold/internal/lifecycle"
	"github.com/leasehold/leasehold/internal/metrics"
	"github.com/leasehold/leasehold/internal/queues"
	"github.com/leasehold/leasehold/internal/settingstable"
	"github.com/leasehold/leasehold/internal/tracing"
	"github.com/leasehold/leasehold/internal/wiring"
)

// WorkerConfig is everything a worker is configured with: the resources it
// uses, its timing, and how Run polls. Every field but AWS, Table, QueueURL
// and Handlers may stay zero for its default; package settings lists each
// field with its LEASEHOLD_* variable, default and limits (the table
// docs/worker.md shows), and NewWorkerFromEnv fills the zero fields from
// those variables. It is defined in internal/wiring, where its fields are
// documented, so that package leaseholdtest builds its executor from the
// same config by the same code (wiring.LifecycleConfig).
type WorkerConfig = wiring.WorkerConfig

// ErrConfig wraps every configuration error.
var ErrConfig = lifecycle.ErrConfig

// fromEnv fills cfg's zero fields from the LEASEHOLD_* variables of the
// settings table, read through getenv: what code set wins.
func fromEnv(cfg *WorkerConfig, getenv func(string) string) error {
	if err := settingstable.Load(cfg, settingstable.Worker, getenv); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return nil
}

// check rejects what neither lifecycle nor the store checks; newWorker
// calls it (NewWorker checks Table first: the tests' stores have none).
func check(cfg WorkerConfig) error {
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
	// metrics aggregates the attempts' metrics (WorkerConfig.Metrics; nil
	// when unset): HandleSQS writes them at the end of each batch, Run
	// every metrics.FlushEvery (runner.go).
	metrics *metrics.EMF

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
	store := dynamo.New(dynamodb.NewFromConfig(cfg.AWS), cfg.Table, lease.Options{
		Clock:         cfg.Clock,
		LeaseDuration: cmp.Or(cfg.LeaseDuration, defaults.LeaseDuration),
		Skew:          cfg.ClockSkew,
		DispatchGrace: cfg.DispatchGrace,
		Unlisted:      cfg.Unlisted,
		WorkQueue:     queues.NameFromURL(cfg.QueueURL),
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

// batchesInFlight is how many batches each of Run's pollers runs at once
// (eventsource.Config.InFlight): a poller starts the batch it received
// ahead while its last one's tasks still write their finishes, so that a
// batch's creates need not wait for the one before to end
// (docs/performance.md, "BenchmarkThroughputSim"). Run so handles at most
// Pollers × 2 batches, Pollers × 2 × Concurrency tasks, at once.
const batchesInFlight = 2

// newWorker builds a worker on store and q; NewWorker's, and the tests'.
func newWorker(store lease.Store, q lifecycle.SQSClient, cfg WorkerConfig) (*Worker, error) {
	if err := check(cfg); err != nil {
		return nil, err
	}
	lc := wiring.LifecycleConfig(cfg)
	lc.Store = store
	lc.SQS = q
	if cfg.PayloadBucket != "" {
		lc.Claims = &claimcheck.Checker{Blobs: &claimcheck.S3{Client: claimcheck.NewS3Client(cfg.AWS, ""), Bucket: cfg.PayloadBucket}}
	}
	lookup, _ := q.(queues.SQSClient)
	resolver := queues.NewResolver(lookup, cfg.QueueURL, lc.CallTimeout, cfg.QueueURLs...)
	lc.Queues = resolver
	var emf *metrics.EMF
	if cfg.Metrics != nil {
		emf = metrics.NewEMF(cfg.Metrics, lc.Clock)
		lc.Observer = emf
	}
	exec, err := lifecycle.New(lc)
	if err != nil {
		return nil, err
	}
	w := &Worker{
		exec: exec, store: store, log: lc.Logger, queues: resolver, metrics: emf,
		queueURL: cfg.QueueURL, queueURLs: distinct(cfg.QueueURLs),
		run: eventsource.Config{
			QueueURL: cfg.QueueURL, Logger: lc.Logger,
			Pollers: cfg.Pollers, InFlight: batchesInFlight, BatchSize: cfg.BatchSize, BatchWindow: cfg.BatchWindow,
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
//
// With WorkerConfig.Metrics set, the batch's metrics are written before it
// returns: one document per task kind of the batch, not one per task
// (internal/metrics), so that nothing is pending while Lambda freezes the
// process.
func (w *Worker) HandleSQS(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	resp, err := w.handleBatch(ctx, ev)
	if w.metrics != nil {
		w.metrics.Flush()
	}
	return resp, err
}

// handleBatch is HandleSQS without the metrics flush: Run hands its
// batches here and flushes on its own clock (metrics.FlushEvery).
func (w *Worker) handleBatch(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
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
