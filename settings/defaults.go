package settings

import (
	"time"

	"github.com/leasehold/leasehold/internal/defaults"
)

// Defaults are leasehold's typed defaults, one field per purpose: the value a
// zero field of a config takes, and the timeouts code applies that no
// setting changes. The docs' settings tables show them beside the
// LEASEHOLD_* variables. Default returns them.
type Defaults struct {
	// CallTimeout bounds each DynamoDB or SQS call a worker or dispatcher
	// makes while it processes tasks: store writes, token sends, visibility
	// changes, queue lookups, sweep pages.
	CallTimeout time.Duration
	// ClientCallTimeout bounds each call of a Client and of the CLI, and
	// the start-up calls of a process (credential checks, dead-letter queue
	// lookups): calls someone waits on, across the internet.
	ClientCallTimeout time.Duration
	// ReceiveCallTimeout bounds each SQS call of Run's pollers; it must
	// exceed the longest long poll (LongPoll, at most 20 s).
	ReceiveCallTimeout time.Duration

	LeaseDuration    time.Duration
	RenewBefore      time.Duration
	ClockSkew        time.Duration
	DeadlineMargin   time.Duration
	VisibilityMargin time.Duration
	DispatchGrace    time.Duration
	// Retention is how long a finished task is kept before DynamoDB's TTL
	// removes it.
	Retention time.Duration

	MaxAttempts int
	Concurrency int
	BackoffBase time.Duration
	BackoffMax  time.Duration

	UnknownKindBackoffMin time.Duration
	UnknownKindBackoffMax time.Duration
	UnknownKindLimit      time.Duration
	// WaitTimeout bounds a wait for children or dependencies that sets no
	// deadline of its own.
	WaitTimeout time.Duration

	// MaxReceiveCount is the work queue's maxReceiveCount in template.yaml
	// and localstack/resources.json.
	MaxReceiveCount int
	// ReplaceAtReceiveCount leaves two receives of head room below
	// MaxReceiveCount: one for the receive that replaces the token and one
	// for a crash during it.
	ReplaceAtReceiveCount int

	Pollers           int
	BatchSize         int
	LongPoll          time.Duration
	InvocationTimeout time.Duration
	SweepEvery        time.Duration

	// EnqueueConcurrency is how many DynamoDB or SQS calls EnqueueMany has
	// in flight at once; DispatchConcurrency the same for the dispatcher's
	// submissions of one batch.
	EnqueueConcurrency  int
	DispatchConcurrency int
	SweepConcurrency    int
	SweepPageSize       int
	// ListLimit is how many tasks one page of Client.List holds
	// when ListOptions names no limit.
	ListLimit int
}

// Default returns leasehold's defaults. Each call returns a new copy: a
// caller that changes a field changes its copy, not the defaults every
// package of the process applies.
func Default() Defaults {
	return Defaults{
		CallTimeout:           defaults.CallTimeout,
		ClientCallTimeout:     defaults.ClientCallTimeout,
		ReceiveCallTimeout:    defaults.ReceiveCallTimeout,
		LeaseDuration:         defaults.LeaseDuration,
		RenewBefore:           defaults.RenewBefore,
		ClockSkew:             defaults.ClockSkew,
		DeadlineMargin:        defaults.DeadlineMargin,
		VisibilityMargin:      defaults.VisibilityMargin,
		DispatchGrace:         defaults.DispatchGrace,
		Retention:             defaults.Retention,
		MaxAttempts:           defaults.MaxAttempts,
		Concurrency:           defaults.Concurrency,
		BackoffBase:           defaults.BackoffBase,
		BackoffMax:            defaults.BackoffMax,
		UnknownKindBackoffMin: defaults.UnknownKindBackoffMin,
		UnknownKindBackoffMax: defaults.UnknownKindBackoffMax,
		UnknownKindLimit:      defaults.UnknownKindLimit,
		WaitTimeout:           defaults.WaitTimeout,
		MaxReceiveCount:       defaults.MaxReceiveCount,
		ReplaceAtReceiveCount: defaults.ReplaceAtReceiveCount,
		Pollers:               defaults.Pollers,
		BatchSize:             defaults.BatchSize,
		LongPoll:              defaults.LongPoll,
		InvocationTimeout:     defaults.InvocationTimeout,
		SweepEvery:            defaults.SweepEvery,
		EnqueueConcurrency:    defaults.EnqueueConcurrency,
		DispatchConcurrency:   defaults.DispatchConcurrency,
		SweepConcurrency:      defaults.SweepConcurrency,
		SweepPageSize:         defaults.SweepPageSize,
		ListLimit:             defaults.ListLimit,
	}
}
