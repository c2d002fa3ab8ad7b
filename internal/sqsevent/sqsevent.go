// Package sqsevent builds the events.SQSEvent that Lambda's SQS event source
// mapping would deliver for messages received from a queue. The off-Lambda
// runner uses it, and so do the tests that hand real messages to handlers.
package sqsevent

import (
	"fmt"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// eventSourceSQS is the EventSource Lambda sets on every SQS record.
const eventSourceSQS = "aws:sqs"

// Queue is what every record of a queue carries about its source.
type Queue struct {
	ARN    string
	Region string
}

// ParseQueueARN checks an SQS queue ARN (arn:<partition>:sqs:<region>:<account>:<name>)
// and takes the region from it.
func ParseQueueARN(arn string) (Queue, error) {
	parts := strings.Split(arn, ":")
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "sqs" || parts[3] == "" || parts[5] == "" {
		return Queue{}, fmt.Errorf("malformed queue ARN %q", arn)
	}
	return Queue{ARN: arn, Region: parts[3]}, nil
}

// Event builds the SQSEvent Lambda would deliver for msgs.
func (q Queue) Event(msgs []types.Message) events.SQSEvent {
	records := make([]events.SQSMessage, len(msgs))
	for i, m := range msgs {
		records[i] = q.Record(m)
	}
	return events.SQSEvent{Records: records}
}

// Record builds one record of such an event.
func (q Queue) Record(m types.Message) events.SQSMessage {
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
		EventSourceARN:         q.ARN,
		EventSource:            eventSourceSQS,
		AWSRegion:              q.Region,
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
