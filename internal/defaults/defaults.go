// Package defaults holds leasehold's typed defaults, one constant per
// purpose. Every package of the module that applies a default takes it from
// here, as a constant, so that constant expressions can be built from it
// (lease, queues, lifecycle, dispatch, eventsource, schedule, wiring,
// serve, the root package, admin and leaseholdtest); the settings table
// (internal/settingstable) shows them in the docs. settings.Default()
// publishes them to code outside the module, as the fields of one
// settings.Defaults value (the leasehold command, which keeps to the public
// API, reads them there too).
package defaults

import "time"

const (
	// CallTimeout bounds each DynamoDB or SQS call a worker or dispatcher
	// makes while it processes tasks: store writes, token sends, visibility
	// changes, queue lookups, sweep pages.
	CallTimeout = 5 * time.Second
	// ClientCallTimeout bounds each call of a Client and of the CLI, and
	// the start-up calls of a process (credential checks, dead-letter queue
	// lookups): calls someone waits on, across the internet.
	ClientCallTimeout = 10 * time.Second
	// ReceiveCallTimeout bounds each SQS call of Run's pollers; it must
	// exceed the longest long poll (LongPoll, at most 20 s).
	ReceiveCallTimeout = 30 * time.Second

	LeaseDuration    = 20 * time.Second
	RenewBefore      = 10 * time.Second
	ClockSkew        = 2 * time.Second
	DeadlineMargin   = 5 * time.Second
	VisibilityMargin = 10 * time.Second
	DispatchGrace    = 2 * time.Minute
	// Retention is how long a finished task is kept before DynamoDB's TTL
	// removes it.
	Retention = 30 * 24 * time.Hour

	MaxAttempts = 5
	Concurrency = 10
	BackoffBase = 2 * time.Second
	BackoffMax  = 10 * time.Minute

	UnknownKindBackoffMin = 10 * time.Second
	UnknownKindBackoffMax = 15 * time.Minute
	UnknownKindLimit      = 7 * 24 * time.Hour
	// WaitTimeout bounds a wait for children or dependencies that sets no
	// deadline of its own.
	WaitTimeout = 7 * 24 * time.Hour

	// MaxReceiveCount is the work queue's maxReceiveCount in template.yaml
	// and localstack/resources.json.
	MaxReceiveCount = 10
	// ReplaceAtReceiveCount leaves two receives of head room below
	// MaxReceiveCount: one for the receive that replaces the token and one
	// for a crash during it.
	ReplaceAtReceiveCount = MaxReceiveCount - 2

	Pollers           = 2
	BatchSize         = 10
	LongPoll          = 20 * time.Second
	InvocationTimeout = 60 * time.Second
	SweepEvery        = time.Minute

	// EnqueueConcurrency is how many DynamoDB or SQS calls EnqueueMany has
	// in flight at once; DispatchConcurrency the same for the dispatcher's
	// submissions of one batch.
	EnqueueConcurrency  = 10
	DispatchConcurrency = 10
	SweepConcurrency    = 4
	SweepPageSize       = 100
	// ListLimit is how many tasks one page of Client.List holds
	// when ListOptions names no limit.
	ListLimit = 100
)
