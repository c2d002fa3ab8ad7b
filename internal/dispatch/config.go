package dispatch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/jonboulle/clockwork"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/query"
	"github.com/leasehold/leasehold/internal/queues"

	"github.com/leasehold/leasehold/internal/defaults"
	"github.com/leasehold/leasehold/internal/settingstable"
	"github.com/leasehold/leasehold/settings"
)

// SQSClient lists the SQS calls the dispatcher makes; *sqs.Client satisfies
// it.
type SQSClient interface {
	SendMessageBatch(ctx context.Context, params *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
	SendMessage(ctx context.Context, params *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// Creator is the store call enqueueing makes.
type Creator interface {
	Create(ctx context.Context, t lease.NewTask) (lease.Task, error)
}

// Store lists the store calls the dispatcher makes: Create for intake and
// enqueueing, Due and MarkDispatched for the sweep.
type Store interface {
	Creator
	Due(ctx context.Context, shard string, now time.Time, limit int) ([]query.DueTask, error)
	MarkDispatched(ctx context.Context, id string, seen, next time.Time) (queue string, err error)
}

// QueueResolver turns a task's queue name into the URL its tokens go to; the
// empty name is the default work queue. *queues.Resolver implements it.
type QueueResolver interface {
	URL(ctx context.Context, name string) (string, error)
}

// Defaults for Config.
const (
	DefaultConcurrency      = defaults.DispatchConcurrency
	DefaultSweepConcurrency = defaults.SweepConcurrency
	DefaultSweepPageSize    = defaults.SweepPageSize
)

// ErrConfig wraps every configuration error.
var ErrConfig = errors.New("invalid dispatch configuration")

// Config wires a Dispatcher.
type Config struct {
	// Store persists tasks and holds the sweep index.
	Store Store
	// SQS sends dispatch tokens and forwards rejected submissions.
	SQS SQSClient
	// WorkQueueURL receives the dispatch tokens of tasks that name no queue.
	WorkQueueURL string
	// Queues resolves the queue a task names (lease.Task.Queue). Nil
	// builds a caching resolver on SQS when it has GetQueueUrl; without it
	// only the default work queue can be reached.
	Queues QueueResolver
	// IntakeDLQURL receives invalid submissions, with the reason in the
	// leasehold-reason message attribute. Empty leaves them to the intake
	// queue's redrive policy: they are reported as failures until SQS moves
	// them after maxReceiveCount receives.
	IntakeDLQURL string
	// WorkDLQURL is the work queue's dead-letter queue. Each sweep sends
	// the messages SQS moved there back to the queue they came from
	// (RedriveDeadLetters); the SQS client must then be a
	// DeadLetterClient too. Empty: no dead-letter recovery for the work
	// queue.
	WorkDLQURL string
	// NamedQueues are the queues other than the default that tasks may
	// name, each by URL or ARN, whose dead-letter queues each sweep reads
	// too: the one each queue's redrive policy names (read once an hour;
	// a queue without one is skipped), sending what SQS moved there back
	// to it. The SQS client must then be a DeadLetterClient and a
	// QueueAttributesClient too. Empty: only WorkDLQURL is read, and no
	// call is made for named queues.
	NamedQueues []string
	// DispatchGrace must equal the store's: after a sweep sends a token, the
	// task waits this long for a claim before the sweep sends another.
	DispatchGrace time.Duration
	// DefaultMaxAttempts applies to submissions that name none.
	DefaultMaxAttempts int
	// Concurrency bounds the submissions of one batch, or the tasks of one
	// Enqueue, processed at once, and the index entries of one sweep page
	// marked at once.
	Concurrency int
	// SweepConcurrency bounds the shards swept at once.
	SweepConcurrency int
	// SweepPageSize is how many due entries one Due call asks for.
	SweepPageSize int
	// CallTimeout bounds each SQS call (the store bounds its own).
	CallTimeout time.Duration
	// CreateWait, when positive, has Enqueue leave the create of each
	// task due now with no dependencies to the worker that receives its
	// token: it reads the task (the store must be a TokenReader) for at
	// most this long, and stores the tasks not stored by then itself.
	// Zero: Enqueue stores every task itself (docs/enqueue.md).
	CreateWait time.Duration
	Clock      clockwork.Clock
	Logger     *slog.Logger
}

func (c Config) withDefaults() Config {
	c.DispatchGrace = cmp.Or(c.DispatchGrace, defaults.DispatchGrace)
	c.DefaultMaxAttempts = cmp.Or(c.DefaultMaxAttempts, defaults.MaxAttempts)
	c.Concurrency = cmp.Or(c.Concurrency, DefaultConcurrency)
	c.SweepConcurrency = cmp.Or(c.SweepConcurrency, DefaultSweepConcurrency)
	c.SweepPageSize = cmp.Or(c.SweepPageSize, DefaultSweepPageSize)
	c.CallTimeout = cmp.Or(c.CallTimeout, defaults.CallTimeout)
	if c.Clock == nil {
		c.Clock = clockwork.NewRealClock()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Queues == nil {
		lookup, _ := c.SQS.(queues.SQSClient)
		c.Queues = queues.NewResolver(lookup, c.WorkQueueURL, c.CallTimeout)
	}
	return c
}

// validate checks everything but the store, which Enqueue does not need.
func (c Config) validate() error {
	switch {
	case c.SQS == nil:
		return fmt.Errorf("%w: an SQS client is required", ErrConfig)
	case c.WorkQueueURL == "":
		return fmt.Errorf("%w: the work queue URL is required", ErrConfig)
	case c.DispatchGrace <= 0:
		return fmt.Errorf("%w: the dispatch grace must be positive", ErrConfig)
	case c.DefaultMaxAttempts < 1 || c.DefaultMaxAttempts > lease.MaxAttemptsLimit:
		return fmt.Errorf("%w: max attempts %d is outside 1..%d", ErrConfig, c.DefaultMaxAttempts, lease.MaxAttemptsLimit)
	case c.Concurrency < 1 || c.SweepConcurrency < 1:
		return fmt.Errorf("%w: concurrency must be at least 1", ErrConfig)
	case c.SweepPageSize < 1 || c.SweepPageSize > query.MaxDueLimit:
		return fmt.Errorf("%w: sweep page size %d is outside 1..%d", ErrConfig, c.SweepPageSize, query.MaxDueLimit)
	case c.CallTimeout <= 0:
		return fmt.Errorf("%w: call timeout must be positive", ErrConfig)
	case c.CreateWait < 0:
		return fmt.Errorf("%w: create wait cannot be negative", ErrConfig)
	}
	if _, ok := c.SQS.(DeadLetterClient); c.WorkDLQURL != "" && !ok {
		return fmt.Errorf("%w: dead-letter recovery from %s needs an SQS client that receives, deletes and changes visibility (%T does not)", ErrConfig, c.WorkDLQURL, c.SQS)
	}
	if len(c.NamedQueues) == 0 {
		return nil
	}
	_, receives := c.SQS.(DeadLetterClient)
	if _, reads := c.SQS.(QueueAttributesClient); !receives || !reads {
		return fmt.Errorf("%w: dead-letter recovery for named queues needs an SQS client that reads queue attributes, receives, deletes and changes visibility (%T does not)", ErrConfig, c.SQS)
	}
	for _, q := range c.NamedQueues {
		if err := queues.CheckName(namedQueueName(q)); err != nil {
			return fmt.Errorf("%w: named queue %q is neither a queue URL nor a queue ARN: %w", ErrConfig, q, err)
		}
	}
	return nil
}

// namedQueueName is the name of the queue ref (an ARN, or a URL with a
// scheme and a host) names; "" when it is neither.
func namedQueueName(ref string) string {
	if strings.HasPrefix(ref, "arn:") {
		name, _ := queues.NameFromARN(ref)
		return name
	}
	if u, err := url.Parse(ref); err != nil || u.Scheme == "" || u.Host == "" {
		return ""
	}
	return queues.NameFromURL(ref)
}

// Settings is the dispatch function's configuration from its environment:
// the fields of the settings table (internal/settingstable) for scope
// Dispatch, named as there.
type Settings struct {
	Table               string // required
	QueueURL            string // required: the default work queue
	IntakeDLQURL        string
	DeadLetterQueueURL  string        // the work dead-letter queue
	NamedQueues         []string      // URLs or ARNs of the named queues, for their dead-letter queues
	DispatchGrace       time.Duration // 0: defaults.DispatchGrace
	MaxAttempts         int
	DispatchConcurrency int
	SweepConcurrency    int
	Unlisted            bool
	// Logger is set by LEASEHOLD_LOG_LEVEL (JSON lines on stderr at that
	// level); nil when it is unset.
	Logger *slog.Logger
}

// SettingsFromEnv reads Settings from the LEASEHOLD_* variables.
func SettingsFromEnv() (Settings, error) { return SettingsFrom(os.Getenv) }

// SettingsFrom reads Settings through getenv.
func SettingsFrom(getenv func(string) string) (Settings, error) {
	var s Settings
	if err := settingstable.Load(&s, settingstable.Dispatch, getenv); err != nil {
		return s, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	switch {
	case s.Table == "":
		return s, fmt.Errorf("%w: %s is required", ErrConfig, settings.EnvTable)
	case s.QueueURL == "":
		return s, fmt.Errorf("%w: %s is required", ErrConfig, settings.EnvWorkQueueURL)
	}
	if v := getenv(settings.EnvDispatchGrace); v != "" && s.DispatchGrace <= 0 {
		return s, fmt.Errorf("%w: %s=%q is not a positive duration such as 2m", ErrConfig, settings.EnvDispatchGrace, v)
	}
	return s, nil
}

// StoreOptions are the lease store options the settings ask for.
func (s Settings) StoreOptions() lease.Options {
	return lease.Options{DispatchGrace: s.DispatchGrace, Unlisted: s.Unlisted}
}

// Config builds the dispatcher's configuration on store and q.
func (s Settings) Config(store Store, q SQSClient, log *slog.Logger) Config {
	return Config{
		Store:              store,
		SQS:                q,
		WorkQueueURL:       s.QueueURL,
		IntakeDLQURL:       s.IntakeDLQURL,
		WorkDLQURL:         s.DeadLetterQueueURL,
		NamedQueues:        s.NamedQueues,
		DispatchGrace:      s.DispatchGrace,
		DefaultMaxAttempts: s.MaxAttempts,
		Concurrency:        s.DispatchConcurrency,
		SweepConcurrency:   s.SweepConcurrency,
		Logger:             log,
	}
}
