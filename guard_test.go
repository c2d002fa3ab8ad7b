package leasehold

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/leasehold/leasehold/internal/awsenv"
	"github.com/leasehold/leasehold/internal/awsenv/racetest"
	"github.com/leasehold/leasehold/settings"
)

// A client made from an unguarded configuration gets the answer that the
// same configuration's own SDK client loses (racetest replays the loss):
// NewClient puts the HTTP client behind GuardHTTP.
func TestNewClientGuardsTheConfigItIsGiven(t *testing.T) {
	t.Parallel()
	const noItem = `{}` // GetItem's answer for an id that is not stored
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	cfg := racetest.Config(t, noItem)
	_, err := dynamodb.NewFromConfig(cfg).GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String("tasks"),
		Key:       map[string]ddbtypes.AttributeValue{"id": &ddbtypes.AttributeValueMemberS{Value: "t-1"}},
	})
	if err == nil || !strings.Contains(err.Error(), "use of closed network connection") {
		t.Fatalf("unguarded GetItem: %v, want the answer lost: the replay no longer shows the loss", err)
	}

	cfg = racetest.Config(t, noItem)
	c, err := NewClient(ClientConfig{AWS: cfg, Table: "tasks"})
	if err != nil {
		t.Fatal(err)
	}
	if awsenv.Guarded(cfg.HTTPClient) {
		t.Error("NewClient guarded the caller's configuration, not a copy")
	}
	if _, err := c.Get(ctx, "t-1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get through NewClient: %v, want ErrNotFound (the answer kept)", err)
	}
}

// NewWorkerFromEnv looks its dead-letter queue up through the guard, and
// the worker NewWorker builds polls through it.
func TestWorkerConstructorsGuardTheConfigTheyAreGiven(t *testing.T) {
	w, err := NewWorker(WorkerConfig{AWS: aws.Config{Region: "us-east-1"}, Table: "tasks", QueueURL: "http://sqs.example/000000000000/work", Handlers: NewHandlers()})
	if err != nil {
		t.Fatal(err)
	}
	if hc := w.source.(*sqs.Client).Options().HTTPClient; !awsenv.Guarded(hc) {
		t.Errorf("NewWorker: the worker polls through %T, not GuardHTTP's client", hc)
	}

	cfg := racetest.Config(t, `{"QueueUrl":"http://sqs.example/000000000000/dlq"}`)
	t.Setenv(settings.EnvTable, "tasks")
	t.Setenv(settings.EnvWorkQueueURL, "http://sqs.example/000000000000/work")
	t.Setenv(settings.EnvWorkDLQURL, "")
	t.Setenv(settings.EnvWorkDLQName, "dlq")
	var logs bytes.Buffer
	w, err = NewWorkerFromEnv(t.Context(), WorkerConfig{AWS: cfg, Handlers: NewHandlers(), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), "no work dead-letter queue") {
		t.Errorf("the DLQ lookup lost its answer:\n%s", logs.String())
	}
	if awsenv.Guarded(cfg.HTTPClient) {
		t.Error("NewWorkerFromEnv guarded the caller's configuration, not a copy")
	}
	if hc := w.source.(*sqs.Client).Options().HTTPClient; !awsenv.Guarded(hc) {
		t.Errorf("NewWorkerFromEnv: the worker polls through %T, not GuardHTTP's client", hc)
	}
}
