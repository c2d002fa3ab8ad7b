// Command chaosworker is the worker process that the chaos test
// (internal/chaos) starts, kills, pauses and restarts. It is built as a
// user would build a worker, from the public API (leasehold.NewHandlers,
// leasehold.Handle, leasehold.NewWorker and Worker.Run), except that it
// reads the LEASEHOLD_* variables with the settings table's reader
// (internal/settingstable.Load, what NewWorkerFromEnv uses) so that, like
// the deployed function, it looks nothing up at start.
//
// It registers the task kind "chaos" (and "limited", the same handler for
// the flow-control run to give a concurrency limit), whose handler sleeps for the payload's
// work_ms (or until its context ends) and appends evidence of every execution
// to an append-only JSONL file: one line when the handler starts, one when it
// returns. The worker's own view of each outcome comes from the public
// metrics writer (WorkerConfig.Metrics), written to a second append-only file. Every
// line is one write(2) on a file opened with O_APPEND, so a SIGKILL can at
// worst lose or cut the last line; the reader skips a cut line.
//
// Three more kinds take part in workflows (docs/chaos.md, "Workflows"):
// "step" (a chain step or a child: sleeps, or fails for good when its
// payload says so, and records the dependencies it saw), "fan" (spawns the
// children its payload lists with workflow.All, and on resume records every
// child's outcome) and "cb" (waits with workflow.WaitForCallback, whose
// submit writes the token to the evidence file for the test to answer, and
// ends once a run reads the answer); "steps"
// runs its work as workflow.Step calls, one of which may fail transiently,
// and writes a "step" line when each step's function starts and ends;
// "order" has several awaits in one handler: a step, children awaited with
// workflow.All (a "packed" line records their outcomes), a step, a
// callback with workflow.WaitForCallback (its token on a "callback" line),
// a sleep and a step.
//
// "deploy" runs the code of version CHAOS_CODE ("v1", the default, or
// "v2"): the test switches its workers between the two while tasks of the
// kind are in flight (deploy.go).
//
// With CHAOS_EXIT_AFTER_FINISH=p the process exits (os.Exit) with
// probability p right after the store answers a write that ended a task
// somebody waits for (a child or a dependency), before the worker can notify
// its waiters: the crash the workflows must survive. It writes an
// "exit_after_finish" evidence line first. With CHAOS_DOOMED=path it always
// does so after such a write under a fence after the first of a task listed
// in that file (one id a line): the test lists a child whose holder it
// froze, so that the worker that takes it over dies before telling the
// parent.
//
// Environment (besides the worker's LEASEHOLD_* variables, package
// settings):
//
//	CHAOS_NAME      worker name; the lease owner is "<name>/<message id>"
//	CHAOS_CODE      the code version of the kind "deploy": v1 or v2
//	CHAOS_EVIDENCE  path of the handler evidence file
//	CHAOS_METRICS   path of the metrics (EMF) file
//	CHAOS_RECEIVE_VISIBILITY, CHAOS_LONG_POLL, CHAOS_VISIBILITY_MARGIN: durations
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/awsenv"
	"github.com/leasehold/leasehold/internal/chaos"
	"github.com/leasehold/leasehold/internal/settingstable"
)

// Payload is what the chaos test puts in each inline token.
type Payload struct {
	N      int `json:"n"`
	WorkMS int `json:"work_ms"`
}

// Result is what the handler returns; it names the execution that made it.
type Result struct {
	N     int    `json:"n"`
	Fence int64  `json:"fence"`
	Owner string `json:"owner"`
}

// Evidence is one line of the evidence file: the type internal/chaos
// reads it with.
type Evidence = chaos.HandlerEvent

// StepPayload is the payload of a chain step or a child.
type StepPayload struct {
	N      int  `json:"n"`
	WorkMS int  `json:"work_ms"`
	Fail   bool `json:"fail,omitempty"`
}

// FanPayload is the payload of a parent: one child per entry.
type FanPayload struct {
	Children []StepPayload `json:"children"`
}

// StepsPayload is the payload of a task written as steps: Steps steps of
// WorkMS each; step FailAt (when >= 0) fails transiently in the first
// FailTimes attempts, so that the retry must skip the recorded steps.
type StepsPayload struct {
	Steps     int `json:"steps"`
	WorkMS    int `json:"work_ms"`
	FailAt    int `json:"fail_at"`
	FailTimes int `json:"fail_times"`
	// SleepMS, when positive, is a workflow.Sleep after step SleepAfter.
	SleepAfter int `json:"sleep_after"`
	SleepMS    int `json:"sleep_ms"`
}

// StepResult is what a step's function returns, and so what is recorded:
// the run that made it.
type StepResult struct {
	Run   string `json:"run"`
	Fence int64  `json:"fence"`
}

// OrderPayload is the payload of an "order": its children, the work of
// each of its steps, its callback's timeout and its sleep.
type OrderPayload struct {
	Children  []StepPayload `json:"children"`
	WorkMS    int           `json:"work_ms"`
	TimeoutMS int           `json:"timeout_ms"`
	SleepMS   int           `json:"sleep_ms"`
}

// MapPayload is the payload of a "mapper": N children, Conc at a time,
// each working WorkMS; every FailEvery-th child (when positive) fails for
// good, and the map tolerates TolerateFailPct percent of failures.
type MapPayload struct {
	N               int `json:"n"`
	Conc            int `json:"conc"`
	WorkMS          int `json:"work_ms"`
	FailEvery       int `json:"fail_every,omitempty"`
	TolerateFailPct int `json:"tolerate_pct,omitempty"`
}

// CallbackPayload is the payload of a task that waits for a callback.
type CallbackPayload struct {
	TimeoutMS int `json:"timeout_ms"`
}

type evidenceFile struct{ f *os.File }

func openAppend(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
}

// attemptLines is the metrics file: a metrics.AttemptWriter, so that the
// worker writes it a line per attempt (task_id, attempt, outcome), the
// evidence the checker reads (chaos.MetricEvent), rather than a document
// per batch.
type attemptLines struct{ *os.File }

// MetricsPerAttempt implements metrics.AttemptWriter.
func (attemptLines) MetricsPerAttempt() bool { return true }

// write appends one line with a single write call.
func (e evidenceFile) write(ev Evidence) {
	line, err := json.Marshal(ev)
	if err != nil {
		return
	}
	line = append(line, '\n')
	if _, err := e.f.Write(line); err != nil {
		log.Printf("chaosworker: write evidence: %v", err)
	}
}

func durationEnv(name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		log.Fatalf("chaosworker: %s=%q: %v", name, v, err)
	}
	return d
}

// probability reads the probability in variable name (0 when unset).
func probability(name string) float64 {
	v := os.Getenv(name)
	if v == "" {
		return 0
	}
	p, err := strconv.ParseFloat(v, 64)
	if err != nil || p < 0 || p > 1 {
		log.Fatalf("chaosworker: %s=%q: want a probability", name, v)
	}
	return p
}

func main() {
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	name := os.Getenv("CHAOS_NAME")
	if name == "" {
		log.Fatal("chaosworker: CHAOS_NAME is required")
	}
	evf, err := openAppend(os.Getenv("CHAOS_EVIDENCE"))
	if err != nil {
		log.Fatalf("chaosworker: evidence file: %v", err)
	}
	defer evf.Close()
	mf, err := openAppend(os.Getenv("CHAOS_METRICS"))
	if err != nil {
		log.Fatalf("chaosworker: metrics file: %v", err)
	}
	defer mf.Close()
	ev := evidenceFile{f: evf}
	pid := os.Getpid()

	handlers := leasehold.NewHandlers()
	// "limited" is "chaos" under another name: the flow-control run gives
	// it a concurrency limit (docs/chaos.md, "Flow control").
	work := func(ctx context.Context, t *leasehold.Task[Payload]) (Result, error) {
		base := Evidence{Task: t.ID, Fence: t.Fence, Attempt: t.Attempt, Worker: name, PID: pid}
		start := base
		start.Event, start.AtUS = "start", time.Now().UnixMicro()
		ev.write(start)

		timer := time.NewTimer(time.Duration(t.Payload.WorkMS) * time.Millisecond)
		defer timer.Stop()
		end := base
		end.Event = "end"
		select {
		case <-timer.C:
			end.Outcome, end.AtUS = "ok", time.Now().UnixMicro()
			ev.write(end)
			return Result{N: t.Payload.N, Fence: t.Fence, Owner: name}, nil
		case <-ctx.Done():
			cause := context.Cause(ctx)
			end.Outcome, end.Cause, end.AtUS = "cancelled", fmt.Sprint(cause), time.Now().UnixMicro()
			ev.write(end)
			return Result{}, fmt.Errorf("chaos handler stopped: %w", cause)
		}
	}
	leasehold.Handle(handlers, "chaos", work)
	leasehold.Handle(handlers, "limited", work)

	registerWorkflows(handlers, ev, name, pid)
	registerOps(handlers, ev, name, pid)
	registerDeploy(handlers, ev, name, pid, codeVersion())

	// One call budget for loading the config; the SDK calls the worker
	// makes are bounded by the worker itself.
	loadCtx, cancelLoad := context.WithTimeout(context.Background(), 30*time.Second)
	awsCfg, err := config.LoadDefaultConfig(loadCtx)
	cancelLoad()
	if err != nil {
		log.Fatalf("chaosworker: AWS config: %v", err)
	}
	awsCfg.HTTPClient = awsenv.GuardHTTP(awsCfg.HTTPClient)
	rate, doomed := probability("CHAOS_EXIT_AFTER_FINISH"), os.Getenv("CHAOS_DOOMED")
	if rate > 0 || doomed != "" {
		awsCfg.HTTPClient = &exitAfterFinish{next: awsCfg.HTTPClient, rate: rate, doomed: doomed, ev: ev, name: name, pid: pid}
	}
	cfg := leasehold.WorkerConfig{
		AWS: awsCfg, Handlers: handlers,
		Owner:             name,
		Metrics:           attemptLines{mf},
		VisibilityMargin:  durationEnv("CHAOS_VISIBILITY_MARGIN", 2*time.Second),
		Backoff:           func(int) time.Duration { return 500 * time.Millisecond },
		ReceiveVisibility: durationEnv("CHAOS_RECEIVE_VISIBILITY", 10*time.Second),
		LongPoll:          durationEnv("CHAOS_LONG_POLL", 2*time.Second),
	}
	if err := settingstable.Load(&cfg, settingstable.Worker, os.Getenv); err != nil {
		log.Fatalf("chaosworker: %v", err)
	}
	w, err := leasehold.NewWorker(cfg)
	if err != nil {
		log.Fatalf("chaosworker: %v", err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	fmt.Println("ready", name, pid)
	if err := w.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		log.Printf("chaosworker: run: %v", err)
		stop()
		os.Exit(1)
	}
	fmt.Println("stopped", name)
}
