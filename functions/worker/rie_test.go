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
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/internal/lease"
)

// rieModule is the emulator's command, installed from the Go module proxy.
// The version is a pseudo-version because the proxy does not serve the
// repository's release tags (v1.23.0 and later are not Go-module versions).
const (
	rieModule  = "github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie"
	rieVersion = "v0.0.0-20261030222936-bef5c4ba774d"
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
		store:  lease.NewDynamoStore(dynamodb.NewFromConfig(cfg), table, lease.Options{LeaseDuration: time.Hour}),
		queues: queues,
	}

	dir := t.TempDir()
	bootstrap, rie := buildBinaries(t, dir)
	fn := startEmulator(t, dir, rie, bootstrap, []string{
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
	resp := fn.invoke(t, ev)

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
	resp = fn.invoke(t, ev)
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
}

// buildBinaries builds the worker as `bootstrap` (as for a provided.al2023
// function) and installs the emulator from the module proxy, both into dir.
func buildBinaries(t testing.TB, dir string) (bootstrap, rie string) {
	t.Helper()
	bootstrap = filepath.Join(dir, "bootstrap")
	buildGo(t, []string{"build", "-tags", "lambda.norpc,leasehold_demo", "-trimpath", "-ldflags=-s -w", "-o", bootstrap, "."}, "",
		"GOOS=linux", "CGO_ENABLED=0")
	// Installed outside this module so that the emulator's own go.mod
	// decides its dependencies. A proxy that cannot be reached fails the
	// test: it is part of `make test`, which needs the proxy anyway.
	buildGo(t, []string{"install", rieModule + "@" + rieVersion}, dir,
		"GOBIN="+dir, "GOOS=linux", "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false")
	return bootstrap, filepath.Join(dir, "aws-lambda-rie")
}

// buildGo runs the go command with args in wd ("" for this package's
// directory) and env added.
func buildGo(t testing.TB, args []string, wd string, env ...string) {
	t.Helper()
	// go test puts its own GOROOT/bin first on PATH.
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command on PATH: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(5*time.Minute))
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool, args...)
	cmd.Dir = wd
	cmd.Env = awstest.ChildEnv(env...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("go %s: %s", args[0], time.Since(start).Round(time.Millisecond))
}

// emulator is a running aws-lambda-rie.
type emulator struct {
	url string // invocation endpoint
	log string // path of the emulator's and the function's output
}

// startEmulator starts rie serving bootstrap on free 127.0.0.1 ports, waits
// until it accepts connections, and stops it (and the function it started)
// when the test ends.
func startEmulator(t *testing.T, dir, rie, bootstrap string, env []string) *emulator {
	t.Helper()
	invokeAddr, runtimeAddr := freeAddrs(t)
	logPath := filepath.Join(dir, "rie.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close() // the child has its own descriptor

	cmd := exec.Command(rie,
		"--runtime-interface-emulator-address", invokeAddr,
		"--runtime-api-address", runtimeAddr,
		"--log-level", "warn",
		bootstrap)
	cmd.Dir = dir
	cmd.Env = awstest.ChildEnv(env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", rie, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	fn := &emulator{url: "http://" + invokeAddr + "/2015-03-31/functions/function/invocations", log: logPath}
	t.Cleanup(func() {
		stopEmulator(t, cmd.Process.Pid, exited)
		if t.Failed() {
			out, _ := os.ReadFile(logPath)
			t.Logf("emulator and function output:\n%s", out)
		}
	})

	ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(30*time.Second))
	defer cancel()
	// Both: the emulator's Runtime API can start listening after its
	// invocation endpoint does, and an invocation before it starts the
	// function, which then finds nothing on the Runtime API and exits.
	for _, addr := range []string{runtimeAddr, invokeAddr} {
		if err := waitListening(ctx, addr, 20*time.Millisecond, exited); err != nil {
			t.Fatal(err)
		}
	}
	return fn
}

// waitListening dials addr every poll until it accepts a connection. It
// fails when ctx ends or the process whose Wait reports on exited exits
// (the report is put back for whoever waits next).
func waitListening(ctx context.Context, addr string, poll time.Duration, exited chan error) error {
	var d net.Dialer
	for {
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			conn.Close()
			return nil
		}
		select {
		case err := <-exited:
			exited <- err
			return fmt.Errorf("%w (%v) before it listened on %s", errEmulatorExited, err, addr)
		case <-ctx.Done():
			return fmt.Errorf("nothing listening on %s: %w", addr, ctx.Err())
		case <-time.After(poll):
		}
	}
}

// stopEmulator sends SIGTERM to the emulator's process group (the emulator
// then stops the function it started, which runs in a group of its own),
// escalates to SIGKILL after 10s, and kills any function process left over.
func stopEmulator(t testing.TB, pid int, exited chan error) {
	t.Helper()
	children := childPIDs(pid)
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	select {
	case <-exited:
	case <-timer.C:
		t.Errorf("emulator (pid %d) ignored SIGTERM for 10s; killing it", pid)
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-exited
	}
	for _, c := range children {
		// The function was started with its own process group; the
		// emulator normally kills it. ESRCH (already gone) is the usual
		// answer here.
		if err := syscall.Kill(-c, syscall.SIGKILL); err == nil {
			t.Logf("killed leftover function process group %d", c)
		}
	}
}

// childPIDs lists the direct children of pid from /proc.
func childPIDs(pid int) []int {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var out []int
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, s := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(s); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// freeAddrs returns two 127.0.0.1 addresses free a moment ago, and
// different: both listeners are open together, since a port just closed
// can be the next one handed out (an emulator given the same port twice
// binds one of its servers and never answers).
func freeAddrs(t testing.TB) (string, string) {
	t.Helper()
	var addrs [2]string
	for i := range addrs {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		addrs[i] = l.Addr().String()
	}
	return addrs[0], addrs[1]
}

// batchResponse is the documented wire shape of a Lambda SQS function's
// partial batch response, decoded strictly so that a wrong field name fails.
type batchResponse struct {
	BatchItemFailures []struct {
		ItemIdentifier string `json:"itemIdentifier"`
	} `json:"batchItemFailures"`
}

// invoke posts ev to the function and decodes its answer.
func (fn *emulator) invoke(t *testing.T, ev events.SQSEvent) batchResponse {
	t.Helper()
	body, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(functionTimeout+20*time.Second))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, fn.url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("invoke: %v", err)
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("read invocation response: %v", err)
	}
	if res.StatusCode != http.StatusOK {
		t.Fatalf("invoke: HTTP %d: %s", res.StatusCode, out)
	}
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
	store  *lease.DynamoStore
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
