package admin

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/dispatch"
	"github.com/leasehold/leasehold/internal/eventsource"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/dynamo"
	"github.com/leasehold/leasehold/internal/queues"
	"github.com/leasehold/leasehold/internal/schedule"
	iserve "github.com/leasehold/leasehold/internal/serve"
)

// RunConfig says what Run runs beside the worker.
type RunConfig struct {
	// Worker runs the tasks of its queues. Required. How it polls them and
	// how often it sweeps is its WorkerConfig's; its default work queue
	// (WorkerConfig.QueueURL) is also where the dispatcher and the fired
	// schedules send the tokens of tasks that name no queue.
	Worker *leasehold.Worker

	// IntakeQueueURL, when set, also runs the intake dispatcher on that
	// queue: each submission becomes a task in the Admin's table and a
	// dispatch token.
	IntakeQueueURL string
	// IntakeDLQURL receives invalid submissions with their reason; empty
	// leaves them to the intake queue's redrive policy.
	IntakeDLQURL string
	// IntakeInvocationTimeout is the budget of one batch of submissions
	// (default 60s, as the worker's).
	IntakeInvocationTimeout time.Duration

	// Schedules are fired from this process: each slot sends the token
	// EventBridge Scheduler would send.
	Schedules []Schedule
	// FireGroup, when not empty, also fires the leasehold schedules stored
	// in that schedule group, listed again every 30s: for a local stack,
	// which stores schedules but never fires them. Never set it beside a
	// real EventBridge Scheduler, which fires them already.
	FireGroup string

	// Logger receives the parts' JSON log lines (nil: none).
	Logger *slog.Logger
}

// Run runs the worker and, as configured, the intake dispatcher and the
// schedules until ctx is done, then stops them gracefully (see
// leasehold.Worker.Run) and returns nil once all have stopped. A part that
// cannot start stops the others: a bad configuration is an error matching
// leasehold.ErrConfig, a queue that does not exist a
// *leasehold.MissingResourceError.
func (a *Admin) Run(ctx context.Context, cfg RunConfig) error {
	if cfg.Worker == nil {
		return configError{errors.New("a worker is required")}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	sc := iserve.Config{Worker: cfg.Worker, Logger: log}
	if cfg.IntakeQueueURL != "" {
		d, err := dispatch.New(dispatch.Config{
			Store: dynamo.New(a.ddb, a.table, lease.Options{}), SQS: a.sqs,
			WorkQueueURL: cfg.Worker.QueueURL(), IntakeDLQURL: cfg.IntakeDLQURL,
			Logger: log.With("part", "dispatch"),
		})
		if err != nil {
			return configError{err}
		}
		sc.Dispatcher, sc.IntakeSQS, sc.IntakeQueueURL = d, a.sqs, cfg.IntakeQueueURL
		sc.Intake = eventsource.Config{InvocationTimeout: cfg.IntakeInvocationTimeout}
	}
	if len(cfg.Schedules) > 0 || cfg.FireGroup != "" {
		stop, err := a.fire(ctx, cfg, log.With("part", "schedule"))
		if err != nil {
			return configError{err}
		}
		defer stop()
	}
	err := iserve.Run(ctx, sc)
	var part *iserve.PartError
	switch {
	case errors.As(err, &part) && errors.Is(err, eventsource.ErrQueueNotFound):
		return a.missing("SQS", part.QueueURL, err)
	case errors.Is(err, iserve.ErrConfig):
		return configError{err}
	}
	return err
}

// fire starts firing the schedules: until ctx ends or the returned stop is
// called, which waits for the firer to return.
func (a *Admin) fire(ctx context.Context, cfg RunConfig, log *slog.Logger) (stop func(), err error) {
	sc := schedule.Config{
		SQS: a.sqs, QueueURL: cfg.Worker.QueueURL(), CallTimeout: a.callTimeout, Logger: log,
		// A resolver keeps the URLs it looked up: a slot's send costs no lookup.
		QueueURLOf: queues.NewResolver(a.sqs, cfg.Worker.QueueURL(), a.callTimeout).URL,
	}
	names := make([]string, 0, len(cfg.Schedules))
	for _, s := range cfg.Schedules {
		sc.Specs = append(sc.Specs, s.spec)
		names = append(names, s.spec.Name)
	}
	if cfg.FireGroup != "" {
		sc.List = a.ScheduleGroup(cfg.FireGroup).eb.Specs
	}
	log.Info("firing schedules", "schedules", names, "stored_group", cfg.FireGroup)
	return schedule.Start(ctx, sc)
}

// configError is a configuration error, printed as itself, that matches
// leasehold.ErrConfig.
type configError struct{ err error }

func (e configError) Error() string   { return e.err.Error() }
func (e configError) Unwrap() []error { return []error{e.err, leasehold.ErrConfig} }
