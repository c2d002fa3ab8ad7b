package lifecycle

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/jonboulle/clockwork"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold/internal/claimcheck"
	"github.com/leasehold/leasehold/internal/defaults"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/limiter"
	"github.com/leasehold/leasehold/internal/queues"
	"github.com/leasehold/leasehold/settings"
)

// SQSClient lists the work-queue calls the lifecycle makes; *sqs.Client
// satisfies it.
type SQSClient interface {
	ChangeMessageVisibility(ctx context.Context, params *sqs.ChangeMessageVisibilityInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
	// ChangeMessageVisibilityBatch extends the running messages of one
	// batch together when their renewals come due (batchVisibility).
	ChangeMessageVisibilityBatch(ctx context.Context, params *sqs.ChangeMessageVisibilityBatchInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
	SendMessage(ctx context.Context, params *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	// SendMessageBatch sends a parent's children's tokens, ten per call.
	SendMessageBatch(ctx context.Context, params *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
	// DeleteMessage deletes a message that was replaced by a fresh token at
	// once, so it cannot come back and use up its receives.
	DeleteMessage(ctx context.Context, params *sqs.DeleteMessageInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
}

// Handler runs one attempt of a task. The result is a JSON document.
type Handler func(ctx context.Context, t lease.Task) ([]byte, error)

// Backoff returns how long to wait before the attempt after attempt (1-based)
// failed.
type Backoff func(attempt int) time.Duration

// ExponentialBackoff doubles from base up to max. Each delay is drawn from
// [d/2, d], so consecutive delays never shrink and concurrent failures do not
// retry in lockstep.
func ExponentialBackoff(base, max time.Duration) Backoff {
	return settings.ExponentialBackoff(base, max)
}

// MaxSQSDelay is the longest DelaySeconds SQS accepts. Waits longer than this
// are left to the sweeper.
const MaxSQSDelay = 15 * time.Minute

// Defaults for Config.
const (
	DefaultRenewBefore      = defaults.RenewBefore
	DefaultVisibilityMargin = defaults.VisibilityMargin
	DefaultDeadlineMargin   = defaults.DeadlineMargin
	DefaultMaxAttempts      = defaults.MaxAttempts
	DefaultConcurrency      = defaults.Concurrency
	DefaultBackoffBase      = defaults.BackoffBase
	DefaultBackoffMax       = defaults.BackoffMax
	// Defaults for a task whose kind no handler is registered for here.
	DefaultUnknownKindBackoffMin = defaults.UnknownKindBackoffMin
	DefaultUnknownKindBackoffMax = defaults.UnknownKindBackoffMax
	DefaultUnknownKindLimit      = defaults.UnknownKindLimit
	// DefaultWaitTimeout bounds a wait for children or dependencies
	// (Config.WaitTimeout).
	DefaultWaitTimeout = defaults.WaitTimeout
	// DefaultMaxReceiveCount is the work queue's maxReceiveCount in
	// template.yaml and localstack/resources.json.
	DefaultMaxReceiveCount = defaults.MaxReceiveCount
	// DefaultReplaceAtReceiveCount leaves two receives of head room below
	// DefaultMaxReceiveCount.
	DefaultReplaceAtReceiveCount = defaults.ReplaceAtReceiveCount
)

// MinSnooze is the shortest snooze: a shorter or negative delay is raised to
// it, so a handler that snoozes at once cannot spin the task in a hot loop.
const MinSnooze = time.Second

// Config wires an Executor.
type Config struct {
	Store lease.Store
	SQS   SQSClient
	// Claims keeps payloads and results over their inline limits in the
	// payload bucket (package claimcheck); nil keeps today's limits.
	Claims *claimcheck.Checker
	// QueueURL is the default work queue: the queue of a Message that names
	// none, and of a task whose Queue is empty.
	QueueURL string
	// Queues resolves a task's queue name to the URL its re-sent tokens go
	// to (the empty name is QueueURL). Nil builds a caching resolver on SQS
	// when it has GetQueueUrl; without one only QueueURL can be reached.
	Queues QueueResolver
	// DeadLetterURL receives messages that name no task that can be recorded
	// (malformed, wrong version, missing fields, unknown task), with the
	// reason as a message attribute. Empty leaves them to the queue's own
	// redrive policy.
	DeadLetterURL string
	// Handlers finds the handler of a kind.
	Handlers func(kind string) (Handler, bool)
	// Owner names this worker in lease_owner.
	Owner string

	// LeaseDuration must equal the store's; it sizes visibility extensions.
	LeaseDuration time.Duration
	// RenewBefore is how long before expiry the lease is renewed.
	RenewBefore time.Duration
	// VisibilityMargin is added to the lease when hiding a message.
	VisibilityMargin time.Duration
	// DeadlineMargin is kept free before the invocation deadline: the
	// handler's context ends this much earlier so the lease can be released.
	DeadlineMargin     time.Duration
	DefaultMaxAttempts int
	Backoff            Backoff
	// Concurrency bounds the messages of one batch processed at once.
	Concurrency int
	// CallTimeout bounds each AWS call.
	CallTimeout time.Duration
	// ReplaceAtReceiveCount: a message received this many times or more
	// whose task cannot run now (leased elsewhere, or a store failure) is
	// replaced by a fresh token instead of being hidden or left to come
	// back, so it never reaches the queue's maxReceiveCount while its task
	// can still run. Set it at most the queue's maxReceiveCount minus 2.
	ReplaceAtReceiveCount int

	Clock clockwork.Clock
	// Pause, if set, waits out a step's short delay between two tries in
	// the handler's process (durable.Pauser) instead of Clock: a test's
	// fake clock does not move while a handler runs, so leaseholdtest's
	// Env passes one that takes no time.
	Pause  func(ctx context.Context, d time.Duration) error
	Logger *slog.Logger
	// Observer, if set, hears about task events (metrics).
	Observer Observer
	// Tracer, if set, traces every message's execution (see trace.go):
	// the attempt span, child of the trace context its token carries, and
	// spans for the claim, renewals, the end's write, steps and awaits;
	// the tokens the execution sends carry the attempt's trace context.
	// Nil (the default) traces nothing and costs nothing.
	Tracer trace.Tracer

	// UnknownKindBackoffMin and UnknownKindBackoffMax bound the wait before
	// a task whose kind has no handler here is offered again: the wait is
	// the time since the kind was first found unknown (so it roughly
	// doubles each time), within these bounds.
	UnknownKindBackoffMin time.Duration
	UnknownKindBackoffMax time.Duration
	// UnknownKindLimit is how long a task's kind may stay unknown, from the
	// first worker that found no handler for it, before the task fails for
	// good ("bad input is never retried forever").
	UnknownKindLimit time.Duration
	// WaitTimeout bounds a wait for children or dependencies that sets
	// no deadline of its own (DefaultWaitTimeout).
	WaitTimeout time.Duration
	// RateLimits bounds the task starts of each queue (by name; "" is the
	// default work queue, QueueURL) per window, counted in Store's rate
	// windows (limiter.RateLimiter), shared by every worker of the table. A
	// start is taken after the claim; a claimed task whose window is full
	// is released without using an attempt (holdForRate), and later
	// tokens of the window are held back before their claim
	// (heldByWindow).
	RateLimits map[string]settings.RateLimit
	// KindConcurrency bounds, per kind, the attempts that run at once
	// across every worker of the table, in Store's slot sets
	// (limiter.SlotLimiter). A claimed task whose kind has no free slot is
	// released without using an attempt (holdForSlot).
	KindConcurrency map[string]int

	// caps are Store's optional interfaces, found once by withDefaults.
	caps capabilities
	// fullWindows is the Executor's memory of full rate windows (set by
	// New; shared by the copies of the Config its executions use).
	fullWindows fullWindows
}

// QueueResolver turns a queue name into its URL ("" is the default work
// queue). *queues.Resolver implements it.
type QueueResolver interface {
	URL(ctx context.Context, name string) (string, error)
}

// Observer hears how each attempt ended, once per attempt, from the
// goroutine processing the task; it must not block. An attempt whose outcome
// could not be recorded (the store failed; the token is kept for a later
// try) is not reported.
type Observer interface {
	Ended(a Ended)
}

// Ended is what an Observer hears about an attempt that ended.
type Ended struct {
	// Task is the task as the attempt's last write left it.
	Task    lease.Task
	Outcome Outcome
	// HandlerTime is how long the handler ran (zero if it did not).
	HandlerTime time.Duration
	// Claim is the claim that started the attempt; nil when the outcome
	// was recorded without one (a task failed as it was created, or an
	// attempt whose holder vanished failed by the next claimer).
	Claim *Claim
}

// Claim describes the claim of an attempt.
type Claim struct {
	// Attempt, CreatedAt and RunAt are the task's as claimed.
	Attempt   int
	CreatedAt time.Time
	RunAt     time.Time
	// SinceEnqueue is the time from CreatedAt to the claim.
	SinceEnqueue time.Duration
}

// Errors that reject a Config.
var ErrConfig = errors.New("invalid worker configuration")

// withDefaults fills unset fields and rejects impossible timing.
func (c Config) withDefaults() (Config, error) {
	if c.Clock == nil {
		c.Clock = clockwork.NewRealClock()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Backoff == nil {
		c.Backoff = ExponentialBackoff(DefaultBackoffBase, DefaultBackoffMax)
	}
	c.LeaseDuration = cmp.Or(c.LeaseDuration, defaults.LeaseDuration)
	c.RenewBefore = cmp.Or(c.RenewBefore, DefaultRenewBefore)
	c.VisibilityMargin = cmp.Or(c.VisibilityMargin, DefaultVisibilityMargin)
	c.DeadlineMargin = cmp.Or(c.DeadlineMargin, DefaultDeadlineMargin)
	c.DefaultMaxAttempts = cmp.Or(c.DefaultMaxAttempts, DefaultMaxAttempts)
	c.Concurrency = cmp.Or(c.Concurrency, DefaultConcurrency)
	c.CallTimeout = cmp.Or(c.CallTimeout, defaults.CallTimeout)
	c.ReplaceAtReceiveCount = cmp.Or(c.ReplaceAtReceiveCount, DefaultReplaceAtReceiveCount)
	c.UnknownKindBackoffMin = cmp.Or(c.UnknownKindBackoffMin, DefaultUnknownKindBackoffMin)
	c.UnknownKindBackoffMax = cmp.Or(c.UnknownKindBackoffMax, max(DefaultUnknownKindBackoffMax, c.UnknownKindBackoffMin))
	c.UnknownKindLimit = cmp.Or(c.UnknownKindLimit, DefaultUnknownKindLimit)
	c.WaitTimeout = cmp.Or(c.WaitTimeout, DefaultWaitTimeout)
	if c.Queues == nil {
		lookup, _ := c.SQS.(queues.SQSClient)
		c.Queues = queues.NewResolver(lookup, c.QueueURL, c.CallTimeout)
	}
	c.caps = capabilitiesOf(c.Store)
	return c, c.validate()
}

func (c Config) validate() error {
	switch {
	case c.Store == nil:
		return fmt.Errorf("%w: a lease store is required", ErrConfig)
	case c.SQS == nil:
		return fmt.Errorf("%w: an SQS client is required", ErrConfig)
	case c.QueueURL == "":
		return fmt.Errorf("%w: the work queue URL is required", ErrConfig)
	case c.Handlers == nil:
		return fmt.Errorf("%w: handlers are required", ErrConfig)
	case c.Owner == "":
		return fmt.Errorf("%w: an owner name is required", ErrConfig)
	case c.RenewBefore <= 0 || c.LeaseDuration <= 0:
		return fmt.Errorf("%w: lease duration and renewal period must be positive", ErrConfig)
	case c.LeaseDuration < 2*c.RenewBefore:
		return fmt.Errorf("%w: lease duration %s must be at least twice the renewal period %s", ErrConfig, c.LeaseDuration, c.RenewBefore)
	case c.LeaseDuration+c.VisibilityMargin > 12*time.Hour:
		return fmt.Errorf("%w: lease duration plus visibility margin exceeds SQS's 12-hour visibility limit", ErrConfig)
	case c.VisibilityMargin < 0 || c.DeadlineMargin < 0:
		return fmt.Errorf("%w: margins cannot be negative", ErrConfig)
	case c.DefaultMaxAttempts < 1 || c.DefaultMaxAttempts > lease.MaxAttemptsLimit:
		return fmt.Errorf("%w: max attempts %d is outside 1..%d", ErrConfig, c.DefaultMaxAttempts, lease.MaxAttemptsLimit)
	case c.Concurrency < 1:
		return fmt.Errorf("%w: concurrency must be at least 1", ErrConfig)
	case c.CallTimeout <= 0:
		return fmt.Errorf("%w: call timeout must be positive", ErrConfig)
	case c.ReplaceAtReceiveCount < 1:
		return fmt.Errorf("%w: the receive count at which tokens are replaced must be at least 1", ErrConfig)
	case c.UnknownKindBackoffMin <= 0 || c.UnknownKindBackoffMax < c.UnknownKindBackoffMin:
		return fmt.Errorf("%w: unknown-kind backoff %s..%s is not a positive range", ErrConfig, c.UnknownKindBackoffMin, c.UnknownKindBackoffMax)
	case c.UnknownKindLimit <= 0:
		return fmt.Errorf("%w: the unknown-kind limit must be positive", ErrConfig)
	case c.WaitTimeout < 0 || c.WaitTimeout > MaxWaitTimeout:
		return fmt.Errorf("%w: wait timeout %s is outside (0, %s]", ErrConfig, c.WaitTimeout, MaxWaitTimeout)
	}
	for queue, r := range c.RateLimits {
		if err := r.Check(); err != nil {
			return fmt.Errorf("%w: the rate limit of queue %q: %w", ErrConfig, queue, err)
		}
	}
	if _, ok := c.RateLimits[""]; ok {
		if _, dup := c.RateLimits[queues.NameFromURL(c.QueueURL)]; dup {
			return fmt.Errorf("%w: two rate limits for the default work queue %s (one by name)", ErrConfig, queues.NameFromURL(c.QueueURL))
		}
	}
	for kind, n := range c.KindConcurrency {
		if kind == "" || n < 1 || n > limiter.MaxSlots {
			return fmt.Errorf("%w: the concurrency limit of kind %q is %d, outside 1..%d", ErrConfig, kind, n, limiter.MaxSlots)
		}
	}
	if len(c.KindConcurrency) > 0 && c.caps.slots == nil {
		return fmt.Errorf("%w: concurrency limits need a store that keeps slot sets (%T does not)", ErrConfig, c.Store)
	}
	if len(c.RateLimits) > 0 && c.caps.rates == nil {
		return fmt.Errorf("%w: rate limits need a store that keeps rate windows (%T does not)", ErrConfig, c.Store)
	}
	return nil
}
