package leasehold_test

// Tests of Worker.Run, the off-Lambda runner, against the local AWS stack.
// The runner under test is a child process (this test binary, started again
// to run TestRunnerChild) so that it can be stopped with a real SIGTERM.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/examples"
	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/settingstable"
	"github.com/leasehold/leasehold/internal/token"
	"github.com/leasehold/leasehold/settings"
)

func TestRunRejectsImpossibleOptions(t *testing.T) {
	t.Parallel()
	e := setupStack(t)
	for name, cfg := range map[string]leasehold.WorkerConfig{
		"timeout within the deadline margin": {InvocationTimeout: 5 * time.Second},
		"negative pollers":                   {Pollers: -1},
		"long poll over 20s":                 {LongPoll: time.Minute},
		"batch over 10 without window":       {BatchSize: 50},
	} {
		cfg.Handlers, cfg.DeadlineMargin = leasehold.NewHandlers(), 10*time.Second
		err := e.worker(t, cfg).Run(t.Context())
		if !errors.Is(err, leasehold.ErrConfig) {
			t.Errorf("%s: Run returned %v, want an error wrapping ErrConfig", name, err)
		}
	}
}

func TestRunReportsMissingQueue(t *testing.T) {
	t.Parallel()
	e := setupStack(t)
	w, err := leasehold.NewWorker(leasehold.WorkerConfig{
		AWS: e.cfg, Table: e.table, QueueURL: e.queues.Work + "-missing", Handlers: leasehold.NewHandlers(),
		Logger: testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Run(t.Context()); !errors.Is(err, leasehold.ErrQueueNotFound) {
		t.Errorf("Run on a missing queue returned %v, want ErrQueueNotFound", err)
	}
}

// One missing queue among several stops Run: the poller group of the queue
// that exists is stopped and joined, and the error names the missing one.
func TestRunReportsMissingQueueAmongSeveral(t *testing.T) {
	t.Parallel()
	e := setupStack(t)
	missing := e.queues.Work + "-missing"
	w, err := leasehold.NewWorker(leasehold.WorkerConfig{
		AWS: e.cfg, Table: e.table, QueueURL: e.queues.Work, QueueURLs: []string{e.queues.Work, missing},
		Handlers: leasehold.NewHandlers(), Logger: testLogger(t), LongPoll: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := w.QueueURLs(); len(got) != 2 || got[0] != e.queues.Work || got[1] != missing {
		t.Fatalf("QueueURLs = %v", got)
	}
	ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(time.Minute))
	defer cancel()
	err = w.Run(ctx)
	if !errors.Is(err, leasehold.ErrQueueNotFound) || !strings.Contains(err.Error(), missing) {
		t.Fatalf("Run returned %v, want ErrQueueNotFound naming %s", err, missing)
	}
	if ctx.Err() != nil {
		t.Fatalf("Run returned only when its context ended")
	}
}

func TestNewWorkerRejectsFIFOQueues(t *testing.T) {
	t.Parallel()
	_, err := leasehold.NewWorker(leasehold.WorkerConfig{
		Table: "t", QueueURL: "http://sqs.test/1/work", QueueURLs: []string{"http://sqs.test/1/jobs.fifo"}, Handlers: leasehold.NewHandlers(),
	})
	if !errors.Is(err, leasehold.ErrConfig) {
		t.Fatalf("NewWorker with a FIFO queue: %v, want ErrConfig", err)
	}
}

// TestRunnerSurvivesSIGTERMMidBatch stops a runner with SIGTERM while its
// first batches run, checks that the tasks in flight finished instead of
// being dropped, restarts it, and checks that every task ends as it should,
// none of them run twice, and no message is left behind.
func TestRunnerSurvivesSIGTERMMidBatch(t *testing.T) {
	t.Parallel()
	e := setupStack(t)

	type want struct {
		status  lease.Status
		attempt int
	}
	wants := map[string]want{}
	for i := range 6 {
		id := fmt.Sprintf("slow-%d", i)
		e.send(t, e.queues.Work, `{"v":1,"kind":"announced-sleep","id":"`+id+`","payload":{"seconds":1.5},"max_attempts":3}`)
		wants[id] = want{lease.StatusSucceeded, 1}
	}
	for i := range 3 {
		id := fmt.Sprintf("greet-%d", i)
		e.send(t, e.queues.Work, `{"v":1,"kind":"greet","id":"`+id+`","payload":{"name":"runner"}}`)
		wants[id] = want{lease.StatusSucceeded, 1}
	}
	e.send(t, e.queues.Work, `{"v":1,"kind":"flaky","id":"flaky-ok","payload":{"succeed_on_attempt":2},"max_attempts":3}`)
	wants["flaky-ok"] = want{lease.StatusSucceeded, 2}
	e.send(t, e.queues.Work, `{"v":1,"kind":"flaky","id":"flaky-bad","payload":{"succeed_on_attempt":0},"max_attempts":2}`)
	wants["flaky-bad"] = want{lease.StatusFailed, 2}
	malformed := `{"v":1,"kind":"greet","payload":{"name":`
	e.send(t, e.queues.Work, malformed)

	started := map[string]int{} // task id -> handler starts, over both runs

	// First run: SIGTERM as soon as a handler has started.
	first := startRunnerChild(t, e, "first")
	line := first.next(t, 60*time.Second)
	if !strings.HasPrefix(line, "started ") {
		t.Fatalf("first runner said %q, want a handler start", line)
	}
	started[strings.Fields(line)[1]]++
	first.signal(t, syscall.SIGTERM)
	for _, l := range first.stop(t, 30*time.Second) {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "started" {
			started[f[1]]++
		}
	}

	// Whatever was in flight ran to its end: nothing is left RUNNING, and
	// every task that started has recorded its outcome.
	terminal := 0
	for id := range wants {
		st := e.status(t, id)
		switch {
		case st == lease.StatusRunning:
			t.Errorf("after the graceful stop task %s is still RUNNING", id)
		case started[id] > 0 && st != lease.StatusSucceeded:
			t.Errorf("task %s started before the stop but is %q, want it finished", id, st)
		case st.Terminal():
			terminal++
		}
	}
	if terminal == len(wants) {
		t.Fatal("every task ended before the SIGTERM took effect; the test did not stop the runner mid-work")
	}
	t.Logf("first run: %d of %d tasks done at the stop, %d handlers started", terminal, len(wants), len(started))

	// Second run: until every task has its final state.
	second := startRunnerChild(t, e, "second")
	waitUntil(t, 90*time.Second, func() bool {
		for id, w := range wants {
			if got := e.status(t, id); got != w.status {
				return false
			}
		}
		return true
	})
	second.signal(t, syscall.SIGTERM)
	for _, l := range second.stop(t, 30*time.Second) {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "started" {
			started[f[1]]++
		}
	}

	for id, w := range wants {
		got := e.get(t, id)
		if got.Status != w.status || got.Attempt != w.attempt {
			t.Errorf("task %s: %s after %d attempt(s), want %s after %d", id, got.Status, got.Attempt, w.status, w.attempt)
		}
		if strings.HasPrefix(id, "slow-") && started[id] != 1 {
			t.Errorf("task %s ran %d times, want once", id, started[id])
		}
	}
	e.wantDeadLetter(t, malformed)
	e.wantNoLiveToken(t, e.queues.Work)
}

// runnerChild is a runner in a child process.
type runnerChild struct {
	cmd   *exec.Cmd
	lines chan string // its stdout, line by line; closed at EOF
	log   string
}

func startRunnerChild(t *testing.T, e *stackEnv, name string, env ...string) *runnerChild {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestRunnerChild$", "-test.count=1")
	cmd.Env = awstest.ChildEnv(
		"LEASEHOLD_RUNNER_CHILD=1",
		settings.EnvTable+"="+e.table,
		settings.EnvWorkQueueURL+"="+e.queues.Work,
		settings.EnvWorkDLQURL+"="+e.queues.WorkDLQ)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = logFile
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &runnerChild{cmd: cmd, lines: make(chan string, 100), log: logPath}
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil { // stop was not reached: kill it
			_ = cmd.Process.Kill()
			for range c.lines {
			}
			_ = cmd.Wait()
		}
		if t.Failed() {
			out, _ := os.ReadFile(logPath)
			t.Logf("runner %s log:\n%s", name, out)
		}
	})
	return c
}

// next returns the child's next line of output.
func (c *runnerChild) next(t *testing.T, timeout time.Duration) string {
	t.Helper()
	timeout = awstest.Scale(timeout) // a bound to give up, not a pass criterion
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case l, ok := <-c.lines:
		if !ok {
			t.Fatal("runner child ended its output early")
		}
		return l
	case <-timer.C:
		t.Fatalf("runner child said nothing for %s", timeout)
	case <-t.Context().Done():
		t.Fatal(t.Context().Err())
	}
	return ""
}

func (c *runnerChild) signal(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := c.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// stop reads the rest of the child's output and waits for it to exit; the
// exit must be clean and come within timeout.
func (c *runnerChild) stop(t *testing.T, timeout time.Duration) []string {
	t.Helper()
	timeout = awstest.Scale(timeout) // a bound to give up, not a pass criterion
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var out []string
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				if err := c.cmd.Wait(); err != nil {
					t.Fatalf("runner child exited with %v; output %q", err, out)
				}
				if len(out) == 0 || out[len(out)-1] != "PASS" || !containsLine(out, "stopped") {
					t.Fatalf("runner child did not stop cleanly; output %q", out)
				}
				return out
			}
			out = append(out, l)
		case <-timer.C:
			t.Fatalf("runner child still running %s after the signal; output %q", timeout, out)
		}
	}
}

func containsLine(lines []string, s string) bool {
	for _, l := range lines {
		if l == s {
			return true
		}
	}
	return false
}

// waitUntil polls cond until it holds or the budget is spent.
func waitUntil(t *testing.T, budget time.Duration, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(budget))
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("condition not met within %s", budget)
		case <-tick.C:
		}
	}
}

func (e *stackEnv) wantDeadLetter(t *testing.T, body string) {
	t.Helper()
	// Received with a short visibility and a retried receive: a response
	// the SDK loses (it does, about once in thousands of calls) hides the
	// message for two seconds, not for the queue's default.
	got := awstest.ReceiveN(t, e.sqs, e.queues.WorkDLQ, 1, 30*time.Second, 2, nil)
	// At least once: a forward the SDK sent again after its answer was lost
	// is there twice. Every message must be the malformed one, with its reason.
	for _, m := range got.Records {
		if m.Body != body {
			t.Fatalf("dead-letter queue holds %q, want only the malformed message", m.Body)
		}
		if r := m.MessageAttributes["leasehold-reason"].StringValue; r == nil || !strings.Contains(*r, "malformed") {
			t.Errorf("dead-letter reason %v, want one saying malformed", r)
		}
	}
}

// wantNoLiveToken checks that nothing the tasks still need is left on the
// queue. SQS delivers at least once, so a duplicate token can remain (a send
// retried after its answer was lost, a message redelivered after a stop);
// the worker keeps such a token, hidden, while another holds the lease. Every
// message left must therefore name a task that has already ended. Hidden
// ones are waited for until they are visible again, within a scaled bound.
func (e *stackEnv) wantNoLiveToken(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(awstest.Scale(60 * time.Second))
	for {
		ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(10*time.Second))
		out, err := e.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
			QueueUrl: aws.String(url),
			AttributeNames: []sqstypes.QueueAttributeName{
				sqstypes.QueueAttributeNameApproximateNumberOfMessages,
				sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
				sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed,
			},
		})
		cancel()
		if err != nil {
			t.Fatalf("queue attributes: %v", err)
		}
		left := 0
		for _, v := range out.Attributes {
			n, _ := strconv.Atoi(v)
			left += n
		}
		if left == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("work queue still holds messages: %v", out.Attributes)
		}
		ev := e.receive(t, url, 10, time.Second, 30)
		for _, r := range ev.Records {
			tok, err := token.Decode(r.Body)
			if err != nil {
				t.Fatalf("left on the work queue: undecodable message %q: %v", r.Body, err)
			}
			if st := e.status(t, tok.ID); !st.Terminal() {
				t.Errorf("left on the work queue: the token of task %s, which is still %s", tok.ID, st)
			}
			ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(10*time.Second))
			_, err = e.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: aws.String(r.ReceiptHandle)})
			cancel()
			if err != nil {
				t.Fatalf("delete: %v", err)
			}
		}
	}
}

// sleepFor is the example "sleep" kind's handler, for the announced-sleep
// wrapper: it waits, honouring cancellation, long enough for a lease to be
// renewed.
func sleepFor(ctx context.Context, p examples.Sleep, fence int64) (map[string]any, error) {
	timer := time.NewTimer(time.Duration(p.Seconds * float64(time.Second)))
	defer timer.Stop()
	select {
	case <-timer.C:
		return map[string]any{"slept_seconds": p.Seconds, "fence": fence}, nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// TestRunnerChild is the runner of TestRunnerSurvivesSIGTERMMidBatch; it
// does nothing unless started by it. It prints "started <id> <attempt>"
// when an announced-sleep handler starts, and "stopped" when Run returns.
func TestRunnerChild(t *testing.T) {
	if os.Getenv("LEASEHOLD_RUNNER_CHILD") != "1" {
		t.Skip("child process of TestRunnerSurvivesSIGTERMMidBatch; runs only when started by it")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	cfg := awstest.Config(t)
	hs := leasehold.NewHandlers()
	examples.Register(hs)
	leasehold.Handle(hs, "announced-sleep", func(ctx context.Context, task *leasehold.Task[examples.Sleep]) (map[string]any, error) {
		fmt.Println("started", task.ID, strconv.Itoa(task.Attempt))
		start := time.Now()
		out, err := sleepFor(ctx, task.Payload, task.Fence)
		// When the handler ran, on the machine's clock, which every child
		// shares: TestKindConcurrencyAcrossWorkersOnTheStack overlaps them.
		fmt.Println("span", task.ID, strconv.FormatInt(start.UnixNano(), 10), strconv.FormatInt(time.Now().UnixNano(), 10))
		return out, err
	})
	// Short leases, so that a lost one would show within the test; they
	// scale with LEASEHOLD_TEST_TIMESCALE, which this process inherits, so
	// a busy machine's late renewal does not lose one.
	wcfg := leasehold.WorkerConfig{
		AWS: cfg, Handlers: hs,
		LeaseDuration: awstest.Scale(4 * time.Second), RenewBefore: awstest.Scale(2 * time.Second),
		ClockSkew: awstest.Scale(time.Second),
		Backoff:   func(int) time.Duration { return 500 * time.Millisecond },
		Logger:    slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Pollers:   2, BatchSize: 3, LongPoll: time.Second,
		ReceiveVisibility: awstest.Scale(3 * time.Second), InvocationTimeout: awstest.Scale(20 * time.Second),
	}
	// A parent that sets the invocation timeout gets it (code wins over
	// the environment in settingstable.Load).
	if os.Getenv(settings.EnvInvocationTimeout) != "" {
		wcfg.InvocationTimeout = 0
	}
	// The resources from the environment the parent set.
	if err := settingstable.Load(&wcfg, settingstable.Worker, os.Getenv); err != nil {
		t.Fatal(err)
	}
	w, err := leasehold.NewWorker(wcfg)
	if err != nil {
		t.Fatal(err)
	}
	err = w.Run(ctx)
	fmt.Println("stopped")
	if err != nil {
		t.Fatal(err)
	}
}
