package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/lifecycle"
)

// queueAPI lists the SQS calls of QueueURL, QueueARN, QueueStats and the
// dead-letter functions; *sqs.Client satisfies it.
type queueAPI interface {
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
}

// Dead-letter reads are bounded: a peek or a redrive makes at most
// deadLetterReceives receives, each waiting up to deadLetterWait seconds
// for messages (a receive that does not wait samples only some of SQS's
// servers, and may answer nothing while the queue has messages), and
// hides what it reads for at most deadLetterVisibility seconds (a receive
// whose answer is lost hides its messages that long).
const (
	deadLetterReceives   = 5
	deadLetterWait       = 1  // seconds
	deadLetterVisibility = 10 // seconds
)

// errDeadLetterNotFound: RedriveDeadLetter read the dead-letter queue and
// did not find the message (gone, or held by another reader). It matches
// leasehold.ErrNotFound, which callers test.
var errDeadLetterNotFound = matching{errors.New("dead letter not found"), leasehold.ErrNotFound}

// ErrDeadLetterSource: RedriveDeadLetter found the message, but SQS says
// it was moved to the dead-letter queue from a queue other than the one
// it was asked to send it to. It sent nothing.
var ErrDeadLetterSource = errors.New("dead letter came from another queue")

// QueueStats is what SQS says about one queue.
type QueueStats struct {
	URL string
	// Visible, InFlight and Delayed are SQS's approximate counts.
	Visible, InFlight, Delayed int
	// DeadLetterURL is the queue its redrive policy moves messages to;
	// empty without one.
	DeadLetterURL string
}

// QueueStats reads the approximate depths of the queue at url and finds its
// dead-letter queue from its redrive policy.
func (a *Admin) QueueStats(ctx context.Context, url string) (QueueStats, error) {
	cctx, cancel := context.WithTimeout(ctx, a.callTimeout)
	defer cancel()
	out, err := a.queues.GetQueueAttributes(cctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{
			sqstypes.QueueAttributeNameApproximateNumberOfMessages,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed,
			sqstypes.QueueAttributeNameRedrivePolicy,
		},
	})
	if err != nil {
		return QueueStats{}, a.queueErr(err, url, "read the attributes of queue "+url)
	}
	at := out.Attributes
	s := QueueStats{URL: url}
	s.Visible, _ = strconv.Atoi(at[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)])
	s.InFlight, _ = strconv.Atoi(at[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
	s.Delayed, _ = strconv.Atoi(at[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed)])
	if rp := at[string(sqstypes.QueueAttributeNameRedrivePolicy)]; rp != "" {
		var policy struct {
			Target string `json:"deadLetterTargetArn"`
		}
		if err := json.Unmarshal([]byte(rp), &policy); err != nil {
			return s, fmt.Errorf("queue %s: redrive policy is not JSON: %w", url, err)
		}
		// arn:aws:sqs:REGION:ACCOUNT:NAME
		name := policy.Target[strings.LastIndexByte(policy.Target, ':')+1:]
		if name == "" {
			return s, fmt.Errorf("queue %s: redrive policy names no dead-letter queue", url)
		}
		if s.DeadLetterURL, err = a.QueueURL(ctx, name); err != nil {
			return s, err
		}
	}
	return s, nil
}

// visible reads SQS's approximate count of the visible messages of the
// queue at url.
func (a *Admin) visible(ctx context.Context, url string) (int, error) {
	cctx, cancel := context.WithTimeout(ctx, a.callTimeout)
	defer cancel()
	out, err := a.queues.GetQueueAttributes(cctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages},
	})
	if err != nil {
		return 0, a.queueErr(err, url, "read the depth of queue "+url)
	}
	n, _ := strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)])
	return n, nil
}

// DeadLetter is one message of a dead-letter queue.
type DeadLetter struct {
	MessageID string
	Body      string
	// Reason is the leasehold-reason attribute the worker set when it
	// rejected the message; empty for a message SQS moved after too many
	// receives.
	Reason string
	// Receives is how often the message was received; SentAt when it was
	// first sent (to the queue it came from).
	Receives int
	SentAt   time.Time
}

// PeekDeadLetters reads up to max messages of the dead-letter queue at url
// and shows them again at once: they are hidden from other readers (the
// recovery sweep among them) only while the read lasts, at most 10 s, and
// each read counts as a receive of the message. It keeps receiving while it
// has fewer than max and the queue's depth, read first, says there are
// messages it has not seen (5 receives at most).
func (a *Admin) PeekDeadLetters(ctx context.Context, url string, max int) ([]DeadLetter, error) {
	var (
		out  []DeadLetter
		seen = map[string]bool{}
		held []string
	)
	defer a.release(ctx, url, &held)
	depth, err := a.visible(ctx, url)
	if err != nil {
		return nil, err
	}
	for range deadLetterReceives {
		msgs, err := a.receiveDead(ctx, url)
		if err != nil {
			return out, err
		}
		for _, m := range msgs {
			held = append(held, aws.ToString(m.ReceiptHandle))
			id := aws.ToString(m.MessageId)
			if seen[id] {
				continue
			}
			seen[id] = true
			if len(out) < max {
				out = append(out, deadLetterOf(m))
			}
		}
		if len(out) >= max || len(seen) >= depth {
			break
		}
	}
	return out, nil
}

// RedriveDeadLetter finds the message with id messageID on the dead-letter
// queue at dlqURL, sends its body and attributes (less leasehold-reason and
// leasehold-source-message-id) to the queue at toURL, then deletes it. The
// other messages it read, and the message itself when it was not sent,
// are shown again. It reads until it finds the message, while the queue's
// depth says there are messages it has not seen (5 receives at most):
// an error matching leasehold.ErrNotFound when it does not. When SQS names the queue the
// message came from (its DeadLetterQueueSourceArn) and that is not the
// queue at toURL, it sends nothing and returns ErrDeadLetterSource.
func (a *Admin) RedriveDeadLetter(ctx context.Context, dlqURL, toURL, messageID string) error {
	var held []string
	defer a.release(ctx, dlqURL, &held)
	depth, err := a.visible(ctx, dlqURL)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for range deadLetterReceives {
		msgs, err := a.receiveDead(ctx, dlqURL)
		if err != nil {
			return err
		}
		var target *sqstypes.Message
		for i, m := range msgs {
			id := aws.ToString(m.MessageId)
			seen[id] = true
			if id == messageID && target == nil {
				target = &msgs[i]
				continue
			}
			held = append(held, aws.ToString(m.ReceiptHandle))
		}
		if target != nil {
			sent, err := a.moveDead(ctx, dlqURL, toURL, *target)
			if !sent {
				held = append(held, aws.ToString(target.ReceiptHandle))
			}
			return err
		}
		if len(seen) >= depth {
			break
		}
	}
	return fmt.Errorf("redrive message %s: %w", messageID, errDeadLetterNotFound)
}

// moveDead sends m to toURL and deletes it from dlqURL; sent says whether
// the send succeeded. The delete runs after a cancelled request too: the
// message was sent, and left on the dead-letter queue it would be there
// twice.
func (a *Admin) moveDead(ctx context.Context, dlqURL, toURL string, m sqstypes.Message) (sent bool, err error) {
	id := aws.ToString(m.MessageId)
	if from := m.Attributes[string(sqstypes.MessageSystemAttributeNameDeadLetterQueueSourceArn)]; from != "" {
		arn, err := a.QueueARN(ctx, toURL)
		if err != nil {
			return false, fmt.Errorf("redrive message %s: check the queue it came from: %w", id, err)
		}
		if arn != from {
			return false, fmt.Errorf("redrive message %s: %w: SQS moved it from %s, not from %s (%s); nothing was sent", id, ErrDeadLetterSource, from, arn, toURL)
		}
	}
	attrs := map[string]sqstypes.MessageAttributeValue{}
	for k, v := range m.MessageAttributes {
		if k != lifecycle.AttrReason && k != lifecycle.AttrSourceMessageID {
			attrs[k] = v
		}
	}
	cctx, cancel := context.WithTimeout(ctx, a.callTimeout)
	_, err = a.queues.SendMessage(cctx, &sqs.SendMessageInput{QueueUrl: aws.String(toURL), MessageBody: m.Body, MessageAttributes: attrs})
	cancel()
	if err != nil {
		return false, a.queueErr(err, toURL, "redrive: send to "+toURL)
	}
	cctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), a.callTimeout)
	_, err = a.queues.DeleteMessage(cctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(dlqURL), ReceiptHandle: m.ReceiptHandle})
	cancel()
	if err != nil {
		return true, a.queueErr(err, dlqURL, fmt.Sprintf("redrive: message %s was sent to %s, but its delete from %s failed (it shows there again within %d s: delete it, or it will be redriven twice)", id, toURL, dlqURL, deadLetterVisibility))
	}
	return true, nil
}

func (a *Admin) receiveDead(ctx context.Context, url string) ([]sqstypes.Message, error) {
	cctx, cancel := context.WithTimeout(ctx, a.callTimeout+deadLetterWait*time.Second)
	defer cancel()
	out, err := a.queues.ReceiveMessage(cctx, &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(url), MaxNumberOfMessages: 10, VisibilityTimeout: deadLetterVisibility,
		WaitTimeSeconds:             deadLetterWait,
		MessageAttributeNames:       []string{"All"},
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
	})
	if err != nil {
		return nil, a.queueErr(err, url, "read dead letters of "+url)
	}
	return out.Messages, nil
}

// release shows the messages whose receipt handles are in *held again. It
// runs after a cancelled request too: the messages would otherwise stay
// hidden until their visibility ends.
func (a *Admin) release(ctx context.Context, url string, held *[]string) {
	ctx = context.WithoutCancel(ctx)
	for len(*held) > 0 {
		n := min(10, len(*held))
		entries := make([]sqstypes.ChangeMessageVisibilityBatchRequestEntry, n)
		for i, h := range (*held)[:n] {
			entries[i] = sqstypes.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(h), VisibilityTimeout: 0}
		}
		cctx, cancel := context.WithTimeout(ctx, a.callTimeout)
		// A failure leaves them hidden until their visibility ends (10 s).
		_, _ = a.queues.ChangeMessageVisibilityBatch(cctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(url), Entries: entries})
		cancel()
		*held = (*held)[n:]
	}
}

func deadLetterOf(m sqstypes.Message) DeadLetter {
	d := DeadLetter{MessageID: aws.ToString(m.MessageId), Body: aws.ToString(m.Body)}
	if v, ok := m.MessageAttributes[lifecycle.AttrReason]; ok {
		d.Reason = aws.ToString(v.StringValue)
	}
	d.Receives, _ = strconv.Atoi(m.Attributes[string(sqstypes.MessageSystemAttributeNameApproximateReceiveCount)])
	if ms, err := strconv.ParseInt(m.Attributes[string(sqstypes.MessageSystemAttributeNameSentTimestamp)], 10, 64); err == nil {
		d.SentAt = time.UnixMilli(ms).UTC()
	}
	return d
}
