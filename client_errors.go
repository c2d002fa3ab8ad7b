package leasehold

import (
	"context"
	"errors"
	"fmt"
	"strings"

	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/leasehold/leasehold/internal/awsenv"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/query"
)

// Errors returned by the Client. Test them with errors.Is; the typed errors
// below carry details: ConflictError matches a sentinel of these,
// TaskError, UnreachableError, MissingResourceError and NotSentError are
// tested with errors.As alone.
var (
	// ErrNotFound: no task has this id.
	ErrNotFound = lease.ErrNotFound
	// ErrAlreadyExists: Enqueue found a task with this id. The task is not
	// enqueued again; the TaskInfo returned with the error is the stored one.
	ErrAlreadyExists = lease.ErrAlreadyExists
	// ErrConflict: Enqueue found a task with this id but another kind or
	// payload (see *ConflictError). Nothing is enqueued; the TaskInfo
	// returned with the error is the stored task. It does not match
	// ErrAlreadyExists.
	ErrConflict = lease.ErrConflict
	// ErrFinished: Cancel of a task that already ended.
	ErrFinished = lease.ErrFinished
	// ErrNotRetryable: Retry of a task that is not FAILED or CANCELLED.
	ErrNotRetryable = query.ErrNotRetryable
	// ErrInvalid: an argument breaks a rule (empty kind, payload that is not
	// JSON, attempts out of range, a list cursor this client did not issue).
	ErrInvalid = lease.ErrInvalid
	// ErrTooLarge: a payload over lease.MaxPayloadBytes (128 KiB). It also
	// matches ErrInvalid.
	ErrTooLarge = lease.ErrTooLarge
	// ErrBackend: DynamoDB or SQS failed the call (throttling, service or
	// network errors). Such calls are worth retrying.
	ErrBackend = lease.ErrBackend
)

// ConflictError reports an id that names a stored task of another kind
// (Field "kind") or with another payload (Field "payload"); Status is the
// stored task's. Payloads are compared as JSON documents: white space and
// the order of object members do not matter.
type ConflictError struct {
	TaskID string
	Field  string // "kind" or "payload"
	Status Status // the stored task's
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("id conflict: task %s exists (%s) with another %s", lease.DisplayID(e.TaskID), e.Status, e.Field)
}

func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// UnreachableError reports a call that never got an answer: the DynamoDB
// or SQS endpoint could not be reached at all. Nothing listens at the
// endpoint, its name does not resolve, or it did not answer in time. Test
// for it with errors.As(err, &u), u a *UnreachableError.
type UnreachableError struct {
	Service  string // "DynamoDB" or "SQS"
	Endpoint string // scheme://host[:port]
	Reason   string // "connection refused", "no such host", "timed out", ...
	Err      error  // the SDK's error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot reach %s at %s: %s", e.Service, e.Endpoint, e.Reason)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// MissingResourceError reports a table or queue that does not exist where
// the endpoint answers, and where it was looked for: a table in another
// region or behind another endpoint is the usual cause. Test for it with
// errors.As(err, &m), m a *MissingResourceError.
type MissingResourceError struct {
	Service  string // "DynamoDB" or "SQS"
	Resource string // table name or queue URL
	Region   string // the region of the call, when known
	Endpoint string // where the call went, when known
	Err      error
}

func (e *MissingResourceError) Error() string {
	what := "table"
	if e.Service == "SQS" {
		what = "queue"
	}
	msg := fmt.Sprintf("%s %s %s does not exist", e.Service, what, e.Resource)
	var where []string
	if e.Region != "" {
		where = append(where, "region "+e.Region)
	}
	if e.Endpoint != "" {
		where = append(where, "endpoint "+e.Endpoint)
	}
	if len(where) > 0 {
		msg += " (" + strings.Join(where, ", ") + ")"
	}
	return msg
}

func (e *MissingResourceError) Unwrap() error { return e.Err }

// NotSentError reports a task that was stored but whose dispatch token
// could not be sent. The sweeper dispatches it once the dispatch grace has
// passed; enqueueing it again sends a token at once. Test for it with
// errors.As(err, &n), n a *NotSentError; Err says why the send failed.
type NotSentError struct {
	ID  string
	Err error
}

func (e *NotSentError) Error() string {
	return fmt.Sprintf("task %s is stored but was not dispatched (the sweeper will dispatch it; enqueue it again to dispatch it now): %v", e.ID, e.Err)
}

func (e *NotSentError) Unwrap() error { return e.Err }

// TaskError reports a task that ended without a result: Result gives it
// for a task that ended FAILED or CANCELLED. Test for it with
// errors.As(err, &te), te a *TaskError, and read te.Status.
type TaskError struct {
	ID      string
	Status  Status // StatusFailed or StatusCancelled
	Message string // the task's last error
}

func (e *TaskError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("task %s ended %s", e.ID, e.Status)
	}
	return fmt.Sprintf("task %s ended %s: %s", e.ID, e.Status, e.Message)
}

// translate turns SDK failures that mean "the stack is not there" into the
// client's errors. Everything else passes through: the lease store already
// translated condition failures into the sentinels above.
func (c *Client) translate(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		// The caller gave up: do not blame the endpoint.
		return err
	}
	var ddbMissing *ddbtypes.ResourceNotFoundException
	if errors.As(err, &ddbMissing) {
		return &MissingResourceError{Service: "DynamoDB", Resource: c.table, Region: c.region, Endpoint: c.endpoints["DynamoDB"], Err: err}
	}
	var queueMissing *sqstypes.QueueDoesNotExist
	if errors.As(err, &queueMissing) {
		c.mu.Lock()
		queue := c.queueURL
		c.mu.Unlock()
		if queue == "" {
			queue = c.queueName
		}
		return &MissingResourceError{Service: "SQS", Resource: queue, Region: c.region, Endpoint: c.endpoints["SQS"], Err: err}
	}
	if u := c.unreachable(err); u != nil {
		return u
	}
	return err
}

// unreachable recognises a request that could not be sent or got no answer
// within the call timeout (the caller's own ctx being still live).
func (c *Client) unreachable(err error) *UnreachableError {
	u, ok := awsenv.ClassifyUnreachable(err, c.endpoints, c.opts.callTimeout)
	if !ok {
		return nil
	}
	return &UnreachableError{Service: u.Service, Endpoint: u.Endpoint, Reason: u.Reason, Err: err}
}

// optionError is a bad option of a call that submits nothing (a list limit,
// a cursor, a status name): it matches ErrInvalid, but its message does not
// start with "invalid task:", which would blame a task.
type optionError struct{ err error }

func (e *optionError) Error() string        { return e.err.Error() }
func (e *optionError) Is(target error) bool { return target == ErrInvalid }
func (e *optionError) Unwrap() error        { return e.err }

func invalidOption(format string, args ...any) error {
	return &optionError{fmt.Errorf(format, args...)}
}
