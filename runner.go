package leasehold

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/leasehold/leasehold/internal/eventsource"
	"github.com/leasehold/leasehold/internal/metrics"
)

// ErrQueueNotFound is returned (wrapped) by Run when a work queue it should
// poll does not exist, and by Client.Enqueue and EnqueueMany for a task whose
// queue (Queue, ClientConfig.KindQueues) does not exist.
var ErrQueueNotFound = eventsource.ErrQueueNotFound

// Run runs the worker as a long-lived process (ECS, EC2, a laptop) instead
// of as a Lambda function: it polls the work queue (or each of
// WorkerConfig.QueueURLs, one poller group per queue) the way Lambda's SQS
// event source mapping would, hands each batch to HandleSQS, and deletes the
// messages HandleSQS acknowledged. Its metrics (WorkerConfig.Metrics) are
// written every 10 seconds rather than per batch, and once more before it
// returns. Alongside, it runs the recovery sweep
// every minute (WorkerConfig.SweepEvery; negative turns it off), the part the
// scheduled dispatch function does on AWS, so tasks whose message was lost
// or whose holder died are dispatched again without anything else running.
// It returns nil once ctx is done and the batches in flight have ended, or
// an error if it cannot start (a bad setting wraps ErrConfig; a missing queue
// wraps ErrQueueNotFound, and stops the other queues' pollers too).
//
// Stop it with a signal:
//
//	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
//	defer stop()
//	err := w.Run(ctx)
//
// When ctx is done Run receives no more messages, lets the tasks in flight
// run on under their own deadline (InvocationTimeout, minus
// DeadlineMargin, after which they are released for an immediate retry),
// records their outcomes, deletes their messages, and returns. A message that
// was received but not started comes back after its visibility timeout. A
// process killed before that (a second signal, the orchestrator's stop
// timeout) loses nothing either: its leases expire and other workers take
// the tasks over after the lease duration plus the clock-skew bound.
func (w *Worker) Run(ctx context.Context) error {
	if w.source == nil {
		return fmt.Errorf("%w: the worker has no SQS client to poll with (build it with NewWorker)", ErrConfig)
	}
	timeout := cmp.Or(w.run.InvocationTimeout, eventsource.DefaultInvocationTimeout)
	if margin := w.exec.Config().DeadlineMargin; timeout <= margin {
		return fmt.Errorf("%w: invocation timeout %s must exceed the deadline margin %s", ErrConfig, timeout, margin)
	}
	// One event source per queue served, each with the options given
	// (pollers, batch size, ...).
	urls := w.QueueURLs()
	runners := make([]*eventsource.Runner, len(urls))
	for i, u := range urls {
		c := w.run
		c.QueueURL = u
		if w.pauses != nil {
			// A paused queue (leasehold pause: its PausedTag) gets no
			// receive; its tags are read at most every 2 s.
			c.Paused = func(ctx context.Context) bool { return w.pauses.Paused(ctx, u) }
		}
		r, err := eventsource.New(w.source, c, w.handleBatch)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrConfig, err)
		}
		runners[i] = r
	}
	if w.sweepEvery >= 0 && w.sweeper == nil {
		return fmt.Errorf("%w: this worker cannot sweep (its store or SQS client lacks the calls); set SweepEvery negative", ErrConfig)
	}
	// Every poller group and the sweep stop together: when ctx ends, or
	// when one poller group cannot start (its error is returned).
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	if w.metrics != nil {
		// The metrics are written every FlushEvery and once more after the
		// last batch has ended: the flusher stops only when the pollers
		// have (this defer runs after wg.Wait below).
		flushCtx, stopFlush := context.WithCancel(context.WithoutCancel(ctx))
		var flusher sync.WaitGroup
		flusher.Go(func() { w.metrics.FlushLoop(flushCtx, metrics.FlushEvery) })
		defer func() {
			stopFlush()
			flusher.Wait()
		}()
	}
	var wg sync.WaitGroup
	if w.sweepEvery >= 0 {
		wg.Go(func() { w.sweeper.SweepLoop(runCtx, w.sweepEvery) })
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
