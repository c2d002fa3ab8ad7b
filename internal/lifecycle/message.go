package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/queues"
	"github.com/leasehold/leasehold/internal/token"
)

// The message's fate when its task cannot be settled by this execution:
// kept hidden, replaced by a fresh token, re-sent, or dead-lettered. Any
// state may end here.

// send puts a fresh token with body on the task's queue: the queue the task
// names once it is known, else the queue this message came from. A queue
// that does not exist gives an error wrapping queues.ErrNotFound.
func (x *execution) send(ctx context.Context, body string, delay time.Duration) error {
	if x.task.ID != "" {
		return x.sendTo(ctx, x.task.Queue, body, delay)
	}
	return x.sendURL(ctx, x.msgQueueURL(), body, delay)
}

// sendTo puts body on the queue named queue ("" is the default work queue).
func (x *execution) sendTo(ctx context.Context, queue, body string, delay time.Duration) error {
	// Resolved like any clean-up call: detached from shutdown, bounded by
	// the call timeout (a cached name makes no call).
	rctx, cancel := x.call()
	u, err := x.cfg.Queues.URL(rctx, queue)
	cancel()
	if err != nil {
		x.log.warn("could not find the task's queue; the task waits for a later sweep", "queue", queue, "reason", err)
		return fmt.Errorf("send token: %w", err)
	}
	return x.sendURL(ctx, u, body, delay)
}

func (x *execution) sendURL(ctx context.Context, queueURL, body string, delay time.Duration) error {
	cctx, cancel := x.call()
	defer cancel()
	// In whole milliseconds first, as the store keeps run_at: a token for
	// a backoff of 2.0004 s and a later one for the same run_at say the
	// same delay.
	secs := int32(math.Ceil(max(delay, 0).Truncate(time.Millisecond).Seconds()))
	_, err := x.cfg.SQS.SendMessage(cctx, &sqs.SendMessageInput{
		QueueUrl:     aws.String(queueURL),
		MessageBody:  aws.String(body),
		DelaySeconds: min(secs, int32(MaxSQSDelay/time.Second)),
	})
	if qne := (*types.QueueDoesNotExist)(nil); errors.As(err, &qne) {
		// Deleted since its URL was looked up.
		err = fmt.Errorf("%w: %w", queues.ErrNotFound, err)
	}
	if err != nil {
		x.log.warn("could not send dispatch token", "queue_url", queueURL, "error", err)
		return fmt.Errorf("send token: %w", err)
	}
	return nil
}

// lost handles a lease found gone (err carries the item the failed write
// saw, or is ErrNotFound). The message is acknowledged only when the task is
// finished or gone. Otherwise this message may be the very token the new
// holder got the task through, and deleting it with this receive's handle
// may delete the new holder's delivery (SQS says a delete with an older
// receipt handle "might not" delete; emulators always do). If the new holder
// then died, nothing would bring the task back. So a fresh reference token,
// delayed until the other lease can be taken over, replaces this one before
// it is acknowledged.
//
// A task found ended is ended by the attempt that took it over, whose
// worker may have stopped between its end's write and the telling of the
// task's waiters; and this message may be the last token of the task (its
// delete may delete the other holder's delivery too). So its waiters are
// told again, idempotently, before this message is acknowledged
// (StateNotifying), as for any token of an ended task (endedElsewhere).
func (x *execution) lost(ctx context.Context, err error) State {
	x.result.Outcome = OutcomeLeaseLost
	obs, ok := lease.Observed(err)
	if !ok {
		return x.exit(true, "lease lost") // the task is gone: nobody to tell
	}
	if obs.Status.Terminal() {
		x.task = obs
		return x.ended(true, "lease lost")
	}
	x.task = obs
	var wait time.Duration
	switch obs.Status {
	case lease.StatusRunning:
		wait = x.cfg.Clock.Until(obs.LeaseUntil) + x.cfg.VisibilityMargin
	case lease.StatusPending:
		wait = x.cfg.Clock.Until(obs.RunAt)
	}
	st := x.replace(ctx, max(wait, 0), "lease lost")
	if !x.result.Ack {
		// No fresh token: keep this one hidden until the takeover instead.
		x.hide(ctx, max(wait, 0))
	}
	return st
}

// endedElsewhere answers a write that found this message's task ended by
// another writer: err is a lease.FinishedError carrying the item the write
// saw. Whoever ended it may have stopped before telling the task's waiters,
// and this message may be the task's last token, so they are told again
// (idempotently) before it is acknowledged: every path that acknowledges a
// token of an ended task goes through StateNotifying. It reports false
// when err is no such error.
func (x *execution) endedElsewhere(err error, reason string) (State, bool) {
	var fin *lease.FinishedError
	if !errors.As(err, &fin) || fin.Task.ID == "" {
		return 0, false
	}
	x.task = fin.Task
	return x.ended(true, reason), true
}

// keep answers a message whose task is not finished and cannot be run now:
// the token must survive until the task can run. Below the configured
// receive count the message is hidden for d (or, for d == 0, left to the
// queue's visibility timeout); from it on, the message is replaced by a
// fresh token delayed by d, so that a valid token never reaches the
// dead-letter queue through maxReceiveCount.
func (x *execution) keep(ctx context.Context, d time.Duration, reason string) State {
	if x.msg.ReceiveCount >= x.cfg.ReplaceAtReceiveCount {
		if d == 0 {
			d = x.cfg.VisibilityMargin
		}
		if st := x.replace(ctx, d, reason); x.result.Ack {
			return st
		}
	}
	if d > 0 {
		x.hide(ctx, d)
	}
	return x.exit(false, reason)
}

// replace sends a fresh token for this message's task, delayed by d, and
// acknowledges this message once it is sent. Without a body to send, or
// when the send fails, the message is left unacknowledged.
func (x *execution) replace(ctx context.Context, d time.Duration, reason string) State {
	if x.fate.replaced {
		return x.exit(true, reason)
	}
	body := x.replacementBody()
	if body == "" {
		return x.exit(false, reason)
	}
	if err := x.send(ctx, body, min(d, MaxSQSDelay)); err != nil {
		return x.exit(false, reason)
	}
	x.fate.replaced = true
	x.log.info("token replaced by a fresh one", "delay", d, "receive_count", x.msg.ReceiveCount, "reason", reason)
	// Delete this message now rather than with the batch's answer: an
	// invocation that dies before answering would otherwise bring it back
	// with one more receive.
	cctx, cancel := x.call()
	defer cancel()
	if _, err := x.cfg.SQS.DeleteMessage(cctx, &sqs.DeleteMessageInput{
		QueueUrl:      aws.String(x.msgQueueURL()),
		ReceiptHandle: aws.String(x.msg.ReceiptHandle),
	}); err != nil {
		x.log.warn("could not delete the replaced message; the batch answer acknowledges it", "error", err)
	}
	return x.exit(true, reason)
}

// msgQueueURL is the URL of the queue this message came from.
func (x *execution) msgQueueURL() string {
	if x.msg.QueueURL != "" {
		return x.msg.QueueURL
	}
	return x.cfg.QueueURL
}

// replacementBody is a token naming the same task as this message: a
// reference once the task is known to exist, else the inline submission with
// its task id made explicit ("" when that cannot be rebuilt).
func (x *execution) replacementBody() string {
	switch {
	case x.in.tok.IsMessage():
		// A message to a workflow: the same message, which its id keeps
		// from being sent twice.
		return x.msg.Body
	case len(x.in.tok.After) > 0 && x.task.Status == lease.StatusWaiting:
		// A dependent whose registrations on its dependencies may be
		// unfinished: only its own token redoes them (createWaiting). A
		// reference would find it WAITING and acknowledge it.
		return x.msg.Body
	case x.task.ID != "":
		return token.RefWith(x.task.ID, x.carry(nil))
	case !x.in.tok.Inline():
		return x.msg.Body
	case x.in.tokenErr != nil:
		return ""
	case x.in.tok.ID != "":
		return x.msg.Body
	}
	tok := x.in.tok
	tok.ID = x.msg.ID
	body, err := tok.Encode()
	if err != nil {
		return ""
	}
	return body
}

// hide makes the message invisible for d.
func (x *execution) hide(ctx context.Context, d time.Duration) {
	cctx, cancel := x.call()
	defer cancel()
	_, err := x.cfg.SQS.ChangeMessageVisibility(cctx, &sqs.ChangeMessageVisibilityInput{
		QueueUrl:          aws.String(x.msgQueueURL()),
		ReceiptHandle:     aws.String(x.msg.ReceiptHandle),
		VisibilityTimeout: visibilitySeconds(d),
	})
	if err != nil {
		x.log.warn("could not change message visibility", "error", err)
	}
}

func visibilitySeconds(d time.Duration) int32 {
	secs := int32(math.Ceil(d.Seconds()))
	return min(max(secs, 0), 12*60*60)
}

// reject handles a message that names no task that can be recorded: the
// reason goes to the log (never the body) and, with the body, to the
// dead-letter queue. Without a dead-letter URL the message is left to the
// queue's redrive policy, which moves it after maxReceiveCount receives.
func (x *execution) reject(ctx context.Context, reason string) State {
	x.log.warn("message rejected", "reason", reason, "receive_count", x.msg.ReceiveCount)
	if x.cfg.DeadLetterURL == "" {
		return x.exit(false, reason)
	}
	if err := x.sendDead(reason); err != nil {
		x.log.error("could not forward rejected message to the dead-letter queue", "error", err)
		return x.exit(false, reason)
	}
	return x.exit(true, reason)
}

// sendDead sends the message's body to the dead-letter queue with reason.
func (x *execution) sendDead(reason string) error {
	cctx, cancel := x.call()
	defer cancel()
	if x.tr != nil {
		cctx = trace.ContextWithSpanContext(cctx, trace.SpanContext{}) // the body goes as it came
	}
	_, err := x.cfg.SQS.SendMessage(cctx, &sqs.SendMessageInput{
		QueueUrl:    aws.String(x.cfg.DeadLetterURL),
		MessageBody: aws.String(x.msg.Body),
		MessageAttributes: map[string]types.MessageAttributeValue{
			AttrReason:          {DataType: aws.String("String"), StringValue: aws.String(lease.Truncate(reason, 1024))},
			AttrSourceMessageID: {DataType: aws.String("String"), StringValue: aws.String(x.msg.ID)},
		},
	})
	return err
}

// Message attributes on a message forwarded to the dead-letter queue.
const (
	AttrReason          = "leasehold-reason"
	AttrSourceMessageID = "leasehold-source-message-id"
)
