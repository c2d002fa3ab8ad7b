// Package settingstable is leasehold's one table of settings: for each,
// the config field it fills (WorkerConfig, ClientConfig or the dispatch
// function's Settings), its LEASEHOLD_* environment variable (a constant of
// package settings), its default (a constant of internal/defaults, which
// settings.Default publishes) and what it means. The environment entry
// points (NewWorkerFromEnv, the dispatch function, serve, `leasehold run`)
// read the environment by walking All with Load; the settings tables of
// docs/worker.md, docs/dispatch.md and docs/running.md are rendered from it
// by Markdown (and tested against it). Adding a setting is a constant in
// package settings (and its default in internal/defaults and
// settings.Defaults), one entry here, one field, and its use.
//
// The table is internal: a user of the module needs the names and the
// defaults, which package settings keeps public, not the machinery that
// ties them together.
package settingstable

import (
	"fmt"
	"time"

	"github.com/leasehold/leasehold/internal/defaults"
	"github.com/leasehold/leasehold/internal/durationtext"
	"github.com/leasehold/leasehold/settings"
)

// Kind says how a setting's environment value is written.
type Kind int

const (
	// String is taken as it is.
	String Kind = iota
	// List is comma-separated; blanks are dropped. The field is a []string.
	List
	// Duration is time.ParseDuration's ("90s", "2m"). The field is a
	// time.Duration.
	Duration
	// Int is a positive integer. The field is an int.
	Int
	// Pair is "A,B", two positive durations with A <= B. The field is a
	// func(attempt int) time.Duration (settings.ExponentialBackoff(A, B)), or
	// Field takes A and Field2 B.
	Pair
	// Switch is "on" or "off"; the field is a bool set by "off" (Unlisted
	// for LEASEHOLD_LISTING=off).
	Switch
	// Level is DEBUG, INFO, WARN or ERROR. The field is a *slog.Logger:
	// JSON lines on stderr at that level.
	Level
	// Rates is ParseRateLimits's QUEUE=N/PER list. The field is a
	// map[string]settings.RateLimit.
	Rates
	// Counts is ParseKindConcurrency's KIND=N list. The field is a
	// map[string]int.
	Counts
)

// Scope says whose configuration a setting belongs to.
type Scope int

const (
	// Worker settings are fields of leasehold.WorkerConfig.
	Worker Scope = 1 << iota
	// Client settings are fields of leasehold.ClientConfig.
	Client
	// Dispatch settings are fields of the dispatch function's
	// dispatch.Settings.
	Dispatch
	// Process settings are read by the off-Lambda process (`leasehold
	// run`, serve.RunFromEnv) and the leasehold command's schedule verbs,
	// where they are used; each has a flag of the command too.
	Process
)

// Setting is one row of the table.
type Setting struct {
	// Field is the config field the setting fills; "" for a setting only
	// the environment has (it is read where it is used).
	Field string
	// Field2, for a Pair whose field is not a func, takes the second value.
	Field2 string
	// Env is the environment variable; "" for a setting only code sets.
	Env string
	// Const, for a setting with neither field nor variable (a timeout code
	// applies), names the field of settings.Defaults that holds it.
	Const string
	Kind  Kind
	// Default is the typed default (a constant of internal/defaults), or nil.
	Default any
	// DefaultText says the default when Default cannot ("required", "the
	// queue's", ...); it wins over Default in the docs.
	DefaultText string
	// Doc says what the setting means, and its limits.
	Doc string
	For Scope
}

// All is the table, in the order the docs list it.
var All = []Setting{
	// Resources.
	{Field: "Table", Env: settings.EnvTable, Kind: String, DefaultText: "required", For: Worker | Client | Dispatch,
		Doc: "the tasks table"},
	{Field: "QueueURL", Env: settings.EnvWorkQueueURL, Kind: String, DefaultText: "required (client: or QueueName)", For: Worker | Client | Dispatch,
		Doc: "the default work queue: where tokens of tasks that name no queue go, and the queue Run polls unless QueueURLs is set"},
	{Field: "PayloadBucket", Env: settings.EnvPayloadBucket, Kind: String, DefaultText: "none (inline limits)", For: Worker | Client,
		Doc: "the S3 bucket where values over their inline limits are kept, up to 10 MiB each, the task's item holding a reference: payloads over 128 KiB, results over 64 KiB, steps' results that do not fit the steps' 64 KiB, callback answers, children's and chain links' payloads (docs/limits.md); values within the inline limits never touch it. template.yaml creates it (`PayloadBucket`) and passes it to the worker function; the worker needs `s3:GetObject` and `s3:PutObject` on its `tasks/*`"},
	{Field: "QueueName", Kind: String, For: Client,
		Doc: "used when QueueURL is empty: the default work queue's name, looked up with GetQueueUrl on first use"},
	{Field: "KindQueues", Kind: String, For: Client,
		Doc: "the queue name of each kind that does not go to the default work queue (the Queue option of one task overrides it)"},
	{Field: "QueueURLs", Env: settings.EnvServeQueueURLs, Kind: List, DefaultText: "QueueURL alone", For: Worker,
		Doc: "the work queues this worker serves, comma-separated: Run polls each, with one poller group per queue"},
	{Field: "DeadLetterQueueURL", Env: settings.EnvWorkDLQURL, Kind: String, DefaultText: "none", For: Worker | Dispatch,
		Doc: "receives messages that cannot name a task, with the reason in the `leasehold-reason` attribute; without it they are left to the queue's redrive policy. The recovery sweep sends what SQS moved there (no reason) back to the queue it came from, up to 3 times a message"},
	{Env: settings.EnvWorkDLQName, Kind: String, DefaultText: "the work queue's redrive target", For: Worker,
		Doc: "NewWorkerFromEnv only, without LEASEHOLD_WORK_DLQ_URL: the name of the work dead-letter queue to look up"},
	{Field: "NamedQueues", Env: settings.EnvNamedQueues, Kind: List, DefaultText: "none", For: Dispatch,
		Doc: "the queues other than the default that tasks may name, comma-separated, each by ARN or URL: the recovery sweep also reads the dead-letter queue each one's redrive policy names, and sends what SQS moved there back to the queue it came from, up to 3 times a message"},
	{Env: settings.EnvIntakeQueueURL, Kind: String, DefaultText: "none: no dispatcher", For: Process,
		Doc: "`leasehold run` (`--intake-queue-url`) and serve.RunFromEnv: the intake queue; with it the process also runs the dispatcher on that queue (on Lambda the dispatch function's event source names it)"},
	{Field: "IntakeDLQURL", Env: settings.EnvIntakeDLQURL, Kind: String, DefaultText: "none", For: Dispatch | Process,
		Doc: "receives invalid submissions, with the reason; without it they are left to the intake queue's redrive policy"},

	// Tasks and leases.
	{Field: "LeaseDuration", Env: settings.EnvLeaseDuration, Kind: Duration, Default: defaults.LeaseDuration, For: Worker,
		Doc: "how long a claim or renewal holds a task; at least 2 × RenewBefore"},
	{Field: "RenewBefore", Env: settings.EnvRenewBefore, Kind: Duration, Default: defaults.RenewBefore, For: Worker,
		Doc: "how long before expiry the lease is renewed; > 0"},
	{Field: "MaxAttempts", Env: settings.EnvMaxAttempts, Kind: Int, Default: defaults.MaxAttempts, For: Worker | Client | Dispatch,
		Doc: "attempts of a task that names none (an inline token, an enqueue without MaxAttempts, a submission); 1..100"},
	{Field: "Concurrency", Env: settings.EnvConcurrency, Kind: Int, Default: defaults.Concurrency, For: Worker,
		Doc: "messages of one batch processed at once; ≥ 1 (with Run, at most Pollers × 2 × Concurrency tasks at once)"},
	{Field: "ClockSkew", Env: settings.EnvClockSkew, Kind: Duration, Default: defaults.ClockSkew, For: Worker,
		Doc: "bound on the clock difference between workers: an expired lease is taken over only after this much more; ≥ 0"},
	{Field: "DeadlineMargin", Env: settings.EnvDeadlineMargin, Kind: Duration, Default: defaults.DeadlineMargin, For: Worker,
		Doc: "the handler's context ends this long before the invocation deadline, so the lease can be released; ≥ 0"},
	{Field: "Backoff", Env: settings.EnvBackoff, Kind: Pair, Default: [2]time.Duration{defaults.BackoffBase, defaults.BackoffMax}, For: Worker,
		Doc: "the delay before attempt n+1 after attempt n failed: any `func(attempt int) time.Duration`; the variable, `BASE,MAX`, sets `ExponentialBackoff(BASE, MAX)` (doubling, each delay drawn from [d/2, d])"},
	{Field: "VisibilityMargin", Env: settings.EnvVisibilityMargin, Kind: Duration, Default: defaults.VisibilityMargin, For: Worker,
		Doc: "added to the lease when a message is hidden; ≥ 0"},
	{Field: "DispatchGrace", Env: settings.EnvDispatchGrace, Kind: Duration, Default: defaults.DispatchGrace, For: Worker | Dispatch,
		Doc: "how long past its expected start a task may go unclaimed before the sweep dispatches it again; the same for workers and dispatch: it places tasks in the sweep index"},
	{Field: "ReplaceAtReceiveCount", Env: settings.EnvReplaceAtReceiveCount, Kind: Int, Default: defaults.ReplaceAtReceiveCount, For: Worker,
		Doc: "from this receive count a message whose task cannot run now is replaced by a fresh token; ≥ 1, at most the work queue's maxReceiveCount − 2"},
	{Field: "UnknownKindBackoffMin", Field2: "UnknownKindBackoffMax", Env: settings.EnvUnknownKindBackoff, Kind: Pair,
		Default: [2]time.Duration{defaults.UnknownKindBackoffMin, defaults.UnknownKindBackoffMax}, For: Worker,
		Doc: "bounds of the wait before a task of a kind this worker has no handler for is offered again (`MIN,MAX`; min > 0, max ≥ min)"},
	{Field: "UnknownKindLimit", Env: settings.EnvUnknownKindLimit, Kind: Duration, Default: defaults.UnknownKindLimit, For: Worker,
		Doc: "how long a task's kind may stay unknown before the task fails; > 0"},
	{Field: "WaitTimeout", Env: settings.EnvWaitTimeout, Kind: Duration, Default: defaults.WaitTimeout, For: Worker,
		Doc: "the deadline of a wait for children or dependencies that names none; at it the waiting task fails; 0 < d ≤ 365 days"},
	{Field: "RateLimits", Env: settings.EnvRateLimits, Kind: Rates, DefaultText: "none", For: Worker,
		Doc: "per queue, at most N tasks start in each window, across every worker of the table: `QUEUE=N/PER,...`, PER `s`, `m`, `h` or whole seconds, `N/PER` alone for the default work queue (`50/s,reports=10/10s`); one write unit per start; a task held back uses no attempt and waits on its queue (docs/worker.md, \"Flow control\")"},
	{Field: "KindConcurrency", Env: settings.EnvKindConcurrency, Kind: Counts, DefaultText: "none", For: Worker,
		Doc: "per kind, at most N attempts run at once across every worker of the table: `KIND=N,...`, N from 1 to 100 (`resize=3,report=1`); a task held back uses no attempt and is offered again later (docs/worker.md, \"Flow control\")"},
	{Field: "Unlisted", Env: settings.EnvListing, Kind: Switch, DefaultText: "on (listed)", For: Worker | Client | Dispatch,
		Doc: "`off` creates tasks without a listing entry (one write unit less each): `leasehold list` and Client.List do not show them"},
	{Field: "DispatchConcurrency", Env: settings.EnvDispatchConcurrency, Kind: Int, Default: defaults.DispatchConcurrency, For: Dispatch,
		Doc: "submissions of a batch processed at once; also token batches and sweep marks in flight"},
	{Field: "SweepConcurrency", Env: settings.EnvSweepConcurrency, Kind: Int, Default: defaults.SweepConcurrency, For: Dispatch,
		Doc: "shards swept at once"},

	// The process.
	{Field: "Logger", Env: settings.EnvLogLevel, Kind: Level, DefaultText: "JSON on stderr at INFO", For: Worker | Dispatch,
		Doc: "the structured logger; the variable (DEBUG, INFO, WARN or ERROR) sets JSON lines on stderr at that level"},
	{Field: "Metrics", For: Worker, DefaultText: "off",
		Doc: "receives CloudWatch metrics in embedded metric format, one JSON document per task kind of each batch (every 10 s under `Run`; os.Stdout on Lambda)"},
	{Field: "Owner", For: Worker, DefaultText: "host name and a random suffix",
		Doc: "names the worker in lease_owner"},
	{Field: "Clock", For: Worker | Client, DefaultText: "the real clock",
		Doc: "the time source; for tests"},
	{Field: "Middleware", For: Worker, DefaultText: "none",
		Doc: "wraps every handler run, the first outermost: `func(ctx, leasehold.HandlerRun, next) ([]byte, error)`, for logging, metrics, tracing, metadata or an error policy shared by every kind"},
	{Field: "TracerProvider", For: Worker | Client, DefaultText: "none: no tracing",
		Doc: "OpenTelemetry tracing: spans for attempts, claims, renewals, ends, steps and awaits, and the trace context carried in every token (docs/observability.md); package otelenv builds one from the OTEL_* environment and traces the AWS calls too"},

	{Env: settings.EnvMetrics, Kind: String, DefaultText: "off", For: Process,
		Doc: "`leasehold run` (`--metrics`): `true` writes the worker's CloudWatch metrics to stdout in embedded metric format"},

	// Remote calls: every call to AWS has a timeout. Code sets these; no
	// variable changes them.
	{Const: "CallTimeout", Kind: Duration, Default: defaults.CallTimeout, For: Worker | Dispatch,
		Doc: "bounds each DynamoDB or SQS call made while tasks are processed: store writes, token sends, visibility changes, queue lookups, sweep pages, pause checks"},
	{Const: "ReceiveCallTimeout", Kind: Duration, Default: defaults.ReceiveCallTimeout, For: Worker | Process,
		Doc: "Run: bounds each SQS call of the pollers and each HTTP round trip of `leasehold run`; above the longest long poll (20s)"},
	{Const: "ClientCallTimeout", Kind: Duration, Default: defaults.ClientCallTimeout, For: Worker | Dispatch | Process,
		Doc: "bounds each start-up call of a process (credential checks, queue and dead-letter queue lookups) and each call of the schedule firer (`--fire-schedules`, `--schedule`) and of the leasehold command (`--call-timeout`)"},

	// Run: polling, the part Lambda's event source mapping does.
	{Field: "Pollers", Env: settings.EnvPollers, Kind: Int, Default: defaults.Pollers, For: Worker,
		Doc: "Run: receive loops; each runs up to two of its batches at once (the next starts while the last one's tasks write their finishes) and receives its next batch while they run"},
	{Field: "BatchSize", Env: settings.EnvBatchSize, Kind: Int, Default: defaults.BatchSize, For: Worker,
		Doc: "Run: the most messages handed over as one batch; above 10 needs BatchWindow"},
	{Field: "BatchWindow", Env: settings.EnvBatchWindow, Kind: Duration, DefaultText: "0 (what one receive returns)", For: Worker,
		Doc: "Run: how long a batch may keep gathering messages after its first one; at most 5m"},
	{Field: "InvocationTimeout", Env: settings.EnvInvocationTimeout, Kind: Duration, Default: defaults.InvocationTimeout, For: Worker,
		Doc: "Run: the budget of one batch, like a Lambda function's timeout; more than DeadlineMargin, at most 15m"},
	{Field: "LongPoll", Env: settings.EnvLongPoll, Kind: Duration, Default: defaults.LongPoll, For: Worker,
		Doc: "Run: the wait of each ReceiveMessage, whole seconds up to 20s"},
	{Field: "ReceiveVisibility", Env: settings.EnvReceiveVisibility, Kind: Duration, DefaultText: "the queue's", For: Worker,
		Doc: "Run: overrides the queue's visibility timeout for received messages (whole seconds); running tasks stay hidden regardless"},
	{Field: "SweepEvery", Env: settings.EnvSweepEvery, Kind: Duration, Default: defaults.SweepEvery, For: Worker,
		Doc: "Run: the period of the recovery sweep that re-dispatches tasks whose message was lost (at least 100ms); negative turns the sweep off"},

	// Schedules: the leasehold command's schedule verbs and the firer of
	// `leasehold run`.
	{Env: settings.EnvFireSchedules, Kind: String, DefaultText: "off", For: Process,
		Doc: "`leasehold run` (`--fire-schedules`): `true` also fires the schedules stored in the schedule group, for a local stack, which stores schedules but never fires them"},
	{Env: settings.EnvScheduleGroup, Kind: String, DefaultText: "`default`", For: Process,
		Doc: "`leasehold schedule` (`--group`) and `leasehold run --fire-schedules` (`--schedule-group`): the EventBridge Scheduler group (template output ScheduleGroupName)"},
	{Env: settings.EnvSchedulerRoleARN, Kind: String, DefaultText: "required on AWS; a placeholder on a local stack", For: Process,
		Doc: "`leasehold schedule create` (`--role-arn`): the role EventBridge Scheduler assumes to send to the queue (template output SchedulerRoleArn)"},
	{Env: settings.EnvScheduleDLQARN, Kind: String, DefaultText: "none", For: Process,
		Doc: "`leasehold schedule create` (`--dlq-arn`): the queue of slots EventBridge could not deliver (template output ScheduleDeadLetterQueueArn)"},

	// The client.
	{Field: "CallTimeout", Kind: Duration, Default: defaults.ClientCallTimeout, For: Client,
		Doc: "bounds each call to DynamoDB or SQS; > 0"},
	{Field: "EnqueueConcurrency", Kind: Int, Default: defaults.EnqueueConcurrency, For: Client,
		Doc: "calls EnqueueMany makes at once; ≥ 0"},
	{Field: "Endpoint", Kind: String, DefaultText: "the SDK's", For: Client,
		Doc: "sends every DynamoDB and SQS call to this URL (a local stack), whatever the AWS config says"},
}

// DefaultOf renders a setting's default as the docs show it.
func (s Setting) DefaultOf() string {
	if s.DefaultText != "" {
		return s.DefaultText
	}
	switch d := s.Default.(type) {
	case nil:
		return "none"
	case time.Duration:
		return durationtext.Format(d)
	case [2]time.Duration:
		return durationtext.Format(d[0]) + "," + durationtext.Format(d[1])
	default:
		return fmt.Sprint(d)
	}
}
