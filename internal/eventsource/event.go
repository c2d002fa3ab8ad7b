package eventsource

import (
	"fmt"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// eventSourceSQS is the EventSource Lambda sets on every SQS record.
const eventSourceSQS = "aws:sqs"

// queueIdentity is what every record of a queue carries about its source.
type queueIdentity struct {
	arn    string
	region string
}

// parseQueueARN checks an SQS queue ARN (arn:<partition>:sqs:<region>:<account>:<name>)
// and takes the region from it.
func parseQueueARN(arn string) (queueIdentity, error) {
	parts := strings.Split(arn, ":")
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "sqs" || parts[3] == "" || parts[5] == "" {
		return queueIdentity{}, fmt.Errorf("malformed queue ARN %q", arn)
	}
	return queueIdentity{arn: arn, region: parts[3]}, nil
}

// event builds the SQSEvent Lambda would deliver for msgs.
func (q queueIdentity) event(msgs []types.Message) events.SQSEvent {
	records := make([]events.SQSMessage, len(msgs))
	for i, m := range msgs {
		records[i] = q.record(m)
	}
	return events.SQSEvent{Records: records}
}

func (q queueIdentity) record(m types.Message) events.SQSMessage {
	attrs := make(map[string]string, len(m.Attributes))
	for k, v := range m.Attributes {
		attrs[k] = v
	}
	msgAttrs := make(map[string]events.SQSMessageAttribute, len(m.MessageAttributes))
	for k, v := range m.MessageAttributes {
		msgAttrs[k] = messageAttribute(v)
	}
	return events.SQSMessage{
		MessageId:              deref(m.MessageId),
		ReceiptHandle:          deref(m.ReceiptHandle),
		Body:                   deref(m.Body),
		Md5OfBody:              deref(m.MD5OfBody),
		Md5OfMessageAttributes: deref(m.MD5OfMessageAttributes),
		Attributes:             attrs,
		MessageAttributes:      msgAttrs,
		EventSourceARN:         q.arn,
		EventSource:            eventSourceSQS,
		AWSRegion:              q.region,
	}
}

// messageAttribute converts one message attribute. The list fields are
// never nil, matching what decoding a Lambda payload (which always carries
// them, possibly empty) produces.
func messageAttribute(v types.MessageAttributeValue) events.SQSMessageAttribute {
	a := events.SQSMessageAttribute{
		StringValue:      v.StringValue,
		BinaryValue:      v.BinaryValue,
		StringListValues: v.StringListValues,
		BinaryListValues: v.BinaryListValues,
		DataType:         deref(v.DataType),
	}
	if a.StringListValues == nil {
		a.StringListValues = []string{}
	}
	if a.BinaryListValues == nil {
		a.BinaryListValues = [][]byte{}
	}
	return a
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
