package main

// This test runs the dispatch function the way Lambda runs it: built as the
// `bootstrap` of a provided.al2023 function and started by the AWS Lambda
// Runtime Interface Emulator (internal/rie). It is invoked with an intake
// batch and with a scheduled event, against a table and queues of the local
// stack, then shut down as Lambda shuts an environment down.

import (
	"context"
	"encoding/json"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/internal/lambdarun"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/dynamo"
	"github.com/leasehold/leasehold/internal/rie"
)

func TestDispatchUnderRuntimeInterfaceEmulator(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("the Lambda Runtime Interface Emulator runs only on Linux")
	}
	cfg := awstest.Config(t)
	table := awstest.NewTable(t, cfg)
	queues := awstest.NewQueues(t, cfg)
	store := dynamo.New(dynamodb.NewFromConfig(cfg), table, lease.Options{})

	dir := t.TempDir()
	bootstrap, emulator := rie.Bootstrap(t, dir, "", ""), rie.Install(t, dir)
	fn := rie.Start(t, dir, emulator, bootstrap, []string{
		"LEASEHOLD_TABLE=" + table,
		"LEASEHOLD_WORK_QUEUE_URL=" + queues.Work,
		"AWS_LAMBDA_FUNCTION_TIMEOUT=30",
		"AWS_LAMBDA_FUNCTION_NAME=leasehold-dispatch",
	})
	timeout := awstest.Scale(50 * time.Second)

	// An intake batch of one submission: the task is stored and its
	// dispatch token sent; nothing is handed back.
	intake := events.SQSEvent{Records: []events.SQSMessage{{
		MessageId: "m1", EventSource: "aws:sqs", EventSourceARN: "arn:aws:sqs:us-east-1:000000000000:leasehold-intake",
		Body: `{"v":1,"kind":"greet","id":"rie-submitted","payload":{"name":"dispatch"}}`,
	}}}
	body, err := json.Marshal(intake)
	if err != nil {
		t.Fatal(err)
	}
	var resp events.SQSEventResponse
	if out := fn.Invoke(t, body, timeout); json.Unmarshal(out, &resp) != nil || len(resp.BatchItemFailures) != 0 {
		t.Errorf("intake answered %s, want no batch item failures", out)
	}
	ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(10*time.Second))
	defer cancel()
	if task, err := store.Get(ctx, "rie-submitted"); err != nil || task.Kind != "greet" || task.Status != lease.StatusPending {
		t.Errorf("submitted task: %+v, %v; want a PENDING greet task", task, err)
	}
	tok := awstest.ReceiveN(t, sqs.NewFromConfig(cfg), queues.Work, 1, 30*time.Second, 60, nil)
	if len(tok.Records) != 1 {
		t.Errorf("work queue: %d tokens, want 1", len(tok.Records))
	}

	// A scheduled event runs the sweep: nothing is due yet.
	var st struct {
		Due *int `json:"due"`
	}
	if out := fn.Invoke(t, []byte(`{"source":"aws.events","detail-type":"Scheduled Event","detail":{}}`), timeout); json.Unmarshal(out, &st) != nil || st.Due == nil || *st.Due != 0 {
		t.Errorf("sweep answered %s, want its stats with nothing due", out)
	}

	// Shutdown: SIGTERM before the SIGKILL, logged, and a clean exit.
	fn.Stop(t)
	out, err := os.ReadFile(fn.Log)
	if err != nil {
		t.Fatal(err)
	}
	if problem := rie.StoppedOnSIGTERM(out, `"msg":"`+lambdarun.Stopped+`"`); problem != "" {
		t.Errorf("%s; its output:\n%s", problem, out)
	}
}
