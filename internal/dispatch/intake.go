package dispatch

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lifecycle"
	"github.com/leasehold/leasehold/internal/queues"
	"github.com/leasehold/leasehold/internal/token"
)

// Message attributes of a submission forwarded to the intake dead-letter
// queue: the same names the worker uses on its own.
const (
	AttrReason          = lifecycle.AttrReason
	AttrSourceMessageID = lifecycle.AttrSourceMessageID
)

// maxReasonBytes bounds the reason attribute.
const maxReasonBytes = 1024

// HandleIntake is the Lambda handler for the intake queue's event source
// mapping (configure it with ReportBatchItemFailures). For each submission it
// validates, stores the task keyed by the client's id or else the message id,
// and sends dispatch tokens to the work queue in batches. Invalid
// submissions go to the intake dead-letter queue with their reason and are
// acknowledged. The response lists the messages to deliver again: those
// whose task could not be stored or whose token could not be sent.
func (d *Dispatcher) HandleIntake(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	n := len(ev.Records)
	failed := make([]bool, n)
	refs := make([]*ref, n)
	started := each(ctx, n, d.cfg.Concurrency, func(i int) {
		r, ok := d.intake(ctx, ev.Records[i])
		refs[i], failed[i] = r, !ok
	})
	for i := started; i < n; i++ {
		failed[i] = true
	}

	var batch []ref
	var owners []int
	for i, r := range refs {
		if r != nil && !failed[i] {
			batch = append(batch, *r)
			owners = append(owners, i)
		}
	}
	for j, err := range d.sendRefs(ctx, batch) {
		if err != nil {
			failed[owners[j]] = true
		}
	}

	var resp events.SQSEventResponse
	for i, r := range ev.Records {
		if failed[i] {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
		}
	}
	return resp, nil
}

// intake stores the task of one submission. It returns the token the task
// needs, if any, and false when the message must be delivered again.
func (d *Dispatcher) intake(ctx context.Context, msg events.SQSMessage) (*ref, bool) {
	log := d.cfg.Logger.With("message_id", msg.MessageId)
	sub, err := token.DecodeSubmission(msg.Body, d.cfg.Clock.Now())
	if err != nil {
		return nil, d.reject(ctx, msg, err.Error())
	}
	id := sub.ID
	if id == "" {
		id = msg.MessageId
	}
	log = log.With("task_id", id, "kind", sub.Kind)
	if sub.Queue != "" {
		// A queue that does not exist would leave the task waiting for
		// ever: reject the submission instead, with the reason.
		if _, err := d.cfg.Queues.URL(ctx, sub.Queue); errors.Is(err, queues.ErrNotFound) {
			return nil, d.reject(ctx, msg, err.Error())
		} else if err != nil {
			log.WarnContext(ctx, "could not look up the submission's queue", "queue", sub.Queue, "error", err)
			return nil, false
		}
	}
	task, dup, r, err := d.persist(ctx, d.prepare(lease.NewTask{
		ID:          id,
		Kind:        sub.Kind,
		Payload:     sub.Payload,
		MaxAttempts: sub.MaxAttempts,
		RunAt:       sub.RunAt,
		Queue:       sub.Queue,
		Metadata:    sub.Metadata,
	}, d.cfg.Clock.Now()))
	switch {
	case errors.Is(err, lease.ErrInvalid), errors.Is(err, lease.ErrConflict):
		return nil, d.reject(ctx, msg, err.Error())
	case err != nil:
		log.WarnContext(ctx, "could not store submitted task", "error", err)
		return nil, false
	case dup:
		log.InfoContext(ctx, "duplicate submission", "status", string(task.Status), "token", r != nil)
	default:
		log.InfoContext(ctx, "task submitted", "run_at", task.RunAt, "token", r != nil)
	}
	return r, true
}

// reject records an invalid submission: the reason goes to the log (never
// the body) and, with the body, to the intake dead-letter queue. It returns
// whether the message is done with.
func (d *Dispatcher) reject(ctx context.Context, msg events.SQSMessage, reason string) bool {
	log := d.cfg.Logger.With("message_id", msg.MessageId)
	log.WarnContext(ctx, "submission rejected", "reason", reason)
	if d.cfg.IntakeDLQURL == "" {
		return false
	}
	cctx, cancel := context.WithTimeout(ctx, d.cfg.CallTimeout)
	defer cancel()
	_, err := d.cfg.SQS.SendMessage(cctx, &sqs.SendMessageInput{
		QueueUrl:    aws.String(d.cfg.IntakeDLQURL),
		MessageBody: aws.String(msg.Body),
		MessageAttributes: map[string]types.MessageAttributeValue{
			AttrReason:          {DataType: aws.String("String"), StringValue: aws.String(lease.Truncate(reason, maxReasonBytes))},
			AttrSourceMessageID: {DataType: aws.String("String"), StringValue: aws.String(msg.MessageId)},
		},
	})
	if err != nil {
		log.ErrorContext(ctx, "could not forward rejected submission to the dead-letter queue", "error", fmt.Errorf("send: %w", err))
		return false
	}
	return true
}
