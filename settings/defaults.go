package settings

import "time"

// The typed defaults, one constant per purpose. Every package that applies
// a default takes it from here (lease, queues, lifecycle, dispatch,
// eventsource, the CLI and the root package), and the settings table shows
// them in the docs.
const (
	// DefaultCallTimeout bounds each DynamoDB or SQS call a worker or dispatcher
	// makes while it processes tasks: store writes, token sends, visibility
	// changes, queue lookups, sweep pages.
	DefaultCallTimeout = 5 * time.Second
	// DefaultClientCallTimeout bounds each call of a Client and of the CLI, and
	// the start-up calls of a process (credential checks, dead-letter queue
	// lookups): calls someone waits on, across the internet.
	DefaultClientCallTimeout = 10 * time.Second
	// DefaultReceiveCallTimeout bounds each SQS call of Run's pollers; it must
	// exceed the longest long poll (DefaultLongPoll, at most 20 s).
	DefaultReceiveCallTimeout = 30 * time.Second

	DefaultLeaseDuration    = 20 * time.Second
	DefaultRenewBefore      = 10 * time.Second
	DefaultClockSkew        = 2 * time.Second
	DefaultDeadlineMargin   = 5 * time.Second
	DefaultVisibilityMargin = 10 * time.Second
	DefaultDispatchGrace    = 2 * time.Minute
	// DefaultRetention is how long a finished task is kept before DynamoDB's TTL
	// removes it.
	DefaultRetention = 30 * 24 * time.Hour

	DefaultMaxAttempts = 5
	DefaultConcurrency = 10
	DefaultBackoffBase = 2 * time.Second
	DefaultBackoffMax  = 10 * time.Minute

	DefaultUnknownKindBackoffMin = 10 * time.Second
	DefaultUnknownKindBackoffMax = 15 * time.Minute
	DefaultUnknownKindLimit      = 7 * 24 * time.Hour
	// DefaultWaitTimeout bounds a wait for children or dependencies that sets no
	// deadline of its own.
	DefaultWaitTimeout = 7 * 24 * time.Hour

	// DefaultMaxReceiveCount is the work queue's maxReceiveCount in template.yaml
	// and localstack/resources.json.
	DefaultMaxReceiveCount = 10
	// DefaultReplaceAtReceiveCount leaves two receives of head room below
	// DefaultMaxReceiveCount: one for the receive that replaces the token and one
	// for a crash during it.
	DefaultReplaceAtReceiveCount = DefaultMaxReceiveCount - 2

	DefaultPollers           = 2
	DefaultBatchSize         = 10
	DefaultLongPoll          = 20 * time.Second
	DefaultInvocationTimeout = 60 * time.Second
	DefaultSweepEvery        = time.Minute

	// DefaultEnqueueConcurrency is how many DynamoDB or SQS calls EnqueueMany has
	// in flight at once; DefaultDispatchConcurrency the same for the dispatcher's
	// submissions of one batch.
	DefaultEnqueueConcurrency  = 10
	DefaultDispatchConcurrency = 10
	DefaultSweepConcurrency    = 4
	DefaultSweepPageSize       = 100
	// DefaultListLimit is how many tasks one page of Client.List holds
	// when ListOptions names no limit.
	DefaultListLimit = 100
)
