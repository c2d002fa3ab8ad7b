package main

// This test runs the worker the way Lambda runs it: functions/worker is built
// with the leasehold_demo tag, which registers the example kinds (the
// deployed build serves none, see kinds.go), as the `bootstrap` of a
// provided.al2023 function and started by the AWS
// Lambda Runtime Interface Emulator, which serves it the Lambda Runtime API.
// Invocations are HTTP POSTs of SQS events built from messages received from
// a real (local) queue; the test checks the JSON the function answers and the
// task records it left in DynamoDB.

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/internal/lambdarun"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/dynamo"
	"github.com/leasehold/leasehold/internal/rie"
)

// Timing of the emulated function. The handler's context ends
// deadlineMargin before the function timeout, when the worker releases the
// lease of a task that is still running.
const (
	// The margin leaves room for the release write and the fresh token even
	// when the rest of the suite keeps the emulated AWS stack busy.
	functionTimeout = 12 * time.Second
	deadlineMargin  = 8 * time.Second
)

func TestBootstrapUnderRuntimeInterfaceEmulator(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("the Lambda Runtime Interface Emulator runs only on Linux")
	}
	cfg := awstest.Config(t)
	table := awstest.NewTable(t, cfg)
	queues := awstest.NewQueues(t, cfg)
	env := &rieEnv{
		sqs: sqs.NewFromConfig(cfg),
		// Its claims (the held task's) last an hour: the worker must meet
		// a live lease, however slow the build and the cold start are.
		store:  dynamo.New(dynamodb.NewFromConfig(cfg), table, lease.Options{LeaseDuration: time.Hour}),
		queues: queues,
	}

	dir := t.TempDir()
	bootstrap, emulator := buildBinaries(t, dir)
	fn := rie.Start(t, dir, emulator, bootstrap, []string{
		"LEASEHOLD_TABLE=" + table,
		"LEASEHOLD_WORK_QUEUE_URL=" + queues.Work,
		"LEASEHOLD_WORK_DLQ_URL=" + queues.WorkDLQ,
		"LEASEHOLD_DEADLINE_MARGIN=" + deadlineMargin.String(),
		"AWS_LAMBDA_FUNCTION_TIMEOUT=" + strconv.Itoa(int(functionTimeout/time.Second)),
		"AWS_LAMBDA_FUNCTION_NAME=leasehold-worker",
	})

	// A task someone else holds: the worker must report its message as a
	// batch item failure (and hide it) rather than run it.
	held := "held-" + t.Name()
	ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(10*time.Second))
	defer cancel()
	if _, err := env.store.Create(ctx, lease.NewTask{ID: held, Kind: "greet", Payload: []byte(`{"name":"held"}`), MaxAttempts: 3}); err != nil {
		t.Fatalf("create %s: %v", held, err)
	}
	awstest.Claim(t, ctx, env.store, held, "another-worker")

	// First invocation (cold start): what `aws sqs send-message` would put
	// on the work queue.
	bodies := map[string]string{
		"greet":     `{"v":1,"kind":"greet","id":"rie-greet","payload":{"name":"Lambda"}}`,
		"upper":     `{"v":1,"kind":"upper","id":"rie-upper","payload":{"text":"runtime api"}}`,
		"flaky":     `{"v":1,"kind":"flaky","id":"rie-flaky","payload":{"succeed_on_attempt":0},"max_attempts":2}`,
		"unknown":   `{"v":1,"kind":"no-such-kind","id":"rie-unknown","payload":{},"max_attempts":1}`,
		"malformed": `{"v":1,"kind":"greet","payload":`,
		"held":      `{"v":1,"id":"` + held + `"}`,
	}
	ids := map[string]string{} // message id -> name above
	for name, body := range bodies {
		ids[env.send(t, queues.Work, body)] = name
	}
	// Only the messages sent, not a second copy of one (the SDK resends
	// when an answer is lost), which could take another's place.
	ev := env.receiveEvent(t, queues.Work, len(bodies), slices.Collect(maps.Keys(ids))...)
	resp := invoke(t, fn, ev)

	var failed []string
	for _, f := range resp.BatchItemFailures {
		failed = append(failed, ids[f.ItemIdentifier])
	}
	if !slices.Equal(failed, []string{"held"}) {
		t.Errorf("batchItemFailures name %q, want only the held task's message", failed)
	}

	env.wantTask(t, "rie-greet", lease.StatusSucceeded, 1, `"hello, Lambda"`, "")
	env.wantTask(t, "rie-upper", lease.StatusSucceeded, 1, `"RUNTIME API"`, "")
	// A failed attempt with attempts left goes back to PENDING for a retry.
	env.wantTask(t, "rie-flaky", lease.StatusPending, 1, "", "attempt 1 of 2 failed on purpose")
	// An unknown kind is offered again later without using an attempt
	// (another fleet may know it), even with one attempt allowed.
	env.wantTask(t, "rie-unknown", lease.StatusPending, 0, "", `unknown task kind "no-such-kind"`)
	if got := env.get(t, held); got.LeaseOwner != "another-worker" || got.Fence != 1 {
		t.Errorf("held task: owner %q fence %d, want another-worker's lease untouched", got.LeaseOwner, got.Fence)
	}

	// The malformed message names no task: it is forwarded to the
	// dead-letter queue with the reason, and acknowledged.
	dlq := env.receiveEvent(t, queues.WorkDLQ, 1)
	reason := dlq.Records[0].MessageAttributes["leasehold-reason"].StringValue
	if dlq.Records[0].Body != bodies["malformed"] || reason == nil || !strings.Contains(*reason, "malformed") {
		t.Errorf("dead-letter message: body %q reason %v, want the malformed body with a 'malformed' reason", dlq.Records[0].Body, reason)
	}

	// Second invocation (warm): a duplicate token of a finished task is
	// acknowledged without running it again, and a task that outlives the
	// function timeout is released at the Lambda deadline the runtime API
	// gave, so it can be retried at once.
	dupID := env.send(t, queues.Work, `{"v":1,"id":"rie-greet"}`)
	slowID := env.send(t, queues.Work, `{"v":1,"kind":"sleep","id":"rie-slow","payload":{"seconds":60},"max_attempts":3}`)
	ev = env.receiveEvent(t, queues.Work, 2, dupID, slowID)
	start := time.Now()
	resp = invoke(t, fn, ev)
	took := time.Since(start)
	if len(resp.BatchItemFailures) != 0 {
		t.Errorf("second invocation: batchItemFailures %+v, want none", resp.BatchItemFailures)
	}
	if took >= functionTimeout {
		t.Errorf("second invocation took %s, want less than the %s function timeout", took, functionTimeout)
	}
	env.wantTask(t, "rie-greet", lease.StatusSucceeded, 1, `"hello, Lambda"`, "")
	slow := env.wantTask(t, "rie-slow", lease.StatusPending, 1, "", "invocation deadline reached")
	if slow.RunAt.After(time.Now()) {
		t.Errorf("released task runs at %s, want at once", slow.RunAt)
	}

	// Shutdown: the emulator, stopped with SIGTERM, shuts the runtime down
	// as Lambda does. The worker registered for SIGTERM (internal/lambdarun),
	// so it gets one before the SIGKILL, logs it and exits by itself; a
	// plain lambda.Start gets only the SIGKILL and logs nothing.
	fn.Stop(t)
	out, err := os.ReadFile(fn.Log)
	if err != nil {
		t.Fatal(err)
	}
	if problem := rie.StoppedOnSIGTERM(out, `"msg":"`+lambdarun.Stopped+`"`); problem != "" {
		t.Errorf("%s; its output:\n%s", problem, out)
	}
}

// buildBinaries builds the worker as `bootstrap` with the example kinds
// (the leasehold_demo tag) and installs the emulator, both into dir.
func buildBinaries(t testing.TB, dir string) (bootstrap, emulator string) {
	t.Helper()
	return rie.Bootstrap(t, dir, "", "leasehold_demo"), rie.Install(t, dir)
}

// batchResponse is the documented wire shape of a Lambda SQS function's
// partial batch response, decoded strictly so that a wrong field name fails.
type batchResponse struct {
	BatchItemFailures []struct {
		ItemIdentifier string `json:"itemIdentifier"`
	} `json:"batchItemFailures"`
}

// invoke posts ev to the function and decodes its answer.
func invoke(t *testing.T, fn *rie.Emulator, ev events.SQSEvent) batchResponse {
	t.Helper()
	body, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	out := fn.Invoke(t, body, awstest.Scale(functionTimeout+20*time.Second))
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.DisallowUnknownFields()
	var resp batchResponse
	if err := dec.Decode(&resp); err != nil {
		t.Fatalf("invocation response %s is not a partial batch response: %v", out, err)
	}
	return resp
}

// rieEnv is the test's slice of the local AWS stack.
type rieEnv struct {
	sqs    *sqs.Client
	store  *dynamo.Store
	queues awstest.Queues
}

func (e *rieEnv) send(t *testing.T, url, body string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(10*time.Second))
	defer cancel()
	out, err := e.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(body)})
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	return aws.ToString(out.MessageId)
}

// receiveEvent receives n messages from url (only those with the given
// message ids, when any are given; others are left alone) and returns them
// as the event Lambda's SQS event source mapping would build.
func (e *rieEnv) receiveEvent(t *testing.T, url string, n int, only ...string) events.SQSEvent {
	t.Helper()
	return awstest.ReceiveN(t, e.sqs, url, n, 30*time.Second, 60, func(m events.SQSMessage) bool {
		return len(only) == 0 || slices.Contains(only, m.MessageId) // e.g. not the flaky task's retry token
	})
}

func (e *rieEnv) get(t *testing.T, id string) lease.Task {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(10*time.Second))
	defer cancel()
	task, err := e.store.Get(ctx, id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return task
}

// wantTask checks a task record: status, attempts, result (JSON, "" for
// none) and a fragment of the last error ("" for none).
func (e *rieEnv) wantTask(t *testing.T, id string, status lease.Status, attempt int, result, errPart string) lease.Task {
	t.Helper()
	task := e.get(t, id)
	if task.Status != status || task.Attempt != attempt {
		t.Errorf("task %s: %s after %d attempt(s) (error %q), want %s after %d", id, task.Status, task.Attempt, task.Error, status, attempt)
	}
	if string(task.Result) != result {
		t.Errorf("task %s: result %s, want %s", id, task.Result, result)
	}
	if (errPart == "") != (task.Error == "") || !strings.Contains(task.Error, errPart) {
		t.Errorf("task %s: error %q, want one containing %q", id, task.Error, errPart)
	}
	return task
}
