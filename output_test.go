package leasehold

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/jonboulle/clockwork"

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

// A batch of ten inline tasks that succeed costs its function no log line
// (stderr) at INFO and one metrics document (stdout) for their kind, at
// most 50 bytes a task (issue 38, point 4; one line of about 490 bytes a
// task before): the worker as functions/worker/main.go wires it
// (lambdalog.New at INFO, Metrics on stdout), on records shaped as Lambda
// delivers them. The clock is a fake one, so that the document's size does
// not move with the machine's load (each duration is then 0; the bench
// measures real ones: internal/bench TestInlineBill). The document names no
// task and holds no payload.
func TestSuccessfulBatchWritesOneMetricsDocumentAndNoLogLine(t *testing.T) {
	t.Parallel()
	const (
		queueURL = "https://sqs.us-east-1.amazonaws.com/123456789012/leasehold-work"
		queueARN = "arn:aws:sqs:us-east-1:123456789012:leasehold-work"
		secret   = "s3cr3t-payload-value"
		batch    = 10
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
		Clock: clockwork.NewFakeClockAt(time.UnixMilli(1796217709752)),
	})
	if err != nil {
		t.Fatal(err)
	}
	body, err := token.Inline("upper", "", []byte(`{"text":"`+secret+`"}`), 0)
	if err != nil {
		t.Fatal(err)
	}
	var ev events.SQSEvent
	for i := range batch {
		ev.Records = append(ev.Records, events.SQSMessage{
			MessageId: fmt.Sprintf("4f6c1a52-9d0e-4a53-8f7e-2f5b4a1c%04d", i), ReceiptHandle: fmt.Sprintf("AQEB-example-receipt-handle-%04d", i), Body: body,
			Attributes:     map[string]string{"ApproximateReceiveCount": "1", "SentTimestamp": "1796217709752"},
			EventSource:    "aws:sqs",
			EventSourceARN: queueARN,
			AWSRegion:      "us-east-1",
		})
	}
	ctx := lambdacontext.NewContext(t.Context(), &lambdacontext.LambdaContext{AwsRequestID: "c6af9ac6-7b61-11e6-9a41-93e812345678"})
	resp, err := w.HandleSQS(ctx, ev)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("HandleSQS = %+v, %v", resp, err)
	}
	for _, r := range ev.Records {
		if task, err := store.Get(t.Context(), r.MessageId); err != nil || task.Status != lease.StatusSucceeded {
			t.Fatalf("task: %+v, %v", task, err)
		}
	}

	logs, metrics := stderr.String(), stdout.String()
	t.Logf("stderr (%d B):\n%sstdout (%d B, %.1f a task):\n%s", len(logs), logs, len(metrics), float64(len(metrics))/batch, metrics)
	if logs != "" {
		t.Errorf("log lines at INFO for tasks that succeeded: %s", logs)
	}
	if n := strings.Count(metrics, "\n"); n != 1 {
		t.Errorf("%d metrics lines, want one document for the batch's kind", n)
	}
	if per := float64(len(metrics)) / batch; per > 50 {
		t.Errorf("%.1f bytes of metrics a task, want at most 50", per)
	}
	if !strings.Contains(metrics, `"TasksSucceeded":10`) || !strings.Contains(metrics, `"Kind":"upper"`) {
		t.Errorf("the document does not count the batch's ten successes")
	}
	if strings.Contains(logs+metrics, secret) || strings.Contains(metrics, "4f6c1a52") {
		t.Errorf("the payload or a task id was written out")
	}
}
