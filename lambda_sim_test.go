package leasehold

// The Lambda path in the emulator-free simulation (issue 38, point 3): the
// same in-memory queue and store as BenchmarkThroughputSim, with an event
// source mapping in front of the handler instead of Worker.Run. Each of
// the mapping's pollers receives ten, invokes the function with them as one
// SQS event and receives its next batch while the invocation runs (the
// most a mapping overlaps); its invocations run one at a time (one
// concurrency slot a poller); it deletes what the invocation did not
// report as failed in the background, off the invocation's path. Two
// functions are compared:
//
//   - lambda-bare: a handler that only returns its batch, the best a
//     function can do;
//   - lambda: Worker.HandleSQS, with a no-op task handler: the batch
//     listing entry, then per task its create-and-claim and its finish.
//
// What bounds both is one poller's cycle: the longer of a receive and an
// invocation. The invocation's length, in store round trips, is what
// issue 38 point 3 names: "nothing but the task's own create and finish on
// a batch's critical path", two round trips.

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.uber.org/goleak"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/leasemem"
	"github.com/leasehold/leasehold/internal/sqsevent"
)

// simInvocations is a mapping run's invocation lengths.
type simInvocations struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *simInvocations) add(d time.Duration) {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
}

// median returns the median invocation length.
func (s *simInvocations) median() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.d) == 0 {
		return 0
	}
	d := slices.Clone(s.d)
	slices.Sort(d)
	return d[len(d)/2]
}

// simMapping runs pollers mapping pollers of fn against q until the queue
// is drained (its last message deleted) or simRunLimit passes, and returns
// the time until drained. Each poller receives ahead while its invocation
// runs and invokes one batch at a time; the deletes go out in goroutines
// of their own. Every goroutine is joined before it returns.
func simMapping(tb testing.TB, q *simQueue, pollers int, inv *simInvocations, fn func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)) time.Duration {
	queue, err := sqsevent.ParseQueueARN(simQueueARN)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), simRunLimit)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	invoke := func(msgs []types.Message) {
		ev := queue.Event(msgs)
		began := time.Now()
		resp, err := fn(ctx, ev)
		inv.add(time.Since(began))
		if err != nil {
			return // the whole batch comes back
		}
		failed := map[string]bool{}
		for _, f := range resp.BatchItemFailures {
			failed[f.ItemIdentifier] = true
		}
		var done []types.Message
		for _, m := range msgs {
			if !failed[aws.ToString(m.MessageId)] {
				done = append(done, m)
			}
		}
		if len(done) > 0 {
			wg.Go(func() { _ = simDelete(ctx, q, done) })
		}
	}
	for range pollers {
		wg.Go(func() {
			var running chan struct{} // closed when the poller's invocation has returned
			defer func() {
				if running != nil {
					<-running
				}
			}()
			for ctx.Err() == nil {
				out, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
					QueueUrl: aws.String(simQueueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 20,
				})
				if err != nil || len(out.Messages) == 0 {
					continue // only ctx ends a receive here
				}
				if running != nil {
					<-running // one invocation a poller at a time
				}
				done := make(chan struct{})
				running = done
				wg.Go(func() {
					defer close(done)
					invoke(out.Messages)
				})
			}
		})
	}
	var elapsed time.Duration
	select {
	case <-q.drained:
		elapsed = time.Since(start)
	case <-ctx.Done():
		tb.Errorf("mapping did not drain the queue within %s", simRunLimit)
		elapsed = time.Since(start)
	}
	cancel()
	q.close()
	wg.Wait()
	return elapsed
}

// simLambdaResult is one mapping run: its consumer's result and its
// median invocation.
type simLambdaResult struct {
	simResult
	Invocation time.Duration
}

// simLambdaBare runs the mapping with a function that only returns.
func simLambdaBare(tb testing.TB, s simSetup) simLambdaResult {
	q := simLoad(tb, s.simLatency, s.Tasks)
	tally := newSimTally(s.Tasks)
	var inv simInvocations
	elapsed := simMapping(tb, q, s.Pollers, &inv, func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		for _, r := range ev.Records {
			tally.ran(simTokenID(tb, r.Body))
		}
		return events.SQSEventResponse{}, nil
	})
	r := simResult{Consumer: "lambda-bare", Tasks: s.Tasks, Elapsed: elapsed, Runs: tally.snapshot()}
	q.snapshot(&r)
	return simLambdaResult{simResult: r, Invocation: inv.median()}
}

// simLambda runs the mapping with Worker.HandleSQS, a no-op task handler.
func simLambda(tb testing.TB, s simSetup) simLambdaResult {
	lat, n := s.simLatency, s.Tasks
	q := simLoad(tb, lat, n)
	mem := leasemem.New(lease.Options{})
	store := &simStore{Store: mem, d: lat.Store, want: int64(n), done: make(chan struct{})}
	tally := newSimTally(n)
	hs := NewHandlers()
	Handle(hs, simKind, func(ctx context.Context, t *Task[json.RawMessage]) (struct{}, error) {
		tally.ran(t.ID)
		return struct{}{}, nil
	})
	w, err := newWorker(store, q, WorkerConfig{
		QueueURL: simQueueURL, Handlers: hs, SweepEvery: -1, Owner: "sim",
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		tb.Fatal(err)
	}
	w.source = q
	var inv simInvocations
	elapsed := simMapping(tb, q, s.Pollers, &inv, w.HandleSQS)
	r := simResult{Consumer: "lambda", Tasks: n, Elapsed: elapsed, Runs: tally.snapshot()}
	q.snapshot(&r)
	for i := range n {
		t, err := mem.Get(context.Background(), simTaskID(i))
		switch {
		case err != nil:
			tb.Errorf("task %s: %v", simTaskID(i), err)
		case t.Status != lease.StatusSucceeded || t.Attempt != 1:
			tb.Errorf("task %s: status %s attempt %d, want SUCCEEDED in attempt 1", t.ID, t.Status, t.Attempt)
		case t.ListedIn != "":
			r.BatchListed += 1 / float64(n)
		}
	}
	return simLambdaResult{simResult: r, Invocation: inv.median()}
}

// simLambdaRounds runs the two functions in alternating order, rounds
// times each, and returns their runs.
func simLambdaRounds(tb testing.TB, s simSetup, rounds int) (bare, lh []simLambdaResult) {
	for round := range rounds {
		for k := range 2 {
			if (round+k)%2 == 0 {
				bare = append(bare, simLambdaBare(tb, s))
				r := bare[len(bare)-1]
				tb.Logf("round %d lambda-bare %6d tasks, %2d pollers, in %8s: %7.0f tasks/s, invocation %s", round+1, s.Tasks, s.Pollers, r.Elapsed.Round(time.Millisecond), r.TasksPerSecond(), r.Invocation.Round(100*time.Microsecond))
			} else {
				lh = append(lh, simLambda(tb, s))
				r := lh[len(lh)-1]
				tb.Logf("round %d lambda      %6d tasks, %2d pollers, in %8s: %7.0f tasks/s, invocation %s", round+1, s.Tasks, s.Pollers, r.Elapsed.Round(time.Millisecond), r.TasksPerSecond(), r.Invocation.Round(100*time.Microsecond))
			}
		}
	}
	return bare, lh
}

func TestThroughputSimLambdaRuns(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	lat := simLatency{Store: time.Millisecond, Receive: time.Millisecond, SQS: time.Millisecond}
	s := simSetup{simLatency: lat, Tasks: 200, Pollers: 2}
	for _, r := range []simLambdaResult{simLambdaBare(t, s), simLambda(t, s)} {
		t.Logf("%s: %d tasks in %s, invocation %s, calls %v", r.Consumer, r.Tasks, r.Elapsed.Round(time.Millisecond), r.Invocation, r.Calls)
		simCheck(t, r.simResult)
	}
}

// BenchmarkThroughputSimLambda runs the Lambda path at 5 and 10 ms per
// DynamoDB call, with 2 and 8 mapping pollers (LEASEHOLD_SIM_* as for
// BenchmarkThroughputSim), and reports lambda ÷ lambda-bare and the
// median invocation in store round trips.
func BenchmarkThroughputSimLambda(b *testing.B) {
	for _, store := range []time.Duration{simDefaultLatency.Store, 2 * simDefaultLatency.Store} {
		for _, p := range []int{2, 8} {
			s := simSetup{
				simLatency: simLatency{Store: store, Receive: simDefaultLatency.Receive, SQS: simDefaultLatency.SQS},
				Pollers:    p,
				Tasks:      simEnvInt(b, "LEASEHOLD_SIM_TASKS", simTasks(p)),
			}
			b.Run(fmt.Sprintf("db=%s/pollers=%d", store, p), func(b *testing.B) {
				var bare, lh []simLambdaResult
				for b.Loop() {
					rb, rl := simLambdaRounds(b, s, 3)
					bare, lh = append(bare, rb...), append(lh, rl...)
				}
				b.StopTimer()
				tps := func(r simLambdaResult) float64 { return r.TasksPerSecond() }
				med := func(rs []simLambdaResult, f func(simLambdaResult) float64) float64 {
					vs := make([]float64, len(rs))
					for i, r := range rs {
						simCheck(b, r.simResult)
						vs[i] = f(r)
					}
					slices.Sort(vs)
					return vs[len(vs)/2]
				}
				bt, lt := med(bare, tps), med(lh, tps)
				trips := med(lh, func(r simLambdaResult) float64 { return float64(r.Invocation) / float64(store) })
				b.ReportMetric(0, "ns/op")
				b.ReportMetric(bt, "lambda-bare-tasks/s")
				b.ReportMetric(lt, "lambda-tasks/s")
				b.ReportMetric(lt/bt, "lambda/bare")
				b.ReportMetric(trips, "invocation-store-trips")
				b.Logf("lambda/bare %.2f at %s: invocation %.2f store round trips (target 0.9; 2 trips)", lt/bt, s, trips)
			})
		}
	}
}
