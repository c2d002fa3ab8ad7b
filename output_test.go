package leasehold

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/leasehold/leasehold/internal/lambdalog"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/leasemem"
	"github.com/leasehold/leasehold/internal/token"
)

// lineBuffer collects what one stream of the function receives.
type lineBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lineBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lineBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A task that succeeds costs its function at most one log line (stderr) and
// one metrics line (stdout) at INFO, 500 bytes together: the worker as
// functions/worker/main.go wires it (lambdalog.New at INFO, WithMetrics),
// on a record shaped as Lambda delivers it, with a real clock so that the
// durations have their real length.
func TestSuccessWritesOneLogLineAndOneMetricsLineAtMost(t *testing.T) {
	t.Parallel()
	const (
		queueURL  = "https://sqs.us-east-1.amazonaws.com/123456789012/leasehold-work"
		queueARN  = "arn:aws:sqs:us-east-1:123456789012:leasehold-work"
		messageID = "4f6c1a52-9d0e-4a53-8f7e-2f5b4a1c0001" // names the task
		secret    = "s3cr3t-payload-value"
	)
	hs := NewHandlers()
	Handle(hs, "upper", func(_ context.Context, task *Task[upper]) (string, error) {
		return strings.ToUpper(task.Payload.Text), nil
	})
	stderr, stdout := &lineBuffer{}, &lineBuffer{}
	store := leasemem.New(lease.Options{})
	w, err := newWorker(store, &recordingSQS{}, WorkerConfig{
		QueueURL: queueURL, DeadLetterQueueURL: queueURL + "-dlq", Handlers: hs,
		Logger: lambdalog.New(stderr, slog.LevelInfo), Metrics: stdout,
	})
	if err != nil {
		t.Fatal(err)
	}
	body, err := token.Inline("upper", "", []byte(`{"text":"`+secret+`"}`), 0)
	if err != nil {
		t.Fatal(err)
	}
	ev := events.SQSEvent{Records: []events.SQSMessage{{
		MessageId: messageID, ReceiptHandle: "AQEB-example-receipt-handle-0001", Body: body,
		Attributes:     map[string]string{"ApproximateReceiveCount": "1", "SentTimestamp": "1796217709752"},
		EventSource:    "aws:sqs",
		EventSourceARN: queueARN,
		AWSRegion:      "us-east-1",
	}}}
	ctx := lambdacontext.NewContext(t.Context(), &lambdacontext.LambdaContext{AwsRequestID: "c6af9ac6-7b61-11e6-9a41-93e812345678"})
	resp, err := w.HandleSQS(ctx, ev)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("HandleSQS = %+v, %v", resp, err)
	}
	if task, err := store.Get(t.Context(), messageID); err != nil || task.Status != lease.StatusSucceeded {
		t.Fatalf("task: %+v, %v", task, err)
	}

	logs, metrics := stderr.String(), stdout.String()
	t.Logf("stderr (%d B):\n%sstdout (%d B):\n%s", len(logs), logs, len(metrics), metrics)
	logLines, metricLines := strings.Count(logs, "\n"), strings.Count(metrics, "\n")
	if logLines > 1 || metricLines > 1 || len(logs)+len(metrics) > 500 {
		t.Errorf("%d log lines and %d metrics lines, %d bytes together; want at most one of each and 500 bytes",
			logLines, metricLines, len(logs)+len(metrics))
	}
	if metricLines == 0 || !strings.Contains(metrics, `"task_id":"`+messageID+`"`) || !strings.Contains(metrics, `"outcome":"succeeded"`) {
		t.Errorf("no metrics line names the task and its outcome")
	}
	if strings.Contains(logs+metrics, secret) {
		t.Errorf("the payload was written out")
	}
}
