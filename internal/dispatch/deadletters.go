package dispatch

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/leasehold/leasehold/internal/lifecycle"
)

// Dead-letter recovery. The work queue's redrive policy moves a message to
// the dead-letter queue after maxReceiveCount receives, whether or not a
// worker ever handled it: receives whose answers were lost, workers that
// died holding it. Most tasks are safe anyway (their sweep entry brings
// them back), but a task created and claimed from its own message has no
// sweep entry while it runs: that message is its only way back. So each
// sweep also takes, from the work dead-letter queue, the messages SQS moved
// there (no leasehold-reason attribute: the worker forwards what it rejects
// with one, and those are left for an operator) and sends each back to the
// work queue, counting the times in the leasehold-redrives attribute. A
// message moved there more than MaxDeadLetterRedrives times stays, as does
// anything this code cannot send back.

// AttrRedrives counts the times a message was sent back from the work
// dead-letter queue.
const AttrRedrives = "leasehold-redrives"

// MaxDeadLetterRedrives is how many times a message is sent back from the
// work dead-letter queue before it is left there for an operator: a token
// that keeps killing its workers must not circle forever.
const MaxDeadLetterRedrives = 3

// Bounds of one sweep's dead-letter recovery: receives of up to ten
// messages, each hidden for deadLetterHold while the sweep reads on. The
// messages left in the queue stay hidden until the last receive, so that
// each receive reaches messages behind them (a token moved there can sit
// behind any number of rejected messages), and are then made visible
// again at once.
const (
	maxDeadLetterReceives = 30
	deadLetterHold        = 30 // seconds
)

// DeadLetterClient is the part of *sqs.Client dead-letter recovery uses.
type DeadLetterClient interface {
	ReceiveMessage(ctx context.Context, params *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, params *sqs.DeleteMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
	ChangeMessageVisibilityBatch(ctx context.Context, params *sqs.ChangeMessageVisibilityBatchInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
}

// RedriveStats counts what one dead-letter recovery did.
type RedriveStats struct {
	// Redriven is how many messages were sent back to the work queue.
	Redriven int `json:"redriven"`
	// Left is how many were left in the dead-letter queue: rejected by a
	// worker (with a reason), sent back too often, or not sent back now.
	Left int `json:"left"`
}

// RedriveDeadLetters sends the messages SQS moved to the work dead-letter
// queue back to the work queue (see the package's dead-letter recovery),
// at most maxDeadLetterReceives receives of ten messages per call. Without a dead-letter
// queue (Config.WorkDLQURL) it does nothing.
func (d *Dispatcher) RedriveDeadLetters(ctx context.Context) (RedriveStats, error) {
	var st RedriveStats
	if d.cfg.WorkDLQURL == "" {
		return st, nil
	}
	client := d.cfg.SQS.(DeadLetterClient) // checked by New
	st, kept, err := d.redriveDeadLetters(ctx, client)
	// What stays is shown again only now: hidden, it let each receive
	// above reach the messages behind it.
	for i := 0; i < len(kept); i += 10 {
		err = errors.Join(err, d.showDeadLetters(ctx, client, kept[i:min(i+10, len(kept))]))
	}
	return st, err
}

// redriveDeadLetters is RedriveDeadLetters's receives; it returns the
// messages it leaves in the queue, still hidden.
func (d *Dispatcher) redriveDeadLetters(ctx context.Context, client DeadLetterClient) (RedriveStats, []types.Message, error) {
	var (
		st   RedriveStats
		kept []types.Message
	)
	seen := map[string]bool{}
	for range maxDeadLetterReceives {
		if err := context.Cause(ctx); err != nil {
			return st, kept, err
		}
		cctx, cancel := context.WithTimeout(ctx, d.cfg.CallTimeout)
		out, err := client.ReceiveMessage(cctx, &sqs.ReceiveMessageInput{
			QueueUrl:              aws.String(d.cfg.WorkDLQURL),
			MaxNumberOfMessages:   10,
			VisibilityTimeout:     deadLetterHold,
			MessageAttributeNames: []string{"All"},
		})
		cancel()
		if err != nil {
			return st, kept, fmt.Errorf("receive from the work dead-letter queue: %w", err)
		}
		if len(out.Messages) == 0 {
			return st, kept, nil
		}
		// A message this call saw already (its hold ran out on a slow
		// queue, and it was received again) is only left again.
		var back, leave, again []types.Message
		for _, m := range out.Messages {
			id := aws.ToString(m.MessageId)
			switch {
			case seen[id]:
				again = append(again, m)
			case redrivable(m):
				back = append(back, m)
			default:
				leave = append(leave, m)
			}
			seen[id] = true
		}
		sent := d.sendBack(ctx, back)
		var done []types.Message
		for i, m := range back {
			if sent[i] {
				done = append(done, m)
			} else {
				leave = append(leave, m)
			}
		}
		st.Redriven += len(done)
		st.Left += len(leave)
		fresh := len(again) < len(out.Messages)
		kept = append(append(kept, leave...), again...)
		if err := d.deleteDeadLetters(ctx, client, done); err != nil {
			return st, kept, err
		}
		if !fresh {
			return st, kept, nil // the same messages again: every one was seen
		}
	}
	return st, kept, nil
}

// redrivable says whether m was moved to the dead-letter queue by SQS (no
// reason from a worker) and may be sent back once more.
func redrivable(m types.Message) bool {
	if _, rejected := m.MessageAttributes[lifecycle.AttrReason]; rejected {
		return false
	}
	return redrives(m) < MaxDeadLetterRedrives
}

// redrives is how many times m was sent back before.
func redrives(m types.Message) int {
	a, ok := m.MessageAttributes[AttrRedrives]
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(aws.ToString(a.StringValue))
	if err != nil || n < 0 {
		return MaxDeadLetterRedrives // unreadable: leave it to an operator
	}
	return n
}

// sendBack sends msgs to the work queue, body and attributes as they were,
// with the redrive count one higher, and reports which were sent.
func (d *Dispatcher) sendBack(ctx context.Context, msgs []types.Message) []bool {
	sent := make([]bool, len(msgs))
	if len(msgs) == 0 {
		return sent
	}
	entries := make([]types.SendMessageBatchRequestEntry, len(msgs))
	for i, m := range msgs {
		attrs := maps.Clone(m.MessageAttributes)
		if attrs == nil {
			attrs = map[string]types.MessageAttributeValue{}
		}
		attrs[AttrRedrives] = types.MessageAttributeValue{DataType: aws.String("Number"), StringValue: aws.String(strconv.Itoa(redrives(m) + 1))}
		entries[i] = types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: m.Body, MessageAttributes: attrs}
	}
	cctx, cancel := context.WithTimeout(ctx, d.cfg.CallTimeout)
	out, err := d.cfg.SQS.SendMessageBatch(cctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(d.cfg.WorkQueueURL), Entries: entries})
	cancel()
	if err != nil {
		d.cfg.Logger.WarnContext(ctx, "could not send dead letters back to the work queue; the next sweep tries again", "error", err, "count", len(msgs))
		return sent
	}
	for _, ok := range out.Successful {
		if i, err := strconv.Atoi(aws.ToString(ok.Id)); err == nil && i >= 0 && i < len(sent) {
			sent[i] = true
			d.cfg.Logger.InfoContext(ctx, "dead letter sent back to the work queue", "message_id", aws.ToString(msgs[i].MessageId), "redrive", redrives(msgs[i])+1)
		}
	}
	return sent
}

// deleteDeadLetters deletes msgs, at most one receive's ten, from the
// dead-letter queue. A copy left undeleted comes back after the hold, is
// sent back again, and its second token is a duplicate the claim turns
// into a no-op.
func (d *Dispatcher) deleteDeadLetters(ctx context.Context, client DeadLetterClient, msgs []types.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	entries := make([]types.DeleteMessageBatchRequestEntry, len(msgs))
	for i, m := range msgs {
		entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle}
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.CallTimeout)
	defer cancel()
	if _, err := client.DeleteMessageBatch(cctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(d.cfg.WorkDLQURL), Entries: entries}); err != nil {
		return fmt.Errorf("work dead-letter queue: %w", err)
	}
	return nil
}

// showDeadLetters makes msgs, at most ten, visible again at once in the
// dead-letter queue, where they stay.
func (d *Dispatcher) showDeadLetters(ctx context.Context, client DeadLetterClient, msgs []types.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	entries := make([]types.ChangeMessageVisibilityBatchRequestEntry, len(msgs))
	for i, m := range msgs {
		entries[i] = types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle}
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.CallTimeout)
	defer cancel()
	if _, err := client.ChangeMessageVisibilityBatch(cctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(d.cfg.WorkDLQURL), Entries: entries}); err != nil {
		return fmt.Errorf("work dead-letter queue: %w", err)
	}
	return nil
}
