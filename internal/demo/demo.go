// Package demo is `make demo`: it runs the worker and the dispatcher in this
// process through the off-Lambda runner (internal/serve), sends a mixed set
// of example tasks with real SQS SendMessage calls, shows their progress as
// the DynamoDB records and the dead-letter queue reveal it, and prints a
// summary. Run reports whether every task ended as it should.
//
// The task kinds are the ones in examples/. The worker runs with a short
// lease (4s, renewed 2s before expiry) and a short linear backoff, so that
// renewals and retries happen within seconds.
package demo

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/examples"
	"github.com/leasehold/leasehold/internal/cli"
	"github.com/leasehold/leasehold/internal/dispatch"
	"github.com/leasehold/leasehold/internal/eventsource"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/dynamo"
	"github.com/leasehold/leasehold/internal/schedule"
	"github.com/leasehold/leasehold/internal/serve"
	"github.com/leasehold/leasehold/settings"
)

// Timing of the demo's worker.
const (
	leaseDuration = 4 * time.Second
	renewBefore   = 2 * time.Second
	clockSkew     = time.Second
	callTimeout   = 10 * time.Second
	pollEvery     = 250 * time.Millisecond
	// receiveVisibility must exceed leaseDuration - renewBefore, when the
	// first renewal extends a running task's message.
	receiveVisibility = 5 * time.Second
	// scheduleEvery is the demo schedule's rate.
	scheduleEvery = 10 * time.Second
)

// Defaults for Config.
const (
	DefaultDelay   = 20 * time.Second
	DefaultSlow    = 7 * time.Second
	DefaultTimeout = 2 * time.Minute
)

// ErrUnexpected is returned when a task did not end as it should.
var ErrUnexpected = errors.New("not every task ended as expected")

// Config is one run of the demo.
type Config struct {
	AWS       aws.Config
	Resources Resources
	// Delay is how long the delayed task waits (default 20s); Slow is how
	// long the slow task runs (default 7s, a few lease renewals).
	Delay, Slow time.Duration
	// Timeout bounds the wait for every task to settle (default 2m).
	Timeout time.Duration
	// Out receives the progress and the summary. Terminal redraws a
	// progress bar in place.
	Out      io.Writer
	Terminal bool
	// Log receives the worker's and the dispatcher's logs.
	Log *slog.Logger
	// TimeScale (at least 1; 0 means 1) stretches the worker's lease,
	// renewal lead, clock skew and receive visibility, so a loaded machine
	// whose emulator answers slowly does not cost the slow task its lease.
	// Scale Slow along with it to keep its renewals.
	TimeScale float64
}

// Run runs the demo. It returns nil when every task ended as it should,
// an error wrapping ErrUnexpected when one did not (the summary says which),
// or another error when the demo could not run.
func Run(ctx context.Context, cfg Config) error {
	cfg.Delay = cmp.Or(cfg.Delay, DefaultDelay)
	cfg.Slow = cmp.Or(cfg.Slow, DefaultSlow)
	cfg.Timeout = cmp.Or(cfg.Timeout, DefaultTimeout)
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	scale := func(d time.Duration) time.Duration { return time.Duration(float64(d) * max(cfg.TimeScale, 1)) }
	res := cfg.Resources
	q := sqs.NewFromConfig(cfg.AWS)
	store := dynamo.New(dynamodb.NewFromConfig(cfg.AWS), res.Table, lease.Options{})

	hs := leasehold.NewHandlers()
	examples.Register(hs)
	w, err := leasehold.NewWorker(leasehold.WorkerConfig{
		AWS: cfg.AWS, Table: res.Table, QueueURL: res.WorkQueueURL, DeadLetterQueueURL: res.WorkDLQURL, Handlers: hs,
		Owner:         "demo",
		LeaseDuration: scale(leaseDuration), RenewBefore: scale(renewBefore), ClockSkew: scale(clockSkew),
		Backoff: func(attempt int) time.Duration { return time.Duration(attempt) * time.Second },
		Logger:  cfg.Log.With("part", "worker"),
		// A long poll abandoned at the end of a run can still take
		// messages on the server; a short receive visibility brings them
		// back within seconds rather than the queue's 60s. A running
		// task's message stays hidden: renewals extend it.
		Pollers: 2, LongPoll: time.Second, ReceiveVisibility: scale(receiveVisibility),
		InvocationTimeout: 30 * time.Second, SweepEvery: 5 * time.Second,
	})
	if err != nil {
		return err
	}
	d, err := dispatch.New(dispatch.Config{
		Store: store, SQS: q, WorkQueueURL: res.WorkQueueURL, IntakeDLQURL: res.IntakeDLQURL,
		Logger: cfg.Log.With("part", "dispatch"),
	})
	if err != nil {
		return err
	}

	runID := newRunID()
	out := newProgress(cfg.Out, cfg.Terminal)
	out.printf("leasehold demo, run %s: worker and dispatcher in this process, on\n", runID)
	out.printf("  table %s, work queue %s, intake queue %s\n\n", res.Table, res.WorkQueueURL, res.IntakeQueueURL)

	// The runner: stopped (gracefully) once every task has settled.
	runCtx, stopRunner := context.WithCancel(ctx)
	defer stopRunner()
	runnerDone := make(chan error, 1)
	go func() {
		runnerDone <- serve.Run(runCtx, serve.Config{
			Worker:     w,
			Dispatcher: d, IntakeSQS: q, IntakeQueueURL: res.IntakeQueueURL,
			Intake: eventsource.Config{WaitTime: time.Second, VisibilityTimeout: scale(receiveVisibility),
				InvocationTimeout: 30 * time.Second},
			Logger: cfg.Log,
		})
	}()

	tasks := plan(cfg.Slow, cfg.Delay)
	w8 := newWatch(store, q, res.WorkDLQURL, runID, tasks, out)
	w8.complete = func(ctx context.Context, id string) (string, error) { return completeWithCLI(ctx, res, id) }
	w8.send = func(ctx context.Context, body string) error {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		_, err := q.SendMessage(cctx, &sqs.SendMessageInput{QueueUrl: aws.String(res.WorkQueueURL), MessageBody: aws.String(body)})
		return err
	}

	// The schedule: fired by this process, as `leasehold run --schedule`
	// does where there is no EventBridge, with the same slot id rule.
	every, err := schedule.Parse(fmt.Sprintf("rate(%d seconds)", int(scheduleEvery/time.Second)), schedule.Local)
	if err != nil {
		return err
	}
	stopSchedule, err := schedule.Start(ctx, schedule.Config{
		SQS: q, QueueURL: res.WorkQueueURL, Logger: cfg.Log.With("part", "schedule"),
		Specs: []schedule.Spec{{Name: "demo-" + runID + "-tick", Expr: every, Kind: "greet",
			Payload: []byte(`{"name":"tick"}`), CatchUp: schedule.CatchUp{Mode: schedule.None}}},
		OnFire: func(f schedule.Fired) { w8.slotFired(f.TaskID) },
	})
	if err != nil {
		return err
	}
	defer stopSchedule()
	for i, p := range tasks {
		w8.enqueued(i, time.Now())
		if p.schedule {
			continue // the firer sends its slots
		}
		url := res.WorkQueueURL
		if p.via == viaIntake {
			url = res.IntakeQueueURL
		}
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		_, err := q.SendMessage(cctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(p.body(w8.id(i)))})
		cancel()
		if err != nil {
			return fmt.Errorf("send %s to the %s: %w", p.name, p.via, err)
		}
	}
	intake, work := countVia(tasks, viaIntake), countVia(tasks, viaWork)
	out.printf("sent %d messages with SendMessage: %d to the intake queue, %d to the work queue\n\n",
		intake+work, intake, work)

	watchErr := w8.run(ctx, cfg.Timeout, runnerDone)
	stopSchedule()
	stopRunner()
	runErr := <-runnerDone
	out.done()

	w8.summary(cfg.Out)
	switch {
	case runErr != nil:
		return fmt.Errorf("runner: %w", runErr)
	case watchErr != nil:
		return watchErr
	case !w8.allAsExpected():
		return ErrUnexpected
	}
	return nil
}

// completeWithCLI answers task id's callback the way an operator would:
// `leasehold complete --task ID RESULT`, run in this process on the
// demo's resources.
func completeWithCLI(ctx context.Context, res Resources, id string) (string, error) {
	env := func(name string) string {
		switch name {
		case settings.EnvTable:
			return res.Table
		case settings.EnvWorkQueueURL:
			return res.WorkQueueURL
		}
		return os.Getenv(name)
	}
	const result = `{"approved":true}`
	args := []string{"complete", "--task", id, result}
	var out, errOut bytes.Buffer
	if code := cli.Main(ctx, args, cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errOut, Getenv: env}); code != cli.ExitOK {
		return "", fmt.Errorf("leasehold complete: exit %d: %s", code, strings.TrimSpace(errOut.String()))
	}
	return fmt.Sprintf("$ leasehold complete --task %s '%s'  ->  %s", id, result, strings.TrimSpace(out.String())), nil
}

func countVia(ps []planned, r route) int {
	n := 0
	for _, p := range ps {
		if p.via == r {
			n++
		}
	}
	return n
}

func newRunID() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return time.Now().Format("150405") + "-" + hex.EncodeToString(b[:])
}
