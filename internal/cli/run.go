package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/smithy-go/logging"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/admin"
	"github.com/leasehold/leasehold/examples"
	"github.com/leasehold/leasehold/internal/cli/rules"
	"github.com/leasehold/leasehold/otelenv"
	"github.com/leasehold/leasehold/settings"
)

// Environment variables of `leasehold run` beyond the global ones.
const (
	EnvWorkDLQURL     = settings.EnvWorkDLQURL     // LEASEHOLD_WORK_DLQ_URL
	EnvIntakeQueueURL = settings.EnvIntakeQueueURL // LEASEHOLD_INTAKE_QUEUE_URL
	EnvIntakeDLQURL   = settings.EnvIntakeDLQURL   // LEASEHOLD_INTAKE_DLQ_URL
	EnvSweepEvery     = settings.EnvSweepEvery     // LEASEHOLD_SWEEP_EVERY
	EnvLogLevel       = settings.EnvLogLevel       // LEASEHOLD_LOG_LEVEL
	EnvMetrics        = settings.EnvMetrics        // LEASEHOLD_METRICS

	DefaultWorkDLQName = "leasehold-work-dlq"
)

// runFlags are the flags of `leasehold run`. Each falls back to its
// environment variable, then to the library's default.
type runFlags struct {
	dlqURL, intakeURL, intakeDLQURL string
	serveQueues                     []string
	sweepEvery                      time.Duration
	logLevel                        string
	metrics                         bool
	schedules                       []string
	fireSchedules                   bool
	scheduleGroup                   string

	pollers, batchSize, concurrency, maxAttempts       int
	batchWindow, invocationTimeout, lease, renewBefore time.Duration
}

func init() { register((*app).runCommand) }

func (a *app) runCommand() *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the worker (and optionally the dispatcher) as a long-lived process",
		Long: `run is the worker Lambda as a long-lived process (ECS, EC2, a laptop): it polls
the work queue as Lambda's SQS event source mapping would, runs the bundled
example task kinds (greet, upper, flaky, sleep), renews leases, records
results and deletes what it processed. Every --sweep-every (default 1m) it
also sweeps the table for tasks whose message was lost or whose worker died
and dispatches them again (every process sweeps; concurrent sweeps are safe;
docs/running.md gives the bound and the cost).

With an intake queue (--intake-queue-url or LEASEHOLD_INTAKE_QUEUE_URL) it
also runs the dispatcher: submissions on the intake queue become tasks and
dispatch tokens.

--serve-queue NAME (repeatable) polls the work queues of those names instead
of the work queue, one poller group each; the work queue (--queue-url) stays
the default queue of tasks that name none. Retries and sweeps go to each
task's own queue.

SIGTERM or Ctrl-C stops it gracefully: no new messages are received, the
tasks in flight finish (or are released at their deadline, --invocation-timeout
minus the deadline margin), their outcomes are recorded, and it exits 0. A
second signal kills it at once; the leases it held then expire and other
workers take the tasks over. To run your own task kinds, call Worker.Run in
your own main (docs/running.md).

--schedule NAME=EXPR;kind=KIND[;...] (repeatable) fires a schedule from this
process: each slot sends the inline token EventBridge Scheduler would send,
id sched:NAME:<slot time>, so a slot sent twice runs once; rates in seconds
are allowed here, e.g. 'tick=rate(10 seconds);kind=greet;payload={"name":"tick"}'.
--fire-schedules (env ` + EnvFireSchedules + `=true) also fires the leasehold
schedules stored in the EventBridge Scheduler group (--schedule-group, env
` + EnvScheduleGroup + `), listed again every 30s: for a local stack, which
stores schedules but never fires them. Never use it beside a real
EventBridge, which fires them already. Missed slots follow each schedule's
catch-up policy (docs/workflows-schedules.md).

Logs are JSON lines on stderr; with --metrics, CloudWatch metrics in embedded
metric format are JSON lines on stdout (CloudWatch Logs extracts them, e.g.
from ECS's awslogs driver).`,
		Example: `  eval "$(scripts/stack.sh env)"
  leasehold run                                   # worker on leasehold-work
  leasehold run --intake-queue-url "$(aws sqs get-queue-url --queue-name leasehold-intake --query QueueUrl --output text)"
  leasehold run --serve-queue leasehold-images --serve-queue leasehold-work
  LEASEHOLD_POLLERS=4 LEASEHOLD_CONCURRENCY=20 leasehold run --invocation-timeout 5m
  leasehold run --schedule 'tick=rate(10 seconds);kind=greet;payload={"name":"tick"}'
  leasehold run --fire-schedules                  # fire what leasehold schedule create stored locally`,
		Args: posArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return a.run(cmd.Context(), cmd.Flags(), f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.dlqURL, "dlq-url", "", "work dead-letter queue for messages that name no task (env "+EnvWorkDLQURL+"; default: the queue named "+DefaultWorkDLQName+" if it exists)")
	fl.StringVar(&f.intakeURL, "intake-queue-url", "", "intake queue: also run the dispatcher (env "+EnvIntakeQueueURL+")")
	fl.StringArrayVar(&f.serveQueues, "serve-queue", nil, "poll the work queue of this NAME instead of the work queue; repeat for several")
	fl.StringVar(&f.intakeDLQURL, "intake-dlq-url", "", "intake dead-letter queue for invalid submissions (env "+EnvIntakeDLQURL+")")
	fl.DurationVar(&f.sweepEvery, "sweep-every", 0, "period of the recovery sweep, with or without an intake queue; negative turns it off (env "+EnvSweepEvery+"; default 1m)")
	fl.IntVar(&f.pollers, "pollers", 0, "batches received and run at once (env "+settings.EnvPollers+"; default 2)")
	fl.IntVar(&f.batchSize, "batch-size", 0, "most messages per batch (env "+settings.EnvBatchSize+"; default 10)")
	fl.DurationVar(&f.batchWindow, "batch-window", 0, "time to gather a batch (env "+settings.EnvBatchWindow+"; default 0)")
	fl.DurationVar(&f.invocationTimeout, "invocation-timeout", 0, "budget of one batch, like a Lambda timeout (env "+settings.EnvInvocationTimeout+"; default 60s)")
	fl.IntVar(&f.concurrency, "concurrency", 0, "tasks of one batch run at once (env "+settings.EnvConcurrency+"; default 10)")
	fl.DurationVar(&f.lease, "lease-duration", 0, "lease of a claim or renewal (env "+settings.EnvLeaseDuration+"; default 20s)")
	fl.DurationVar(&f.renewBefore, "renew-before", 0, "renew this long before the lease expires (env "+settings.EnvRenewBefore+"; default 10s)")
	fl.IntVar(&f.maxAttempts, "max-attempts", 0, "attempts of an inline task that names none (env "+settings.EnvMaxAttempts+"; default 5)")
	fl.StringVar(&f.logLevel, "log-level", "", "debug, info, warn or error (env "+EnvLogLevel+"; default info)")
	fl.BoolVar(&f.metrics, "metrics", false, "write CloudWatch metrics (embedded metric format) to stdout (env "+EnvMetrics+"=true)")
	fl.StringArrayVar(&f.schedules, "schedule", nil, "fire this schedule, NAME=EXPR;kind=KIND[;catch-up=P][;timezone=TZ][;queue=Q][;payload=JSON]; repeat for several")
	fl.BoolVar(&f.fireSchedules, "fire-schedules", false, "also fire the schedules stored in EventBridge Scheduler's group, for a local stack (env "+EnvFireSchedules+"=true)")
	fl.StringVar(&f.scheduleGroup, "schedule-group", "", "the group --fire-schedules lists (env "+EnvScheduleGroup+"; default "+DefaultGroup+")")
	return cmd
}

// run wires and runs the worker and, with an intake queue, the dispatcher.
func (a *app) run(ctx context.Context, fl *pflag.FlagSet, f runFlags) error {
	// After the first signal has started the graceful stop, the next one
	// takes the default action: the process ends at once.
	context.AfterFunc(ctx, func() { signal.Reset(os.Interrupt, syscall.SIGTERM) })

	v := flagEnv{a: a, fl: fl}
	dlqURL := v.str("dlq-url", f.dlqURL, EnvWorkDLQURL)
	intakeURL := v.str("intake-queue-url", f.intakeURL, EnvIntakeQueueURL)
	intakeDLQURL := v.str("intake-dlq-url", f.intakeDLQURL, EnvIntakeDLQURL)
	level := v.str("log-level", f.logLevel, EnvLogLevel)
	var lvl slog.Level
	if level != "" {
		if err := lvl.UnmarshalText([]byte(level)); err != nil {
			return usageErrorf("--log-level %q: want debug, info, warn or error", level)
		}
	}
	// The flags win over their variables; every other worker setting
	// comes from its variable (package settings) when NewWorker's config is
	// filled below.
	wc := leasehold.WorkerConfig{
		Concurrency:       v.int("concurrency", f.concurrency, settings.EnvConcurrency),
		MaxAttempts:       v.int("max-attempts", f.maxAttempts, settings.EnvMaxAttempts),
		LeaseDuration:     v.dur("lease-duration", f.lease, settings.EnvLeaseDuration),
		RenewBefore:       v.dur("renew-before", f.renewBefore, settings.EnvRenewBefore),
		Pollers:           v.int("pollers", f.pollers, settings.EnvPollers),
		BatchSize:         v.int("batch-size", f.batchSize, settings.EnvBatchSize),
		BatchWindow:       v.dur("batch-window", f.batchWindow, settings.EnvBatchWindow),
		InvocationTimeout: v.dur("invocation-timeout", f.invocationTimeout, settings.EnvInvocationTimeout),
		SweepEvery:        v.dur("sweep-every", f.sweepEvery, EnvSweepEvery),
	}
	if v.bool("metrics", f.metrics, EnvMetrics) {
		wc.Metrics = a.io.Out
	}
	fireStored := v.bool("fire-schedules", f.fireSchedules, EnvFireSchedules)
	scheduleGroup := v.str("schedule-group", f.scheduleGroup, EnvScheduleGroup)
	if v.err != nil {
		return v.err
	}
	var specs []admin.Schedule
	for _, sv := range f.schedules {
		s, err := parseScheduleFlag(sv)
		if err != nil {
			return err
		}
		specs = append(specs, s)
	}
	for _, name := range f.serveQueues {
		if err := rules.CheckQueueName(name); err != nil {
			return usageErrorf("--serve-queue: %v", err)
		}
	}

	cfg, err := a.awsConfig(ctx)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(a.io.Err, &slog.HandlerOptions{Level: lvl}))
	cfg.Logger = sdkLogger{log.With("part", "aws-sdk")}
	// One HTTP round trip of the runner is bounded above the 20s long poll
	// of ReceiveMessage, which the global --call-timeout would cut short.
	cfg.HTTPClient = rules.HTTPClient(settings.Default().ReceiveCallTimeout)
	if a.endpoint != "" {
		cfg.BaseEndpoint = aws.String(a.endpoint)
	}
	adm := admin.New(admin.Config{AWS: cfg, Table: a.table, CallTimeout: a.callTimeout})
	workURL := a.queueURL
	if workURL == "" {
		if workURL, err = adm.QueueURL(ctx, DefaultWorkQueueName); err != nil {
			return err
		}
		if dlqURL == "" && !fl.Changed("dlq-url") {
			// Optional: without it, malformed messages are left to the
			// queue's redrive policy.
			if url, err := adm.QueueURL(ctx, DefaultWorkDLQName); err == nil {
				dlqURL = url
			}
		}
	}

	var serveURLs []string
	for _, name := range f.serveQueues {
		u, err := adm.QueueURL(ctx, name)
		if err != nil {
			return err
		}
		serveURLs = append(serveURLs, u)
	}

	// Fail fast when the tasks table does not exist. Any other answer (a
	// role without DescribeTable, say) is only logged: the worker's own
	// calls will tell.
	switch err := adm.CheckTable(ctx); {
	case errors.As(err, new(*leasehold.MissingResourceError)), errors.As(err, new(*leasehold.UnreachableError)):
		return err
	case err != nil:
		log.Warn("could not check the tasks table", "table", a.table, "error", err)
	}
	hs := leasehold.NewHandlers()
	examples.Register(hs)
	wc.AWS, wc.Table, wc.QueueURL, wc.QueueURLs, wc.DeadLetterQueueURL, wc.Handlers = cfg, a.table, workURL, serveURLs, dlqURL, hs
	wc.Logger = log.With("part", "worker")
	if err := rules.WorkerFromEnv(&wc); err != nil {
		return usageError{fmt.Errorf("%w: %w", leasehold.ErrConfig, err)}
	}
	tp, err := a.tracer(ctx)
	if err != nil {
		return err
	}
	otelenv.Worker(&wc, tp)
	w, err := leasehold.NewWorker(wc)
	if err != nil {
		return usageError{err}
	}
	rc := admin.RunConfig{
		Worker:         w,
		IntakeQueueURL: intakeURL, IntakeDLQURL: intakeDLQURL, IntakeInvocationTimeout: wc.InvocationTimeout,
		Schedules: specs, Logger: log,
	}
	if fireStored {
		rc.FireGroup = scheduleGroup
		if rc.FireGroup == "" {
			rc.FireGroup = DefaultGroup
		}
	}
	log.Info("leasehold run starting", "table", a.table, "work_queue", workURL, "serves", w.QueueURLs(),
		"intake_queue", intakeURL, "kinds", hs.Kinds())
	switch err := adm.Run(ctx, rc); {
	case errors.Is(err, leasehold.ErrConfig):
		return usageError{err}
	case err != nil:
		return err
	}
	log.Info("leasehold run stopped")
	return nil
}

// flagEnv reads a flag if it was given, else its environment variable. The
// first bad value is kept in err.
type flagEnv struct {
	a   *app
	fl  *pflag.FlagSet
	err error
}

func (v *flagEnv) raw(name, env string) (string, bool) {
	if v.fl.Changed(name) {
		return "", false
	}
	s := v.a.io.Getenv(env)
	return s, s != ""
}

func (v *flagEnv) str(name, flag, env string) string {
	if s, ok := v.raw(name, env); ok {
		return s
	}
	return flag
}

func (v *flagEnv) int(name string, flag int, env string) int {
	return parseFlagEnv(v, name, flag, env, strconv.Atoi, "a number")
}

func (v *flagEnv) bool(name string, flag bool, env string) bool {
	return parseFlagEnv(v, name, flag, env, strconv.ParseBool, "true or false")
}

func (v *flagEnv) dur(name string, flag time.Duration, env string) time.Duration {
	return parseFlagEnv(v, name, flag, env, time.ParseDuration, "a duration such as 30s")
}

// parseFlagEnv is env parsed by parse when the flag name was not set and
// env is, else flag. A value parse refuses is v's error (the first one),
// which says it is not what.
func parseFlagEnv[T any](v *flagEnv, name string, flag T, env string, parse func(string) (T, error), what string) T {
	s, ok := v.raw(name, env)
	if !ok {
		return flag
	}
	x, err := parse(s)
	if err != nil && v.err == nil {
		v.err = usageErrorf("%s=%q is not %s", env, s, what)
	}
	return x
}

// sdkLogger puts the SDK's log lines into the JSON log at DEBUG: they are
// the SDK's view of a failure the worker logs and handles itself.
type sdkLogger struct{ log *slog.Logger }

func (l sdkLogger) Logf(c logging.Classification, format string, v ...any) {
	l.log.Debug(fmt.Sprintf(format, v...), "sdk_level", string(c))
}
