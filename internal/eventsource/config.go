package eventsource

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/leasehold/leasehold/internal/defaults"
)

// Defaults applied by New to zero Config fields.
const (
	DefaultBatchSize         = defaults.BatchSize
	DefaultWaitTime          = defaults.LongPoll
	DefaultPollers           = defaults.Pollers
	DefaultInvocationTimeout = defaults.InvocationTimeout
)

// Limits set by SQS and by Lambda's event source mapping.
const (
	receiveLimit         = 10                // messages per ReceiveMessage / entries per DeleteMessageBatch
	maxBatchSize         = 10000             // Lambda's BatchSize limit for standard queues
	maxBatchWindow       = 300 * time.Second // MaximumBatchingWindowInSeconds
	maxWaitTime          = 20 * time.Second  // WaitTimeSeconds
	maxVisibility        = 12 * time.Hour    // VisibilityTimeout
	maxInvocation        = 15 * time.Minute  // Lambda function timeout
	maxPollers           = 1000              // Lambda's MaximumConcurrency
	maxInFlight          = 4                 // batches one poller may run at once
	fifoQueueSuffix      = ".fifo"
	allMessageAttributes = "All"
)

// Config describes one event source mapping: which queue to poll, how to
// batch and how long a batch may run. Zero fields take the defaults above.
type Config struct {
	// QueueURL is the URL of the queue to poll. Required.
	QueueURL string

	// BatchSize is the most messages handed to one invocation. Up to 10 is
	// one ReceiveMessage call; as in Lambda, up to 10000 is allowed for a
	// standard queue when BatchWindow is set, and 10 for a FIFO queue.
	// Default 10.
	BatchSize int

	// BatchWindow is the longest time spent gathering a batch once its first
	// message has arrived (Lambda's MaximumBatchingWindowInSeconds, at most
	// 5 minutes). Zero hands over whatever one ReceiveMessage returned.
	BatchWindow time.Duration

	// WaitTime is the long-poll duration of each ReceiveMessage, in whole
	// seconds, at most 20s. Default 20s.
	WaitTime time.Duration

	// Pollers is how many receive loops run, each starting batches, which
	// with InFlight bounds the handler's concurrency: at most Pollers ×
	// InFlight batches are handled at the same time. Default 2. Each poller
	// receives its next batch while its batches run (receive-ahead), so up
	// to Pollers more batches may be held, hidden, waiting for their turn.
	Pollers int

	// InFlight is how many batches one poller may have handled at the same
	// time: a poller starts its next batch, if it holds one, as soon as
	// fewer than InFlight of its own are running, so that a batch whose
	// handler spends its end on writes (Worker.Run's finishes) does not keep
	// the next one waiting. Default 1: a poller's batches run one after
	// another. Worker.Run sets 2.
	InFlight int

	// VisibilityTimeout, if set, overrides the queue's visibility timeout on
	// every receive (whole seconds, at most 12h). Lambda always uses the
	// queue's; this exists so tests and demos can observe redelivery quickly.
	VisibilityTimeout time.Duration

	// InvocationTimeout is the function timeout: each handler call gets a
	// context with this deadline, and a handler that returns after it counts
	// as failed, as in Lambda. At most 15 minutes. Default 60s.
	InvocationTimeout time.Duration

	// CallTimeout bounds each SQS call. It must exceed WaitTime.
	// Default settings.Default().ReceiveCallTimeout, 30s.
	CallTimeout time.Duration

	// Paused, if set, is asked before each receive: while it reports true
	// the poller receives nothing (batches running go on) and asks again
	// every second. It is asked again before a received batch runs: a batch
	// a long poll brought, or one received ahead, after the pause is handed
	// back unrun (made visible again; one more receive counted). Worker.Run
	// sets it from the queue's PausedTag.
	Paused func(ctx context.Context) bool

	// Prepare, if set, is called with each batch as soon as it is
	// received, before it waits for its poller's running batch
	// (receive-ahead), so that work the batch needs before it runs can
	// overlap that wait. The context it returns, with what Prepare put in
	// it, is the parent of the handler's context for that batch. It must
	// not block; the handler called with the batch joins whatever Prepare
	// started, and so does Release for a batch handed back unrun.
	// Worker.Run writes the batch's listing entry with it.
	Prepare func(ctx context.Context, ev events.SQSEvent) context.Context

	// Release, if set, is called with the context Prepare returned for a
	// batch that is handed back instead of run (its queue was paused while
	// it waited); it joins whatever Prepare started.
	Release func(ctx context.Context)

	// Logger receives operational logs (never message bodies). Default
	// slog.Default().
	Logger *slog.Logger
}

// withDefaults returns c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
	c.BatchSize = cmp.Or(c.BatchSize, DefaultBatchSize)
	c.WaitTime = cmp.Or(c.WaitTime, DefaultWaitTime)
	c.Pollers = cmp.Or(c.Pollers, DefaultPollers)
	c.InFlight = cmp.Or(c.InFlight, 1)
	c.InvocationTimeout = cmp.Or(c.InvocationTimeout, DefaultInvocationTimeout)
	c.CallTimeout = cmp.Or(c.CallTimeout, defaults.ReceiveCallTimeout)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// validate reports every problem with a defaulted Config at once; each one
// wraps ErrInvalidConfig.
func (c Config) validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}

	fifo := false
	if c.QueueURL == "" {
		bad("QueueURL is required")
	} else if u, err := url.Parse(c.QueueURL); err != nil || u.Scheme == "" || u.Host == "" {
		bad("QueueURL %q is not an absolute URL", c.QueueURL)
	} else {
		fifo = strings.HasSuffix(u.Path, fifoQueueSuffix)
	}

	switch {
	case c.BatchSize < 1:
		bad("BatchSize %d must be at least 1", c.BatchSize)
	case fifo && c.BatchSize > receiveLimit:
		bad("BatchSize %d exceeds %d, the limit for a FIFO queue", c.BatchSize, receiveLimit)
	case c.BatchSize > maxBatchSize:
		bad("BatchSize %d exceeds %d", c.BatchSize, maxBatchSize)
	case c.BatchSize > receiveLimit && c.BatchWindow <= 0:
		bad("BatchSize %d above %d needs a BatchWindow", c.BatchSize, receiveLimit)
	}
	if c.BatchWindow < 0 || c.BatchWindow > maxBatchWindow {
		bad("BatchWindow %s must be between 0 and %s", c.BatchWindow, maxBatchWindow)
	}
	if c.WaitTime < 0 || c.WaitTime > maxWaitTime || c.WaitTime%time.Second != 0 {
		bad("WaitTime %s must be whole seconds between 0 and %s", c.WaitTime, maxWaitTime)
	}
	if c.Pollers < 1 || c.Pollers > maxPollers {
		bad("Pollers %d must be between 1 and %d", c.Pollers, maxPollers)
	}
	if c.InFlight < 1 || c.InFlight > maxInFlight {
		bad("InFlight %d must be between 1 and %d", c.InFlight, maxInFlight)
	}
	if c.VisibilityTimeout < 0 || c.VisibilityTimeout > maxVisibility || c.VisibilityTimeout%time.Second != 0 {
		bad("VisibilityTimeout %s must be whole seconds between 0 and %s", c.VisibilityTimeout, maxVisibility)
	}
	if c.InvocationTimeout < 0 || c.InvocationTimeout > maxInvocation {
		bad("InvocationTimeout %s must be between 0 and %s", c.InvocationTimeout, maxInvocation)
	}
	if c.CallTimeout < 0 {
		bad("CallTimeout %s must not be negative", c.CallTimeout)
	} else if c.CallTimeout <= c.WaitTime {
		bad("CallTimeout %s must exceed WaitTime %s, or every long poll would time out", c.CallTimeout, c.WaitTime)
	}
	return errors.Join(errs...)
}
