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

	"github.com/leasehold/leasehold/internal/lifecycle"
)

// Dead-letter reads are bounded: a peek or a redrive makes at most this
// many receives, and hides what it reads for at most this long (a receive
// whose answer is lost hides its messages that long).
const (
	deadLetterReceives   = 5
	deadLetterVisibility = 10 // seconds
)

// ErrDeadLetterNotFound: RedriveDeadLetter read the dead-letter queue and
// did not find the message (gone, or held by another reader).
var ErrDeadLetterNotFound = errors.New("dead letter not found")

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
	out, err := a.sqs.GetQueueAttributes(cctx, &sqs.GetQueueAttributesInput{
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
// recovery sweep among them) only while the read lasts, at most 10 s.
func (a *Admin) PeekDeadLetters(ctx context.Context, url string, max int) ([]DeadLetter, error) {
	var (
		out  []DeadLetter
		seen = map[string]bool{}
		held []string
	)
	defer a.release(ctx, url, &held)
	for range deadLetterReceives {
		if len(out) >= max {
			break
		}
		msgs, err := a.receiveDead(ctx, url)
		if err != nil {
			return out, err
		}
		if len(msgs) == 0 {
			break
		}
		for _, m := range msgs {
			held = append(held, aws.ToString(m.ReceiptHandle))
			id := aws.ToString(m.MessageId)
			if seen[id] || len(out) >= max {
				continue
			}
			seen[id] = true
			out = append(out, deadLetterOf(m))
		}
	}
	return out, nil
}

// RedriveDeadLetter finds the message with id messageID on the dead-letter
// queue at dlqURL, sends its body and attributes (less leasehold-reason and
// leasehold-source-message-id) to the queue at toURL, then deletes it. The
// other messages it read are shown again. ErrDeadLetterNotFound: it read
// the queue without finding the message.
func (a *Admin) RedriveDeadLetter(ctx context.Context, dlqURL, toURL, messageID string) error {
	var held []string
	defer a.release(ctx, dlqURL, &held)
	for range deadLetterReceives {
		msgs, err := a.receiveDead(ctx, dlqURL)
		if err != nil {
			return err
		}
		if len(msgs) == 0 {
			break
		}
		for _, m := range msgs {
			if aws.ToString(m.MessageId) != messageID {
				held = append(held, aws.ToString(m.ReceiptHandle))
				continue
			}
			return a.moveDead(ctx, dlqURL, toURL, m)
		}
	}
	return fmt.Errorf("redrive message %s: %w", messageID, ErrDeadLetterNotFound)
}

func (a *Admin) moveDead(ctx context.Context, dlqURL, toURL string, m sqstypes.Message) error {
	attrs := map[string]sqstypes.MessageAttributeValue{}
	for k, v := range m.MessageAttributes {
		if k != lifecycle.AttrReason && k != lifecycle.AttrSourceMessageID {
			attrs[k] = v
		}
	}
	cctx, cancel := context.WithTimeout(ctx, a.callTimeout)
	_, err := a.sqs.SendMessage(cctx, &sqs.SendMessageInput{QueueUrl: aws.String(toURL), MessageBody: m.Body, MessageAttributes: attrs})
	cancel()
	if err != nil {
		return a.queueErr(err, toURL, "redrive: send to "+toURL)
	}
	cctx, cancel = context.WithTimeout(ctx, a.callTimeout)
	_, err = a.sqs.DeleteMessage(cctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(dlqURL), ReceiptHandle: m.ReceiptHandle})
	cancel()
	if err != nil {
		return a.queueErr(err, dlqURL, "redrive: sent, but delete from "+dlqURL)
	}
	return nil
}

func (a *Admin) receiveDead(ctx context.Context, url string) ([]sqstypes.Message, error) {
	cctx, cancel := context.WithTimeout(ctx, a.callTimeout)
	defer cancel()
	out, err := a.sqs.ReceiveMessage(cctx, &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(url), MaxNumberOfMessages: 10, VisibilityTimeout: deadLetterVisibility,
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
		_, _ = a.sqs.ChangeMessageVisibilityBatch(cctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(url), Entries: entries})
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
