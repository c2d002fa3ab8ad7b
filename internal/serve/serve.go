// Package serve runs leasehold's functions as one long-lived process: the
// worker polling the work queue and sweeping for lost messages
// (leasehold.Worker.Run, whose recovery sweep is on unless SweepEvery is
// negative) and, when an intake queue is configured, the dispatcher
// consuming it, all stopped together. It is what `leasehold run` and `make
// demo` run; on AWS the same parts are separate Lambda functions and an
// EventBridge schedule.
package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/defaults"
	"github.com/leasehold/leasehold/internal/dispatch"
	"github.com/leasehold/leasehold/internal/eventsource"
)

// DefaultSweepEvery is how often the sweep runs when Config.SweepEvery is
// zero: as often as the scheduled dispatch function would.
const DefaultSweepEvery = defaults.SweepEvery

// ErrConfig wraps every configuration error.
var ErrConfig = errors.New("invalid serve configuration")

// PartError is the error of the part that stopped Run.
type PartError struct {
	Part     string // "worker" or "intake"
	QueueURL string // the queue the part polls (several: comma-separated)
	Err      error
}

func (e *PartError) Error() string { return fmt.Sprintf("%s on %s: %v", e.Part, e.QueueURL, e.Err) }

func (e *PartError) Unwrap() error { return e.Err }

// Config says what to run.
type Config struct {
	// Worker runs the tasks of the work queue. Required.
	Worker *leasehold.Worker

	// Dispatcher, if set, consumes IntakeQueueURL (its submissions become
	// tasks and dispatch tokens).
	Dispatcher     *dispatch.Dispatcher
	IntakeSQS      eventsource.SQSClient
	IntakeQueueURL string
	// Intake tunes how the intake queue is polled; QueueURL and Logger are
	// filled in.
	Intake eventsource.Config

	Logger *slog.Logger
}

// Run runs every configured part until ctx is done, then stops them
// gracefully (see leasehold.Worker.Run) and returns nil once all have
// stopped. If a part cannot start (a missing queue, a bad setting), the
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
	start("worker", strings.Join(cfg.Worker.QueueURLs(), ", "), cfg.Worker.Run)
	if intake != nil {
		start("intake", cfg.IntakeQueueURL, intake.Run)
	}
	wg.Wait()
	return firstErr
}
