// Package settings names leasehold's settings for code outside the
// module: the LEASEHOLD_* environment variable of each (the Env constants)
// and the typed default of each (the fields of the Defaults that Default
// returns), with the value types a setting takes (RateLimit,
// ExponentialBackoff). The table that ties each variable to its config
// field, its default and its meaning, the reader that fills a config from
// the environment, and the rendering of that table into docs/worker.md,
// docs/dispatch.md and docs/running.md live in internal/settingstable, and
// the defaults' constants, which the module's own code applies, in
// internal/defaults: they are the module's machinery, not names a user
// needs.
package settings

// The environment variables, one constant each: code names them by these
// constants (internal/codeshape checks that no other package spells one
// out), and each has its row in the settings table
// (internal/settingstable).
const (
	EnvTable                 = "LEASEHOLD_TABLE"
	EnvWorkQueueURL          = "LEASEHOLD_WORK_QUEUE_URL"
	EnvServeQueueURLs        = "LEASEHOLD_SERVE_QUEUE_URLS"
	EnvWorkDLQURL            = "LEASEHOLD_WORK_DLQ_URL"
	EnvWorkDLQName           = "LEASEHOLD_WORK_DLQ_NAME"
	EnvIntakeDLQURL          = "LEASEHOLD_INTAKE_DLQ_URL"
	EnvNamedQueues           = "LEASEHOLD_NAMED_QUEUES"
	EnvLeaseDuration         = "LEASEHOLD_LEASE_DURATION"
	EnvRenewBefore           = "LEASEHOLD_RENEW_BEFORE"
	EnvMaxAttempts           = "LEASEHOLD_MAX_ATTEMPTS"
	EnvConcurrency           = "LEASEHOLD_CONCURRENCY"
	EnvClockSkew             = "LEASEHOLD_CLOCK_SKEW"
	EnvDeadlineMargin        = "LEASEHOLD_DEADLINE_MARGIN"
	EnvBackoff               = "LEASEHOLD_BACKOFF"
	EnvVisibilityMargin      = "LEASEHOLD_VISIBILITY_MARGIN"
	EnvDispatchGrace         = "LEASEHOLD_DISPATCH_GRACE"
	EnvReplaceAtReceiveCount = "LEASEHOLD_REPLACE_AT_RECEIVE_COUNT"
	EnvUnknownKindBackoff    = "LEASEHOLD_UNKNOWN_KIND_BACKOFF"
	EnvUnknownKindLimit      = "LEASEHOLD_UNKNOWN_KIND_LIMIT"
	EnvWaitTimeout           = "LEASEHOLD_WAIT_TIMEOUT"
	EnvListing               = "LEASEHOLD_LISTING"
	EnvDispatchConcurrency   = "LEASEHOLD_DISPATCH_CONCURRENCY"
	EnvSweepConcurrency      = "LEASEHOLD_SWEEP_CONCURRENCY"
	EnvLogLevel              = "LEASEHOLD_LOG_LEVEL"
	EnvPollers               = "LEASEHOLD_POLLERS"
	EnvBatchSize             = "LEASEHOLD_BATCH_SIZE"
	EnvBatchWindow           = "LEASEHOLD_BATCH_WINDOW"
	EnvInvocationTimeout     = "LEASEHOLD_INVOCATION_TIMEOUT"
	EnvLongPoll              = "LEASEHOLD_LONG_POLL"
	EnvReceiveVisibility     = "LEASEHOLD_RECEIVE_VISIBILITY"
	EnvSweepEvery            = "LEASEHOLD_SWEEP_EVERY"
	EnvRateLimits            = "LEASEHOLD_RATE_LIMITS"
	EnvKindConcurrency       = "LEASEHOLD_KIND_CONCURRENCY"
	EnvIntakeQueueURL        = "LEASEHOLD_INTAKE_QUEUE_URL"
	EnvMetrics               = "LEASEHOLD_METRICS"
	EnvFireSchedules         = "LEASEHOLD_FIRE_SCHEDULES"
	EnvScheduleGroup         = "LEASEHOLD_SCHEDULE_GROUP"
	EnvSchedulerRoleARN      = "LEASEHOLD_SCHEDULER_ROLE_ARN"
	EnvScheduleDLQARN        = "LEASEHOLD_SCHEDULE_DLQ_ARN"
	EnvPayloadBucket         = "LEASEHOLD_PAYLOAD_BUCKET"
)
