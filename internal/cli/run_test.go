package cli_test

// Tests of `leasehold run` as users run it: the real binary, stopped with
// real signals, against the local AWS stack.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/dynamo"
)

// buildLeasehold builds cmd/leasehold into a directory of the test's.
func buildLeasehold(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "leasehold")
	ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(5*time.Minute))
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/leasehold/leasehold/cmd/leasehold").CombinedOutput()
	if err != nil {
		t.Fatalf("go build cmd/leasehold: %v\n%s", err, out)
	}
	return bin
}

type runEnv struct {
	table  string
	queues awstest.Queues
	sqs    *sqs.Client
	store  *dynamo.Store
}

func setupRun(t *testing.T) *runEnv {
	t.Helper()
	cfg := awstest.Config(t)
	e := &runEnv{table: awstest.NewTable(t, cfg), queues: awstest.NewQueues(t, cfg), sqs: sqs.NewFromConfig(cfg)}
	e.store = dynamo.New(dynamodb.NewFromConfig(cfg), e.table, lease.Options{})
	return e
}

// start runs `leasehold run args...` on the test's resources.
func (e *runEnv) start(t *testing.T, args ...string) (*exec.Cmd, *bytes.Buffer, chan error) {
	t.Helper()
	cmd := exec.Command(buildLeasehold(t), append([]string{"run"}, args...)...)
	cmd.Env = awstest.ChildEnv(
		"LEASEHOLD_TABLE="+e.table,
		"LEASEHOLD_WORK_QUEUE_URL="+e.queues.Work,
		"LEASEHOLD_WORK_DLQ_URL="+e.queues.WorkDLQ)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("leasehold run output:\n%s", logs.String())
		}
	})
	return cmd, &logs, exited
}

func (e *runEnv) send(t *testing.T, url, body string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(10*time.Second))
	defer cancel()
	if _, err := e.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(body)}); err != nil {
		t.Fatalf("send: %v", err)
	}
}

// waitFor polls the task until it has the status, or fails the test.
func (e *runEnv) waitFor(t *testing.T, id string, want lease.Status, budget time.Duration) lease.Task {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(budget))
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last lease.Task
	for {
		cctx, ccancel := context.WithTimeout(ctx, awstest.Scale(5*time.Second))
		task, err := e.store.Get(cctx, id)
		ccancel()
		if err == nil {
			if task.Status == want {
				return task
			}
			last = task
		} else if !errors.Is(err, lease.ErrNotFound) && ctx.Err() == nil {
			t.Fatalf("get %s: %v", id, err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("task %s is %q (error %q), not %s, after %s", id, last.Status, last.Error, want, budget)
		case <-tick.C:
		}
	}
}

// waitExit waits for the process to exit, up to budget (scaled by
// LEASEHOLD_TEST_TIMESCALE: a bound to give up, not a pass criterion).
func waitExit(t *testing.T, exited chan error, budget time.Duration) error {
	t.Helper()
	budget = awstest.Scale(budget)
	timer := time.NewTimer(budget)
	defer timer.Stop()
	select {
	case err := <-exited:
		exited <- err
		return err
	case <-timer.C:
		t.Fatalf("leasehold run still running %s after the signal", budget)
	}
	return nil
}

// TestRunWorkerAndDispatcher runs the worker and the dispatcher, feeds both
// queues, and stops the process with SIGTERM while a task runs: the task
// finishes and the process exits 0.
func TestRunWorkerAndDispatcher(t *testing.T) {
	t.Parallel()
	e := setupRun(t)
	// A lease shorter than the slow task, so it is renewed; all three scale
	// with LEASEHOLD_TEST_TIMESCALE, so a busy machine's late renewal does
	// not lose it, and the slow task is still running when it is looked at.
	leaseFor, renew, slowFor := awstest.Scale(4*time.Second), awstest.Scale(2*time.Second), awstest.Scale(8*time.Second)
	cmd, logs, exited := e.start(t, "--intake-queue-url", e.queues.Intake, "--intake-dlq-url", e.queues.IntakeDLQ,
		"--lease-duration", leaseFor.String(), "--renew-before", renew.String(), "--sweep-every", "2s")

	e.send(t, e.queues.Work, `{"v":1,"kind":"upper","id":"inline-1","payload":{"text":"run"}}`)
	e.send(t, e.queues.Intake, `{"v":1,"kind":"greet","id":"submitted-1","payload":{"name":"intake"}}`)
	e.send(t, e.queues.Intake, fmt.Sprintf(`{"v":1,"kind":"sleep","id":"slow-1","payload":{"seconds":%d}}`, int(slowFor.Seconds())))
	e.waitFor(t, "slow-1", lease.StatusRunning, 30*time.Second)
	if got := e.waitFor(t, "inline-1", lease.StatusSucceeded, 30*time.Second); string(got.Result) != `"RUN"` {
		t.Errorf("inline-1 result %s", got.Result)
	}
	if got := e.waitFor(t, "submitted-1", lease.StatusSucceeded, 30*time.Second); string(got.Result) != `"hello, intake"` {
		t.Errorf("submitted-1 result %s", got.Result)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := waitExit(t, exited, slowFor+30*time.Second); err != nil {
		t.Fatalf("leasehold run exited with %v after SIGTERM, want 0", err)
	}
	slow := e.waitFor(t, "slow-1", lease.StatusSucceeded, time.Second)
	if slow.Attempt != 1 {
		t.Errorf("slow-1 took %d attempts, want 1 (finished during the graceful stop)", slow.Attempt)
	}
	if !strings.Contains(logs.String(), `"msg":"leasehold run stopped"`) {
		t.Error("no 'leasehold run stopped' log line")
	}
}

// TestRunServesNamedQueues runs the worker on a queue given by name: a task
// that arrives there records it, and its retry comes back to it (the process
// does not poll the default work queue).
func TestRunServesNamedQueues(t *testing.T) {
	t.Parallel()
	e := setupRun(t)
	other := awstest.NewQueues(t, awstest.Config(t))
	name := other.Work[strings.LastIndex(other.Work, "/")+1:]
	cmd, _, exited := e.start(t, "--serve-queue", name, "--sweep-every", "1s")

	e.send(t, other.Work, `{"v":1,"kind":"flaky","id":"served-1","payload":{"succeed_on_attempt":2}}`)
	got := e.waitFor(t, "served-1", lease.StatusSucceeded, time.Minute)
	if got.Queue != name || got.Attempt != 2 {
		t.Errorf("served-1: queue %q, attempt %d; want %s, 2 (retried on its own queue)", got.Queue, got.Attempt, name)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := waitExit(t, exited, 30*time.Second); err != nil {
		t.Fatalf("leasehold run exited with %v after SIGTERM, want 0", err)
	}
}

// TestRunSecondSignalKills checks that a second signal ends the process at
// once, leaving its lease to expire rather than waiting for the task.
func TestRunSecondSignalKills(t *testing.T) {
	t.Parallel()
	e := setupRun(t)
	cmd, _, exited := e.start(t, "--invocation-timeout", "2m")
	e.send(t, e.queues.Work, `{"v":1,"kind":"sleep","id":"long-1","payload":{"seconds":60}}`)
	e.waitFor(t, "long-1", lease.StatusRunning, 30*time.Second)

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The graceful stop waits for the 60s task: the process is still there.
	select {
	case err := <-exited:
		t.Fatalf("leasehold run exited (%v) before its running task ended", err)
	case <-time.After(time.Second):
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := waitExit(t, exited, 5*time.Second)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
		t.Fatalf("after the second SIGTERM: %v, want death by SIGTERM", err)
	}
	if got := e.waitFor(t, "long-1", lease.StatusRunning, time.Second); got.Attempt != 1 {
		t.Errorf("long-1: attempt %d, want its first attempt's lease left to expire", got.Attempt)
	}
}

// TestRunMissingResources checks the exit code and message when the table or
// the work queue does not exist.
func TestRunMissingResources(t *testing.T) {
	t.Parallel()
	e := setupRun(t)
	bin := buildLeasehold(t)
	for name, args := range map[string][]string{
		"table":        {"run", "--table", e.table + "-missing"},
		"queue":        {"run", "--queue-url", e.queues.Work + "-missing"},
		"served queue": {"run", "--serve-queue", "leasehold-missing-" + e.table[len(e.table)-6:]},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(30*time.Second))
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = awstest.ChildEnv("LEASEHOLD_TABLE="+e.table, "LEASEHOLD_WORK_QUEUE_URL="+e.queues.Work)
		out, err := cmd.CombinedOutput()
		cancel()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 4 || !strings.Contains(string(out), "does not exist") {
			t.Errorf("missing %s: %v, output %q; want exit 4 saying it does not exist", name, err, out)
		}
	}
}
