package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/chaos"
	"github.com/leasehold/leasehold/workflow"
)

// BranchPayload is the payload of a "branches" task: three branches of
// two steps each, WorkMS each; with FailB, branch b's second step fails
// transiently in the task's first attempt; with SleepC, branch c sleeps
// SleepMS between its steps.
type BranchPayload struct {
	WorkMS  int  `json:"work_ms"`
	FailB   bool `json:"fail_b,omitempty"`
	SleepMS int  `json:"sleep_ms,omitempty"`
}

// RacePayload is the payload of a "racer": a callback raced against a
// timer of TimerMS; the callback's own timeout is TimeoutMS.
type RacePayload struct {
	TimerMS   int `json:"timer_ms"`
	TimeoutMS int `json:"timeout_ms"`
}

// InboxPayload is the payload of an "inbox": it receives one message per
// entry of Topics, from that topic, in that order, waiting at most
// TimeoutMS for each.
type InboxPayload struct {
	Topics    []string `json:"topics"`
	TimeoutMS int      `json:"timeout_ms"`
}

// registerOps registers the kinds that exercise the operations of a
// handler beyond steps and awaits of children (docs/chaos.md,
// "Branches, races and messages"): "branches" (workflow.Parallel),
// "racer" (workflow.Race of CallbackAsync against SleepAsync) and "inbox"
// (workflow.Receive).
func registerOps(h *leasehold.Handlers, ev evidenceFile, name string, pid int) {
	baseOf := func(id string, fence int64, attempt int) Evidence {
		return Evidence{Task: id, Fence: fence, Attempt: attempt, Worker: name, PID: pid}
	}
	started := func(base Evidence) {
		start := base
		start.Event, start.AtUS = "start", time.Now().UnixMicro()
		ev.write(start)
	}
	ended := func(base Evidence, err error) error {
		end := base
		end.Event, end.AtUS = "end", time.Now().UnixMicro()
		end.Outcome = "ok"
		if err != nil {
			end.Outcome, end.Cause = "error", err.Error()
		}
		ev.write(end)
		return err
	}

	// "branches": workflow.Parallel of the branches a, b and c, each
	// running the steps s0 and s1 (a "bstep" line per run of a step's
	// function: run, then done or fail); its result lists the result of
	// every branch step as the branches returned them.
	leasehold.Handle(h, "branches", func(ctx context.Context, t *leasehold.Task[BranchPayload]) (chaos.BranchResult, error) {
		base := baseOf(t.ID, t.Fence, t.Attempt)
		started(base)
		p := t.Payload
		branch := func(b string) func(context.Context) ([]string, error) {
			return func(ctx context.Context) ([]string, error) {
				var runs []string
				for i := range 2 {
					step := fmt.Sprintf("s%d", i)
					failNow := p.FailB && b == "b" && i == 1 && t.Attempt == 1
					res, err := branchStep(ctx, ev, base, b, step, p.WorkMS, failNow)
					if err != nil {
						return nil, err
					}
					runs = append(runs, res.Run)
					if b == "c" && i == 0 && p.SleepMS > 0 {
						if err := workflow.Sleep(ctx, time.Duration(p.SleepMS)*time.Millisecond); err != nil {
							return nil, err
						}
					}
				}
				return runs, nil
			}
		}
		fs, err := workflow.Parallel(ctx, "legs", workflow.MapOptions{}, map[string]func(context.Context) ([]string, error){
			"a": branch("a"), "b": branch("b"), "c": branch("c"),
		})
		if err != nil {
			return chaos.BranchResult{}, ended(base, err)
		}
		out := chaos.BranchResult{Runs: map[string]string{}}
		for b, f := range fs {
			runs, err := f.Get(ctx)
			if err != nil {
				return chaos.BranchResult{}, ended(base, err)
			}
			for i, r := range runs {
				out.Runs[fmt.Sprintf("%s/s%d", b, i)] = r
			}
		}
		return out, ended(base, nil)
	})

	// "racer": a callback (its token on a "callback" line, for the test
	// to answer or not) raced against a timer; every run that gets the
	// race's outcome writes a "race" line naming the winner, then a step
	// records it, and the result carries it.
	leasehold.Handle(h, "racer", func(ctx context.Context, t *leasehold.Task[RacePayload]) (Result, error) {
		base := baseOf(t.ID, t.Fence, t.Attempt)
		started(base)
		cb := workflow.CallbackAsync[json.RawMessage](ctx, "approval", time.Duration(t.Payload.TimeoutMS)*time.Millisecond,
			func(_ context.Context, tok string) error {
				line := base
				line.Event, line.Token, line.AtUS = "callback", tok, time.Now().UnixMicro()
				ev.write(line)
				return nil
			})
		timer := workflow.SleepAsync(ctx, time.Duration(t.Payload.TimerMS)*time.Millisecond)
		first, err := workflow.Race(ctx, "decision", cb, timer)
		if err != nil {
			return Result{}, ended(base, err)
		}
		line := base
		line.Event, line.Phase, line.AtUS = "race", chaos.RaceWinner(first), time.Now().UnixMicro()
		ev.write(line)
		if first == 0 {
			if _, err := cb.Get(ctx); err != nil {
				var refused *workflow.CallbackFailedError
				if errors.As(err, &refused) {
					err = leasehold.Fail(err)
				}
				return Result{}, ended(base, err)
			}
		}
		seen, err := workflow.Step(ctx, "seen", func(context.Context) (int, error) { return first, nil })
		if err != nil {
			return Result{}, ended(base, err)
		}
		return Result{N: seen, Fence: t.Fence, Owner: name}, ended(base, nil)
	})

	// "inbox": one workflow.Receive per entry of its topics, each message
	// recorded by a step "got-i" (a "recv" line per run of its function);
	// its result lists the message ids in the order received.
	leasehold.Handle(h, "inbox", func(ctx context.Context, t *leasehold.Task[InboxPayload]) (chaos.InboxResult, error) {
		base := baseOf(t.ID, t.Fence, t.Attempt)
		started(base)
		var out chaos.InboxResult
		for i, topic := range t.Payload.Topics {
			m, ok, err := workflow.Receive[chaos.InboxMessage](ctx, topic, time.Duration(t.Payload.TimeoutMS)*time.Millisecond)
			if err == nil && !ok {
				err = leasehold.Fail(fmt.Errorf("no message on %q within %d ms", topic, t.Payload.TimeoutMS))
			}
			if err != nil {
				return chaos.InboxResult{}, ended(base, err)
			}
			step := fmt.Sprintf("got-%d", i)
			got, err := workflow.Step(ctx, step, func(context.Context) (chaos.InboxMessage, error) {
				line := base
				line.Event, line.Step, line.Run, line.Phase, line.AtUS = "recv", step, m.ID, "run", time.Now().UnixMicro()
				ev.write(line)
				return m, nil
			})
			if err != nil {
				return chaos.InboxResult{}, ended(base, err)
			}
			out.IDs = append(out.IDs, got.ID)
		}
		return out, ended(base, nil)
	})
}

// branchStep runs step name of branch b through workflow.Step in the
// branch's context, writing its "bstep" lines (Step "b/name"): run, then
// done with the result, or fail for a planned transient failure.
func branchStep(ctx context.Context, ev evidenceFile, base Evidence, b, name string, workMS int, failNow bool) (StepResult, error) {
	return workflow.Step(ctx, name, func(ctx context.Context) (StepResult, error) {
		line := base
		line.Event, line.Step, line.Run = "bstep", b+"/"+name, fmt.Sprintf("%016x", rand.Uint64())
		line.Phase, line.AtUS = "run", time.Now().UnixMicro()
		ev.write(line)
		timer := time.NewTimer(time.Duration(workMS) * time.Millisecond)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-ctx.Done():
			return StepResult{}, fmt.Errorf("chaos branch step stopped: %w", context.Cause(ctx))
		}
		if failNow {
			line.Phase, line.AtUS = "fail", time.Now().UnixMicro()
			ev.write(line)
			return StepResult{}, fmt.Errorf("planned transient failure of step %s/%s in attempt %d", b, name, base.Attempt)
		}
		line.Phase, line.AtUS = "done", time.Now().UnixMicro()
		ev.write(line)
		return StepResult{Run: line.Run, Fence: base.Fence}, nil
	})
}
