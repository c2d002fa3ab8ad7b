package awstest_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/leasehold/leasehold/internal/awstest"
)

// losingQueue is a queue holding one message, "m", and an SQS client whose
// next ReceiveMessage answer from that queue is lost after the emulator
// handed the message out (the SDK retries and finds the queue empty).
func losingQueue(t *testing.T) (*sqs.Client, string, *awstest.LosingHTTP) {
	t.Helper()
	cfg := awstest.Config(t)
	url := awstest.NewQueues(t, cfg).Work
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	if _, err := sqs.NewFromConfig(cfg).SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("m")}); err != nil {
		t.Fatalf("send: %v", err)
	}
	losing := awstest.NewLosingHTTP(cfg.HTTPClient)
	lcfg := cfg.Copy()
	lcfg.HTTPClient = losing
	losing.LoseNext("AmazonSQS.ReceiveMessage", url)
	return sqs.NewFromConfig(lcfg), url, losing
}

// A budget shorter than the visibility timeout used to end before a lost
// answer's message was visible again ("received 0 of 1 messages").
func TestReceiveNOutlastsALostAnswer(t *testing.T) {
	t.Parallel()
	client, url, losing := losingQueue(t)
	ev := awstest.ReceiveN(t, client, url, 1, 2*time.Second, 8, nil)
	if losing.Dropped() != 1 {
		t.Fatalf("%d answers lost, want 1 (the test lost nothing)", losing.Dropped())
	}
	if len(ev.Records) != 1 || ev.Records[0].Body != "m" {
		t.Fatalf("got %+v, want the one message", ev.Records)
	}
}

// One receive whose answer is lost used to come back empty.
func TestReceiveEventWaitsOutALostAnswer(t *testing.T) {
	t.Parallel()
	client, url, losing := losingQueue(t)
	ev := awstest.ReceiveEvent(t, client, url, 1, time.Second, 5)
	if losing.Dropped() != 1 {
		t.Fatalf("%d answers lost, want 1 (the test lost nothing)", losing.Dropped())
	}
	if len(ev.Records) != 1 || ev.Records[0].Body != "m" {
		t.Fatalf("got %+v, want the one message", ev.Records)
	}
}
