package sqsevent

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// TestEventMatchesLambdaPayload checks that a received message becomes the
// same events.SQSEvent as decoding the payload Lambda would send for it.
func TestEventMatchesLambdaPayload(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("testdata/sqs-event.json")
	if err != nil {
		t.Fatal(err)
	}
	var want events.SQSEvent
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatalf("decode testdata: %v", err)
	}

	msg := types.Message{
		MessageId:              aws.String("4b1e8f0c-2d7a-4c55-9e61-0f3d2a9b7c10"),
		ReceiptHandle:          aws.String("AQEBexampleReceiptHandleForLeaseholdTests=="),
		Body:                   aws.String(`{"task_id":"t-7f3a","kind":"resize-image"}`),
		MD5OfBody:              aws.String("caf42dae9458f078960bc24475383666"),
		MD5OfMessageAttributes: aws.String("0d5e1a3b7c9f24e68a1b2c3d4e5f6a7b"),
		Attributes: map[string]string{
			"ApproximateReceiveCount":          "3",
			"SentTimestamp":                    "1767225600000",
			"SenderId":                         "AIDAEXAMPLESENDERID01",
			"ApproximateFirstReceiveTimestamp": "1767225600250",
		},
		MessageAttributes: map[string]types.MessageAttributeValue{
			"kind":     {DataType: aws.String("String"), StringValue: aws.String("resize-image")},
			"priority": {DataType: aws.String("Number"), StringValue: aws.String("5")},
			"trace":    {DataType: aws.String("Binary"), BinaryValue: []byte{0xca, 0xfe, 0x01}},
		},
	}
	q, err := ParseQueueARN("arn:aws:sqs:eu-west-1:210987654321:leasehold-work")
	if err != nil {
		t.Fatal(err)
	}
	got := q.Event([]types.Message{msg})
	if !reflect.DeepEqual(got, want) {
		gotJSON, _ := json.MarshalIndent(got, "", "  ")
		t.Errorf("event differs from the Lambda payload\n got: %s\nwant: %s", gotJSON, data)
	}
}

func TestParseQueueARN(t *testing.T) {
	t.Parallel()
	tests := []struct {
		arn, region string
		ok          bool
	}{
		{"arn:aws:sqs:us-east-1:123456789012:work", "us-east-1", true},
		{"arn:aws-cn:sqs:cn-north-1:123456789012:work.fifo", "cn-north-1", true},
		{"", "", false},
		{"arn:aws:sns:us-east-1:123456789012:topic", "", false},
		{"arn:aws:sqs::123456789012:work", "", false},
		{"arn:aws:sqs:us-east-1:123456789012:", "", false},
		{"https://sqs.us-east-1.amazonaws.com/123456789012/work", "", false},
	}
	for _, tt := range tests {
		q, err := ParseQueueARN(tt.arn)
		if (err == nil) != tt.ok {
			t.Errorf("ParseQueueARN(%q) error = %v, want ok=%v", tt.arn, err, tt.ok)
			continue
		}
		if tt.ok && (q.Region != tt.region || q.ARN != tt.arn) {
			t.Errorf("ParseQueueARN(%q) = %+v, want region %q", tt.arn, q, tt.region)
		}
	}
}
