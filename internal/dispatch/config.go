package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/jonboulle/clockwork"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/queues"

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
	Due(ctx context.Context, shard string, now time.Time, limit int) ([]lease.DueTask, error)
	MarkDispatched(ctx context.Context, id string, seen, next time.Time) (queue string, err error)
}

// QueueResolver turns a task's queue name into the URL its tokens go to; the
// empty name is the default work queue. *queues.Resolver implements it.
type QueueResolver interface {
	URL(ctx context.Context, name string) (string, error)
}

// Defaults for Config.
const (
	DefaultConcurrency      = settings.DefaultDispatchConcurrency
	DefaultSweepConcurrency = settings.DefaultSweepConcurrency
	DefaultSweepPageSize    = settings.DefaultSweepPageSize
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
	Clock       clockwork.Clock
	Logger      *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.DispatchGrace == 0 {
		c.DispatchGrace = settings.DefaultDispatchGrace
	}
	if c.DefaultMaxAttempts == 0 {
		c.DefaultMaxAttempts = settings.DefaultMaxAttempts
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.SweepConcurrency == 0 {
		c.SweepConcurrency = DefaultSweepConcurrency
	}
	if c.SweepPageSize == 0 {
		c.SweepPageSize = DefaultSweepPageSize
	}
	if c.CallTimeout == 0 {
		c.CallTimeout = settings.DefaultCallTimeout
	}
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
	case c.SweepPageSize < 1 || c.SweepPageSize > lease.MaxDueLimit:
		return fmt.Errorf("%w: sweep page size %d is outside 1..%d", ErrConfig, c.SweepPageSize, lease.MaxDueLimit)
	case c.CallTimeout <= 0:
		return fmt.Errorf("%w: call timeout must be positive", ErrConfig)
	}
	return nil
}

// Environment variables Settings reads.
const (
	EnvTable            = "LEASEHOLD_TABLE"
	EnvWorkQueueURL     = "LEASEHOLD_WORK_QUEUE_URL"
	EnvIntakeDLQURL     = "LEASEHOLD_INTAKE_DLQ_URL"
	EnvDispatchGrace    = "LEASEHOLD_DISPATCH_GRACE"
	EnvMaxAttempts      = "LEASEHOLD_MAX_ATTEMPTS"
	EnvConcurrency      = "LEASEHOLD_DISPATCH_CONCURRENCY"
	EnvSweepConcurrency = "LEASEHOLD_SWEEP_CONCURRENCY"
	// EnvListing "off" stores submissions unlisted (lease.Options.Unlisted).
	EnvListing = "LEASEHOLD_LISTING"
)

// Settings is the dispatch function's configuration from its environment.
type Settings struct {
	Table            string // required
	WorkQueueURL     string // required
	IntakeDLQURL     string
	DispatchGrace    time.Duration // 0: lease.DefaultDispatchGrace
	MaxAttempts      int
	Concurrency      int
	SweepConcurrency int
	Unlisted         bool
}

// SettingsFromEnv reads Settings from the LEASEHOLD_* variables.
func SettingsFromEnv() (Settings, error) { return SettingsFrom(os.Getenv) }

// SettingsFrom reads Settings through getenv.
func SettingsFrom(getenv func(string) string) (Settings, error) {
	s := Settings{
		Table:        getenv(EnvTable),
		WorkQueueURL: getenv(EnvWorkQueueURL),
		IntakeDLQURL: getenv(EnvIntakeDLQURL),
	}
	switch {
	case s.Table == "":
		return s, fmt.Errorf("%w: %s is required", ErrConfig, EnvTable)
	case s.WorkQueueURL == "":
		return s, fmt.Errorf("%w: %s is required", ErrConfig, EnvWorkQueueURL)
	}
	if v := getenv(EnvDispatchGrace); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return s, fmt.Errorf("%w: %s=%q is not a positive duration such as 2m", ErrConfig, EnvDispatchGrace, v)
		}
		s.DispatchGrace = d
	}
	unlisted, err := lease.ParseListing(getenv(EnvListing))
	if err != nil {
		return s, fmt.Errorf("%w: %s: %w", ErrConfig, EnvListing, err)
	}
	s.Unlisted = unlisted
	ints := []struct {
		env string
		dst *int
	}{
		{EnvMaxAttempts, &s.MaxAttempts},
		{EnvConcurrency, &s.Concurrency},
		{EnvSweepConcurrency, &s.SweepConcurrency},
	}
	for _, n := range ints {
		if v := getenv(n.env); v != "" {
			i, err := strconv.Atoi(v)
			if err != nil || i < 1 {
				return s, fmt.Errorf("%w: %s=%q is not a positive integer", ErrConfig, n.env, v)
			}
			*n.dst = i
		}
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
		WorkQueueURL:       s.WorkQueueURL,
		IntakeDLQURL:       s.IntakeDLQURL,
		DispatchGrace:      s.DispatchGrace,
		DefaultMaxAttempts: s.MaxAttempts,
		Concurrency:        s.Concurrency,
		SweepConcurrency:   s.SweepConcurrency,
		Logger:             log,
	}
}
