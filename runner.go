package leasehold

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/leasehold/leasehold/internal/eventsource"
)

// ErrQueueNotFound is returned (wrapped) by Run when the work queue does not
// exist.
var ErrQueueNotFound = eventsource.ErrQueueNotFound

// Environment variables read by RunOptionsFromEnv.
const (
	EnvPollers           = "LEASEHOLD_POLLERS"
	EnvBatchSize         = "LEASEHOLD_BATCH_SIZE"
	EnvBatchWindow       = "LEASEHOLD_BATCH_WINDOW"
	EnvInvocationTimeout = "LEASEHOLD_INVOCATION_TIMEOUT"
)

// RunOption tunes Run: how the work queue is polled, the part that Lambda's
// SQS event source mapping does for a worker deployed as a function.
type RunOption func(*runOptions)

type runOptions struct {
	cfg eventsource.Config
}

// WithPollers sets how many batches are received and run at the same time
// (default 2). With WithConcurrency tasks per batch, at most pollers x
// concurrency tasks run at once in this process.
func WithPollers(n int) RunOption {
	return func(o *runOptions) { o.cfg.Pollers = n }
}

// WithBatchSize sets the most messages handed over as one batch (default
// 10; above 10 needs WithBatchWindow).
func WithBatchSize(n int) RunOption {
	return func(o *runOptions) { o.cfg.BatchSize = n }
}

// WithBatchWindow sets how long a batch may keep gathering messages after
// its first one arrived (default 0: whatever one receive returns).
func WithBatchWindow(d time.Duration) RunOption {
	return func(o *runOptions) { o.cfg.BatchWindow = d }
}

// WithInvocationTimeout sets the budget of one batch, the counterpart of a
// Lambda function's timeout (default 60s, at most 15m). A task still running
// WithDeadlineMargin before it ends has its context cancelled with
// ErrDeadline and its lease released, so another attempt can start at once.
// A graceful stop waits at most this long for the batches in flight.
func WithInvocationTimeout(d time.Duration) RunOption {
	return func(o *runOptions) { o.cfg.InvocationTimeout = d }
}

// WithLongPoll sets the wait of each ReceiveMessage, in whole seconds up to
// 20s (the default).
func WithLongPoll(d time.Duration) RunOption {
	return func(o *runOptions) { o.cfg.WaitTime = d }
}

// WithReceiveVisibility overrides the queue's visibility timeout for the
// messages this process receives (whole seconds; default: the queue's).
// A message whose task is running stays hidden regardless: the worker
// extends its visibility at every lease renewal. A short value makes a
// message that was received but never processed (say, by a process that was
// killed) come back sooner.
func WithReceiveVisibility(d time.Duration) RunOption {
	return func(o *runOptions) { o.cfg.VisibilityTimeout = d }
}

// RunOptionsFromEnv returns the options that LEASEHOLD_POLLERS,
// LEASEHOLD_BATCH_SIZE, LEASEHOLD_BATCH_WINDOW and
// LEASEHOLD_INVOCATION_TIMEOUT ask for; unset variables keep the defaults.
func RunOptionsFromEnv() ([]RunOption, error) {
	var opts []RunOption
	for _, v := range []struct {
		env string
		opt func(int) RunOption
	}{{EnvPollers, WithPollers}, {EnvBatchSize, WithBatchSize}} {
		if s := os.Getenv(v.env); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil {
				return nil, fmt.Errorf("%w: %s=%q: %w", ErrConfig, v.env, s, err)
			}
			opts = append(opts, v.opt(n))
		}
	}
	for _, v := range []struct {
		env string
		opt func(time.Duration) RunOption
	}{{EnvBatchWindow, WithBatchWindow}, {EnvInvocationTimeout, WithInvocationTimeout}} {
		if s := os.Getenv(v.env); s != "" {
			d, err := time.ParseDuration(s)
			if err != nil {
				return nil, fmt.Errorf("%w: %s=%q: %w", ErrConfig, v.env, s, err)
			}
			opts = append(opts, v.opt(d))
		}
	}
	return opts, nil
}

// Run runs the worker as a long-lived process (ECS, EC2, a laptop) instead
// of as a Lambda function: it polls the work queue the way Lambda's SQS
// event source mapping would, hands each batch to HandleSQS, and deletes the
// messages HandleSQS acknowledged. It returns nil once ctx is done and the
// batches in flight have ended, or an error if it cannot start (a bad
// option wraps ErrConfig; a missing queue wraps ErrQueueNotFound).
//
// Stop it with a signal:
//
//	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
//	defer stop()
//	err := w.Run(ctx)
//
// When ctx is done Run receives no more messages, lets the tasks in flight
// run on under their own deadline (WithInvocationTimeout, minus
// WithDeadlineMargin, after which they are released for an immediate retry),
// records their outcomes, deletes their messages, and returns. A message that
// was received but not started comes back after its visibility timeout. A
// process killed before that (a second signal, the orchestrator's stop
// timeout) loses nothing either: its leases expire and other workers take
// the tasks over after the lease duration plus the clock-skew bound.
func (w *Worker) Run(ctx context.Context, opts ...RunOption) error {
	if w.source == nil {
		return fmt.Errorf("%w: the worker has no SQS client to poll with (build it with NewWorker)", ErrConfig)
	}
	o := runOptions{cfg: eventsource.Config{QueueURL: w.queueURL, Logger: w.log}}
	for _, opt := range opts {
		opt(&o)
	}
	timeout := cmp.Or(o.cfg.InvocationTimeout, eventsource.DefaultInvocationTimeout)
	if margin := w.exec.Config().DeadlineMargin; timeout <= margin {
		return fmt.Errorf("%w: invocation timeout %s must exceed the deadline margin %s", ErrConfig, timeout, margin)
	}
	r, err := eventsource.New(w.source, o.cfg, w.HandleSQS)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return r.Run(ctx)
}

// QueueURL is the work queue the worker is triggered by.
func (w *Worker) QueueURL() string { return w.queueURL }
