package leasehold

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/leasehold/leasehold/internal/eventsource"
	"github.com/leasehold/leasehold/settings"
)

// ErrQueueNotFound is returned (wrapped) by Run when a work queue it should
// poll does not exist, and by Client.Enqueue and EnqueueMany for a task whose
// queue (Queue, ClientConfig.KindQueues) does not exist.
var ErrQueueNotFound = eventsource.ErrQueueNotFound

// RunOption tunes Run: how the work queue is polled, the part that Lambda's
// SQS event source mapping does for a worker deployed as a function.
type RunOption func(*runOptions)

type runOptions struct {
	cfg        eventsource.Config
	sweepEvery time.Duration // 0: settings.DefaultSweepEvery; negative: no sweep
}

// WithSweep sets the period of the recovery sweep that Run performs
// alongside polling (default settings.DefaultSweepEvery, 1m; at least 100ms). Every
// sweep reads the sparse sweep index of the tasks table and sends a fresh
// dispatch token to this worker's queue for each task whose message was
// lost: a PENDING task still unclaimed DispatchGrace after it was due, or a
// RUNNING task whose holder stopped renewing (lease expiry + clock skew +
// DispatchGrace passed). Such a task is dispatched again within that time
// plus one period plus the sweep's own run time.
//
// Every process running Run sweeps; concurrent sweeps are safe (a
// conditional write lets one of them send each token, and the claim makes a
// duplicate token harmless), so recovery does not depend on any one process
// staying up. Idle, one sweep is one Query per shard of the sweep index
// (16), about 8 read units. See docs/running.md.
//
// The sweep sends each due task to the queue the task names (the default
// work queue when it names none), so workers serving different queues can
// share a table: any of them may sweep for all.
func WithSweep(every time.Duration) RunOption {
	return func(o *runOptions) {
		if every > 0 {
			o.sweepEvery = every
		}
	}
}

// sweepOption is WithSweep(d), or WithoutSweep for a negative d.
func sweepOption(d time.Duration) RunOption {
	if d < 0 {
		return WithoutSweep()
	}
	return WithSweep(d)
}

// WithoutSweep turns Run's recovery sweep off: for a process whose table is
// swept elsewhere (the scheduled dispatch function, or other processes) and
// that should not add its reads. Tasks whose message was lost then wait for
// that other sweeper.
func WithoutSweep() RunOption {
	return func(o *runOptions) { o.sweepEvery = -1 }
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
// LEASEHOLD_BATCH_SIZE, LEASEHOLD_BATCH_WINDOW, LEASEHOLD_INVOCATION_TIMEOUT,
// LEASEHOLD_SWEEP_EVERY, LEASEHOLD_RECEIVE_VISIBILITY and
// LEASEHOLD_LONG_POLL ask for; unset variables keep the defaults.
func RunOptionsFromEnv() ([]RunOption, error) {
	var opts []RunOption
	for _, v := range []struct {
		env string
		opt func(int) RunOption
	}{{settings.EnvPollers, WithPollers}, {settings.EnvBatchSize, WithBatchSize}} {
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
	}{
		{settings.EnvBatchWindow, WithBatchWindow}, {settings.EnvInvocationTimeout, WithInvocationTimeout}, {settings.EnvSweepEvery, sweepOption},
		{settings.EnvReceiveVisibility, WithReceiveVisibility}, {settings.EnvLongPoll, WithLongPoll},
	} {
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
// of as a Lambda function: it polls the work queue (or each of
// WorkerConfig.QueueURLs, one poller group per queue) the way Lambda's SQS
// event source mapping would, hands each batch to HandleSQS, and deletes the
// messages HandleSQS acknowledged. Alongside, it runs the recovery sweep
// every minute (see WithSweep; WithoutSweep turns it off), the part the
// scheduled dispatch function does on AWS, so tasks whose message was lost
// or whose holder died are dispatched again without anything else running.
// It returns nil once ctx is done and the batches in flight have ended, or
// an error if it cannot start (a bad option wraps ErrConfig; a missing queue
// wraps ErrQueueNotFound, and stops the other queues' pollers too).
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
	// One event source per queue served, each with the options given
	// (pollers, batch size, ...).
	urls := w.QueueURLs()
	runners := make([]*eventsource.Runner, len(urls))
	for i, u := range urls {
		c := o.cfg
		c.QueueURL = u
		r, err := eventsource.New(w.source, c, w.HandleSQS)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrConfig, err)
		}
		runners[i] = r
	}
	if o.sweepEvery >= 0 && w.sweeper == nil {
		return fmt.Errorf("%w: this worker cannot sweep (its store or SQS client lacks the calls); use WithoutSweep", ErrConfig)
	}
	// Every poller group and the sweep stop together: when ctx ends, or
	// when one poller group cannot start (its error is returned).
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	if o.sweepEvery >= 0 {
		wg.Go(func() { w.sweeper.SweepLoop(runCtx, o.sweepEvery) })
	}
	errs := make([]error, len(runners))
	for i, r := range runners {
		wg.Go(func() {
			if errs[i] = r.Run(runCtx); errs[i] != nil {
				stop()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// QueueURL is the default work queue (WorkerConfig.QueueURL).
func (w *Worker) QueueURL() string { return w.queueURL }

// QueueURLs lists the work queues Run polls: WorkerConfig.QueueURLs, or
// QueueURL alone when that is empty.
func (w *Worker) QueueURLs() []string {
	if len(w.queueURLs) == 0 {
		return []string{w.queueURL}
	}
	return slices.Clone(w.queueURLs)
}
