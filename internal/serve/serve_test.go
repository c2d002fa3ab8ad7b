package serve_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/examples"
	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/internal/dispatch"
	"github.com/leasehold/leasehold/internal/eventsource"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/dynamo"
	"github.com/leasehold/leasehold/internal/serve"
)

type env struct {
	cfg    aws.Config
	table  string
	queues awstest.Queues
	sqs    *sqs.Client
	store  *dynamo.Store
}

func setup(t *testing.T) *env {
	t.Helper()
	cfg := awstest.Config(t)
	e := &env{cfg: cfg, table: awstest.NewTable(t, cfg), queues: awstest.NewQueues(t, cfg), sqs: sqs.NewFromConfig(cfg)}
	e.store = dynamo.New(dynamodb.NewFromConfig(cfg), e.table, lease.Options{})
	return e
}

func (e *env) config(t *testing.T, workQueue string) serve.Config {
	t.Helper()
	hs := leasehold.NewHandlers()
	examples.Register(hs)
	log := slog.New(slog.DiscardHandler)
	w, err := leasehold.NewWorker(leasehold.WorkerConfig{AWS: e.cfg, Table: e.table, QueueURL: workQueue, Handlers: hs,
		Logger: log, LongPoll: time.Second, SweepEvery: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	d, err := dispatch.New(dispatch.Config{Store: e.store, SQS: e.sqs, WorkQueueURL: e.queues.Work})
	if err != nil {
		t.Fatal(err)
	}
	return serve.Config{
		Worker:     w,
		Dispatcher: d, IntakeSQS: e.sqs, IntakeQueueURL: e.queues.Intake,
		Intake: eventsource.Config{WaitTime: time.Second},
		Logger: log,
	}
}

// TestSweepDispatchesToWorker stores a task with no message at all, due
// now: only the sweep can get it to the worker. The sweep runs with and
// without an intake queue (leasehold run without --intake-queue-url).
func TestSweepDispatchesToWorker(t *testing.T) {
	t.Parallel()
	for _, withIntake := range []bool{true, false} {
		name := map[bool]string{true: "with intake", false: "worker only"}[withIntake]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			now := time.Now()
			ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(10*time.Second))
			defer cancel()
			if _, err := e.store.Create(ctx, lease.NewTask{ID: "orphan", Kind: "upper", Payload: []byte(`{"text":"swept"}`),
				MaxAttempts: 1, RunAt: now, DispatchAt: now}); err != nil {
				t.Fatal(err)
			}
			cfg := e.config(t, e.queues.Work)
			if !withIntake {
				cfg.Dispatcher, cfg.IntakeSQS, cfg.IntakeQueueURL = nil, nil, ""
			}

			runCtx, stop := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- serve.Run(runCtx, cfg) }()

			wait, waitCancel := context.WithTimeout(t.Context(), awstest.Scale(30*time.Second))
			defer waitCancel()
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				task, err := e.store.Get(wait, "orphan")
				if err == nil && task.Status == lease.StatusSucceeded {
					if string(task.Result) != `"SWEPT"` {
						t.Errorf("result %s", task.Result)
					}
					break
				}
				select {
				case <-wait.Done():
					t.Fatalf("the swept task did not succeed: %+v, %v", task, err)
				case <-tick.C:
				}
			}
			stop()
			if err := <-done; err != nil {
				t.Errorf("Run after stop: %v, want nil", err)
			}
		})
	}
}

// TestPartThatCannotStartStopsTheOthers points the worker at a queue that
// does not exist: Run returns its error, after stopping intake and sweep.
func TestPartThatCannotStartStopsTheOthers(t *testing.T) {
	t.Parallel()
	e := setup(t)
	missing := e.queues.Work + "-missing"
	err := serve.Run(t.Context(), e.config(t, missing))
	var part *serve.PartError
	if !errors.As(err, &part) || part.Part != "worker" || part.QueueURL != missing || !errors.Is(err, eventsource.ErrQueueNotFound) {
		t.Fatalf("Run returned %v, want the worker's queue-not-found error", err)
	}
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	if err := serve.Run(t.Context(), serve.Config{}); !errors.Is(err, serve.ErrConfig) {
		t.Errorf("Run without a worker: %v, want ErrConfig", err)
	}
}
