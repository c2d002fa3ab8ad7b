// Package iam is the one list of what each Lambda function may do in AWS: the
// actions its code calls and the template resources they target, and the
// actions Lambda itself performs with the function's role. Beside it stands
// the environment each function reads, which the template must set.
//
// The list is used three ways:
//
//   - at run time, the function mains install Enforce on their aws.Config, so
//     a call that is not in the list fails at once with ErrNotGranted instead
//     of with AccessDenied in production only;
//   - the tests hold template.yaml to it: each function's role grants exactly
//     Calls plus Platform, action by action and resource by resource;
//   - the tests run each function's flows against the local stack through
//     Record and check that every call in the list is made, so the role
//     carries nothing the code does not use.
//
// Adding an AWS call therefore means adding it here and to the role in
// template.yaml; the tests fail until both are done. Likewise a new
// environment variable (an Env* constant) must be listed here, in Env or in
// Unread, and Env must match the function's Environment in the template.
//
// # Actions
//
// An action is what IAM authorizes, "service:Action". It is usually the API
// operation's name, but batch operations of SQS are authorized as their
// single forms (SendMessageBatch needs sqs:SendMessage); ActionOf knows
// these.
//
// # Resources
//
// A resource is the logical id of a resource in template.yaml
// ("TasksTable"), or a logical id with a suffix for a part of it: a table's
// index is "TasksTable/index/sweep", granted in the template as
// !Sub "${TasksTable.Arn}/index/sweep"; the payload bucket's objects are
// "PayloadBucket/tasks/*", granted as !Sub "${PayloadBucket.Arn}/tasks/*":
// the one pattern, since S3 grants objects by key prefix.
package iam

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"

	"github.com/leasehold/leasehold/settings"
)

// Grant allows one action on one resource of the template.
type Grant struct {
	// Action is the IAM action, such as "dynamodb:PutItem".
	Action string
	// Resource is the template's logical id of the target, with
	// "/index/NAME" for a table's index.
	Resource string
}

// Function is what one function's role allows.
type Function struct {
	// LogicalID is the function's logical id in template.yaml.
	LogicalID string
	// Role is the logical id of its AWS::IAM::Role.
	Role string
	// Calls are the calls its code makes. Enforce allows exactly their
	// actions.
	Calls []Grant
	// Platform are the actions Lambda performs with the role on the
	// function's behalf: polling its queue for the event source mapping,
	// writing its logs. The code never makes them.
	Platform []Grant
	// Env are the environment variables the function reads; the template
	// sets exactly these.
	Env []string
	// Unread are variables declared by code linked into the function that
	// the function never reads, with the reason.
	Unread map[string]string
}

// Granted is Calls followed by Platform: everything the role must allow.
func (f Function) Granted() []Grant { return slices.Concat(f.Calls, f.Platform) }

// Logical ids of the template's resources the functions use.
const (
	TasksTable            = "TasksTable"
	SweepIndex            = TasksTable + "/index/sweep"
	WorkQueue             = "WorkQueue"
	WorkDeadLetterQueue   = "WorkDeadLetterQueue"
	IntakeQueue           = "IntakeQueue"
	IntakeDeadLetterQueue = "IntakeDeadLetterQueue"
	WorkerLogGroup        = "WorkerLogGroup"
	DispatchLogGroup      = "DispatchLogGroup"
	// PayloadBucket is the bucket of values over their inline limits
	// (internal/claimcheck), and PayloadObjects its objects: every key the
	// code writes starts tasks/ (claimcheck.Key).
	PayloadBucket  = "PayloadBucket"
	PayloadObjects = PayloadBucket + "/tasks/*"
	// NamedQueues are the queues tasks may name (docs/worker.md,
	// "Queues"): exactly the ARNs the deployer lists in the template's
	// NamedQueueArns parameter, granted as !Ref NamedQueueArns in a
	// statement kept only when the list is not empty (condition
	// HasNamedQueues). Never a pattern such as ${AWS::StackName}-*, which
	// also covers the intake queue, the dead-letter queues and the queues
	// of every stack whose name starts the same.
	NamedQueues = "NamedQueueArns"
	// NamedDeadLetterQueues are the dead-letter queues of the named queues
	// (those their redrive policies name), from which the sweep sends what
	// SQS moved there back: exactly the ARNs of the template's
	// NamedDeadLetterQueueArns parameter, granted as !Ref
	// NamedDeadLetterQueueArns in a statement kept only when the list is
	// not empty (condition HasNamedDeadLetterQueues).
	NamedDeadLetterQueues = "NamedDeadLetterQueueArns"
)

// eventSourceMapping is what Lambda needs to poll queue for a function.
func eventSourceMapping(queue string) []Grant {
	return []Grant{
		{"sqs:ReceiveMessage", queue},
		{"sqs:DeleteMessage", queue},
		{"sqs:GetQueueAttributes", queue},
	}
}

// logs is what Lambda needs to write a function's logs to its log group.
func logs(group string) []Grant {
	return []Grant{
		{"logs:CreateLogStream", group},
		{"logs:PutLogEvents", group},
	}
}

// Worker is the worker function (functions/worker).
var Worker = Function{
	LogicalID: "WorkerFunction",
	Role:      "WorkerRole",
	Calls: []Grant{
		{"dynamodb:PutItem", TasksTable},           // create-and-claim of an inline task
		{"dynamodb:UpdateItem", TasksTable},        // claim, renew, finish, release
		{"dynamodb:GetItem", TasksTable},           // a created dependent's read; a callback's task; a full slot set and its oldest holders
		{"dynamodb:BatchGetItem", TasksTable},      // a resumed task reads the tasks it waited for
		{"sqs:SendMessage", WorkQueue},             // fresh tokens for retries and early tokens
		{"sqs:ChangeMessageVisibility", WorkQueue}, // renewals; hiding a message whose task is leased
		{"sqs:DeleteMessage", WorkQueue},           // a message replaced by a fresh token near maxReceiveCount
		{"sqs:ListQueueTags", WorkQueue},           // whether the queue is paused (leasehold pause), at most every 2 s
		{"sqs:SendMessage", WorkDeadLetterQueue},   // messages that name no task, with their reason
		{"sqs:GetQueueUrl", NamedQueues},           // the queue a task names, looked up once
		{"sqs:SendMessage", NamedQueues},           // fresh tokens of tasks on named queues
		{"s3:GetObject", PayloadObjects},           // a payload kept in the payload bucket; results of waited-for tasks kept there
		{"s3:PutObject", PayloadObjects},           // a result over the inline limit
	},
	Platform: slices.Concat(eventSourceMapping(WorkQueue), logs(WorkerLogGroup)),
	Env: []string{
		settings.EnvTable, settings.EnvWorkQueueURL, settings.EnvWorkDLQURL,
		settings.EnvLeaseDuration, settings.EnvRenewBefore, settings.EnvMaxAttempts,
		settings.EnvConcurrency, settings.EnvClockSkew, settings.EnvDeadlineMargin,
		settings.EnvDispatchGrace, settings.EnvLogLevel, settings.EnvReplaceAtReceiveCount,
		settings.EnvVisibilityMargin, settings.EnvBackoff, settings.EnvUnknownKindBackoff,
		settings.EnvUnknownKindLimit, settings.EnvWaitTimeout, settings.EnvListing,
		settings.EnvRateLimits, settings.EnvKindConcurrency, settings.EnvPayloadBucket,
	},
	Unread: merge(runnerEnv, dispatchEnv, fromEnvOnly, processEnv),
}

// Dispatch is the dispatch function (functions/dispatch).
var Dispatch = Function{
	LogicalID: "DispatchFunction",
	Role:      "DispatchRole",
	Calls: []Grant{
		{"dynamodb:PutItem", TasksTable},                       // store a submission
		{"dynamodb:UpdateItem", TasksTable},                    // mark a swept task dispatched
		{"dynamodb:Query", SweepIndex},                         // due tasks of a shard
		{"sqs:SendMessage", WorkQueue},                         // dispatch tokens (SendMessageBatch)
		{"sqs:SendMessage", IntakeDeadLetterQueue},             // invalid submissions, with their reason
		{"sqs:ReceiveMessage", WorkDeadLetterQueue},            // the sweep's dead-letter recovery
		{"sqs:DeleteMessage", WorkDeadLetterQueue},             // a dead letter sent back (DeleteMessageBatch)
		{"sqs:ChangeMessageVisibility", WorkDeadLetterQueue},   // a dead letter left there, visible again
		{"sqs:GetQueueUrl", NamedQueues},                       // the queue a task names, looked up once
		{"sqs:SendMessage", NamedQueues},                       // tokens of tasks on named queues; their dead letters sent back
		{"sqs:GetQueueAttributes", NamedQueues},                // a named queue's ARN and redrive policy: its dead-letter queue, once an hour
		{"sqs:ReceiveMessage", NamedDeadLetterQueues},          // the sweep's dead-letter recovery on named queues
		{"sqs:DeleteMessage", NamedDeadLetterQueues},           // a dead letter sent back (DeleteMessageBatch)
		{"sqs:ChangeMessageVisibility", NamedDeadLetterQueues}, // a dead letter left there, visible again
	},
	Platform: slices.Concat(eventSourceMapping(IntakeQueue), logs(DispatchLogGroup)),
	Env: []string{
		settings.EnvTable, settings.EnvWorkQueueURL, settings.EnvIntakeDLQURL, settings.EnvWorkDLQURL,
		settings.EnvDispatchGrace, settings.EnvMaxAttempts, settings.EnvDispatchConcurrency,
		settings.EnvSweepConcurrency, settings.EnvLogLevel, settings.EnvListing, settings.EnvNamedQueues,
	},
	Unread: merge(runnerEnv, workerEnv, fromEnvOnly, processEnv, bucketEnv),
}

// Variables of code that one function links but only another runs.
var (
	runnerEnv = unread("WorkerConfig's Run fields (package settings): only Worker.Run uses them, in a worker process that polls the queue and sweeps itself; in Lambda the event source mapping polls and the scheduled dispatch function sweeps",
		settings.EnvPollers, settings.EnvBatchSize, settings.EnvBatchWindow, settings.EnvInvocationTimeout, settings.EnvSweepEvery,
		settings.EnvReceiveVisibility, settings.EnvLongPoll)
	fromEnvOnly = merge(unread("read by leasehold.NewWorkerFromEnv to look the DLQ up by name; the functions do not call it (the worker function is given LEASEHOLD_WORK_DLQ_URL)",
		settings.EnvWorkDLQName), unread("WorkerConfig.QueueURLs, the queues Worker.Run polls; on Lambda each event source mapping brings its own queue",
		settings.EnvServeQueueURLs))
	bucketEnv = unread("the payload bucket: the worker and the client read it; the dispatcher stores intake submissions and sweeps, which keep their payloads inline (an intake submission is one SQS message, docs/limits.md)",
		settings.EnvPayloadBucket)
	processEnv = unread("the leasehold command's and serve.RunFromEnv's (settingstable.Process): the off-Lambda process and the schedule verbs read them; no function does",
		settings.EnvIntakeQueueURL, settings.EnvMetrics, settings.EnvFireSchedules, settings.EnvScheduleGroup,
		settings.EnvSchedulerRoleARN, settings.EnvScheduleDLQARN)
	dispatchEnv = unread("read by dispatch.SettingsFromEnv, which only the dispatch function calls",
		settings.EnvIntakeDLQURL, settings.EnvDispatchConcurrency, settings.EnvSweepConcurrency, settings.EnvNamedQueues)
	workerEnv = unread("WorkerConfig's fields (package settings), which only the worker function loads",
		settings.EnvLeaseDuration, settings.EnvRenewBefore,
		settings.EnvConcurrency, settings.EnvClockSkew, settings.EnvDeadlineMargin,
		settings.EnvReplaceAtReceiveCount, settings.EnvVisibilityMargin, settings.EnvBackoff,
		settings.EnvUnknownKindBackoff, settings.EnvUnknownKindLimit, settings.EnvWaitTimeout,
		settings.EnvRateLimits, settings.EnvKindConcurrency)
)

func unread(why string, names ...string) map[string]string {
	m := map[string]string{}
	for _, n := range names {
		m[n] = why
	}
	return m
}

func merge(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		maps.Copy(out, m)
	}
	return out
}

// Functions are all the functions of the template.
var Functions = []Function{Worker, Dispatch}

// Policy is a managed policy of the template for the people and roles that
// operate a stack, rather than for a function: what one CLI command calls.
type Policy struct {
	// LogicalID is its AWS::IAM::ManagedPolicy in template.yaml.
	LogicalID string
	// Calls are the calls the command makes; the policy grants exactly
	// these.
	Calls []Grant
}

// Policies are all the operator policies of the template.
var Policies = []Policy{PauseQueues}

// PauseQueues is `leasehold pause|resume [QUEUE]` (package admin's Pause)
// on the stack's work queue and on every queue of NamedQueueArns (another
// fleet's work queue, served by a worker of the same project): the
// template's PauseQueuesPolicy, to attach to whoever pauses them. Pausing
// is the queue's tag, which every worker reads (the worker function's
// sqs:ListQueueTags), so the policy grants the tag calls and nothing
// else: no Lambda action at all, since lambda:UpdateEventSourceMapping
// cannot be limited to Enabled and its holder could set a FilterCriteria,
// whose unmatched SQS messages Lambda deletes.
var PauseQueues = Policy{
	LogicalID: "PauseQueuesPolicy",
	Calls: []Grant{
		{"sqs:GetQueueUrl", WorkQueue},   // the queue given by name
		{"sqs:TagQueue", WorkQueue},      // pause: the leasehold-paused tag
		{"sqs:UntagQueue", WorkQueue},    // resume
		{"sqs:ListQueueTags", WorkQueue}, // whether, and since when, it is paused
		// The same on another fleet's queue.
		{"sqs:GetQueueUrl", NamedQueues},
		{"sqs:TagQueue", NamedQueues},
		{"sqs:UntagQueue", NamedQueues},
		{"sqs:ListQueueTags", NamedQueues},
	},
}

// ErrNotGranted: a call's action is not among the function's grants.
var ErrNotGranted = errors.New("AWS action not granted")

// NotGrantedError names the action that was refused.
type NotGrantedError struct {
	Action string
}

func (e *NotGrantedError) Error() string {
	return fmt.Sprintf("%s: %s is not in this function's grants; add it to internal/iam and to the function's role in template.yaml",
		ErrNotGranted, e.Action)
}

// Is makes errors.Is(err, ErrNotGranted) hold.
func (e *NotGrantedError) Is(target error) bool { return target == ErrNotGranted }

// servicePrefix maps an SDK service id to its IAM prefix: the services the
// functions use. A call to any other fails Enforce until it is added.
var servicePrefix = map[string]string{
	"DynamoDB": "dynamodb",
	"SQS":      "sqs",
	"S3":       "s3",
}

// batchActions are operations IAM authorizes as another action.
var batchActions = map[string]string{
	"sqs:SendMessageBatch":             "sqs:SendMessage",
	"sqs:DeleteMessageBatch":           "sqs:DeleteMessage",
	"sqs:ChangeMessageVisibilityBatch": "sqs:ChangeMessageVisibility",
}

// ActionOf returns the IAM action that authorizes operation of the SDK
// service serviceID, or false for a service this package does not know.
func ActionOf(serviceID, operation string) (string, bool) {
	prefix, ok := servicePrefix[serviceID]
	if !ok {
		return "", false
	}
	action := prefix + ":" + operation
	if a, ok := batchActions[action]; ok {
		action = a
	}
	return action, true
}

// actionOf is ActionOf for the call in ctx.
func actionOf(ctx context.Context) (string, error) {
	service, op := awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx)
	action, ok := ActionOf(service, op)
	if !ok {
		return "", &NotGrantedError{Action: fmt.Sprintf("%s (service %q)", op, service)}
	}
	return action, nil
}

// Enforce returns an SDK API option (append it to aws.Config.APIOptions)
// that fails every call whose action is not among grants' actions with a
// *NotGrantedError, before anything is sent. It checks actions only: which
// resource a call targets is the code's business, and the tests check it.
func Enforce(grants []Grant) func(*middleware.Stack) error {
	allowed := map[string]bool{}
	for _, g := range grants {
		allowed[g.Action] = true
	}
	return func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("leasehold/iam.Enforce",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				action, err := actionOf(ctx)
				if err != nil {
					return middleware.InitializeOutput{}, middleware.Metadata{}, err
				}
				if !allowed[action] {
					return middleware.InitializeOutput{}, middleware.Metadata{}, &NotGrantedError{Action: action}
				}
				return next.HandleInitialize(ctx, in)
			}), middleware.After)
	}
}

// Call is one AWS call as Record saw it.
type Call struct {
	// Action is the IAM action that authorizes it.
	Action string
	// Target is the resource named in the request: the table name (with
	// "/index/NAME" for a query of an index), the queue URL, or BUCKET/KEY
	// of an object; empty when the request names none.
	Target string
}

// Record returns an SDK API option that reports every call to fn before it
// is sent, whatever its outcome. fn may be called from many goroutines.
func Record(fn func(Call)) func(*middleware.Stack) error {
	return func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("leasehold/iam.Record",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				action, err := actionOf(ctx)
				if err != nil {
					action = awsmiddleware.GetServiceID(ctx) + ":" + awsmiddleware.GetOperationName(ctx)
				}
				fn(Call{Action: action, Target: targetOf(in.Parameters)})
				return next.HandleInitialize(ctx, in)
			}), middleware.After)
	}
}

// targetOf reads the resource a request names from its TableName (and
// IndexName), QueueUrl, Bucket (and Key) or QueueName field, or the one
// table of a batch call's RequestItems (several tables name none).
func targetOf(params any) string {
	v := reflect.ValueOf(params)
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return ""
	}
	str := func(name string) string {
		f := v.FieldByName(name)
		if !f.IsValid() || f.Kind() != reflect.Pointer || f.IsNil() || f.Elem().Kind() != reflect.String {
			return ""
		}
		return f.Elem().String()
	}
	if t := str("TableName"); t != "" {
		if i := str("IndexName"); i != "" {
			return t + "/index/" + i
		}
		return t
	}
	if u := str("QueueUrl"); u != "" {
		return u
	}
	if b := str("Bucket"); b != "" {
		return b + "/" + str("Key") // GetObject, PutObject
	}
	if f := v.FieldByName("RequestItems"); f.IsValid() && f.Kind() == reflect.Map && f.Type().Key().Kind() == reflect.String && f.Len() == 1 {
		return f.MapKeys()[0].String() // BatchGetItem, BatchWriteItem
	}
	return str("QueueName") // GetQueueUrl
}
