// Package serve runs leasehold's functions as one long-lived process: the
// worker polling the work queue (leasehold.Worker.Run) and, when an intake
// queue is configured, the dispatcher consuming it plus the periodic sweep,
// all stopped together. It is what `leasehold run` and `make demo` run; on
// AWS the same parts are separate Lambda functions and an EventBridge
// schedule.
package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/dispatch"
	"github.com/leasehold/leasehold/internal/eventsource"
)

// DefaultSweepEvery is how often the sweep runs when Config.SweepEvery is
// zero: as often as the scheduled dispatch function would.
const DefaultSweepEvery = time.Minute

// minSweepBudget is the least time one sweep is given.
const minSweepBudget = 15 * time.Second

// ErrConfig wraps every configuration error.
var ErrConfig = errors.New("invalid serve configuration")

// PartError is the error of the part that stopped Run.
type PartError struct {
	Part     string // "worker" or "intake"
	QueueURL string // the queue the part polls
	Err      error
}

func (e *PartError) Error() string { return fmt.Sprintf("%s on %s: %v", e.Part, e.QueueURL, e.Err) }

func (e *PartError) Unwrap() error { return e.Err }

// Config says what to run.
type Config struct {
	// Worker runs the tasks of the work queue. Required.
	Worker *leasehold.Worker
	// WorkerOptions tune how the work queue is polled.
	WorkerOptions []leasehold.RunOption

	// Dispatcher, if set, consumes IntakeQueueURL (its submissions become
	// tasks and dispatch tokens) and sweeps every SweepEvery.
	Dispatcher     *dispatch.Dispatcher
	IntakeSQS      eventsource.SQSClient
	IntakeQueueURL string
	// Intake tunes how the intake queue is polled; QueueURL and Logger are
	// filled in.
	Intake eventsource.Config
	// SweepEvery is the period of the sweep (default DefaultSweepEvery).
	// Negative turns the sweep off.
	SweepEvery time.Duration

	Logger *slog.Logger
}

// Run runs every configured part until ctx is done, then stops them
// gracefully (see leasehold.Worker.Run) and returns nil once all have
// stopped. If a part cannot start (a missing queue, a bad option), the
// others are stopped too and its error is returned as a *PartError.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Worker == nil {
		return fmt.Errorf("%w: a worker is required", ErrConfig)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var intake *eventsource.Runner
	if cfg.Dispatcher != nil {
		ic := cfg.Intake
		ic.QueueURL = cfg.IntakeQueueURL
		ic.Logger = log.With("part", "intake")
		r, err := eventsource.New(cfg.IntakeSQS, ic, cfg.Dispatcher.HandleIntake)
		if err != nil {
			return fmt.Errorf("%w: intake: %w", ErrConfig, err)
		}
		intake = r
	}

	// A part that fails stops the others; ctx ending stops them all.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	start := func(part, queueURL string, run func(context.Context) error) {
		wg.Go(func() {
			if err := run(ctx); err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = &PartError{Part: part, QueueURL: queueURL, Err: err}
				}
				mu.Unlock()
				cancel(err)
			}
		})
	}
	start("worker", cfg.Worker.QueueURL(), func(ctx context.Context) error { return cfg.Worker.Run(ctx, cfg.WorkerOptions...) })
	if intake != nil {
		start("intake", cfg.IntakeQueueURL, intake.Run)
		if cfg.SweepEvery >= 0 {
			every := cfg.SweepEvery
			if every == 0 {
				every = DefaultSweepEvery
			}
			start("sweep", "", func(ctx context.Context) error {
				sweepLoop(ctx, cfg.Dispatcher, every, log.With("part", "sweep"))
				return nil
			})
		}
	}
	wg.Wait()
	return firstErr
}

// sweepLoop sweeps at once and then every period until ctx is done. A sweep
// that fails is logged; the next one retries what it left.
func sweepLoop(ctx context.Context, d *dispatch.Dispatcher, every time.Duration, log *slog.Logger) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		// A sweep is not cut short by shutdown, only by its own budget:
		// one period, but at least minSweepBudget, because the dispatcher
		// starts no new page within its last 5 seconds.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), max(every, minSweepBudget))
		stats, err := d.Sweep(sctx, time.Now())
		cancel()
		switch {
		case err != nil:
			log.Warn("sweep incomplete", "error", err, "dispatched", stats.Dispatched, "failed", stats.Failed)
		case stats.Due > 0:
			log.Info("sweep", "due", stats.Due, "dispatched", stats.Dispatched, "raced", stats.Raced)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
