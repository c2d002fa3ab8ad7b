package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/chaos"
	"github.com/leasehold/leasehold/workflow"
)

// registerWorkflows registers the kinds the workflow part of the chaos test
// sends: "step", "fan", "cb", "steps" and "order".
func registerWorkflows(h *leasehold.Handlers, ev evidenceFile, name string, pid int) {
	begin := func(id string, fence int64, attempt int) Evidence {
		return Evidence{Task: id, Fence: fence, Attempt: attempt, Worker: name, PID: pid}
	}
	// sleep waits d or until ctx ends, and writes the end line.
	sleep := func(ctx context.Context, base Evidence, d time.Duration, outcome string) error {
		timer := time.NewTimer(d)
		defer timer.Stop()
		end := base
		end.Event = "end"
		select {
		case <-timer.C:
			end.Outcome, end.AtUS = outcome, time.Now().UnixMicro()
			ev.write(end)
			return nil
		case <-ctx.Done():
			cause := context.Cause(ctx)
			end.Outcome, end.Cause, end.AtUS = "cancelled", fmt.Sprint(cause), time.Now().UnixMicro()
			ev.write(end)
			return fmt.Errorf("chaos handler stopped: %w", cause)
		}
	}

	leasehold.Handle(h, "step", func(ctx context.Context, t *leasehold.Task[StepPayload]) (Result, error) {
		base := begin(t.ID, t.Fence, t.Attempt)
		start := base
		start.Event, start.AtUS = "start", time.Now().UnixMicro()
		if deps, ok := workflow.Dependencies(ctx); ok {
			start.Deps = make([]string, len(deps))
			for i, d := range deps {
				start.Deps[i] = d.ID + " " + string(d.Status)
			}
		}
		ev.write(start)
		outcome := "ok"
		if t.Payload.Fail {
			outcome = "failed"
		}
		if err := sleep(ctx, base, time.Duration(t.Payload.WorkMS)*time.Millisecond, outcome); err != nil {
			return Result{}, err
		}
		if t.Payload.Fail {
			return Result{}, leasehold.Fail(errors.New("planned permanent failure"))
		}
		return Result{N: t.Payload.N, Fence: t.Fence, Owner: name}, nil
	})

	leasehold.Handle(h, "fan", func(ctx context.Context, t *leasehold.Task[FanPayload]) (Result, error) {
		base := begin(t.ID, t.Fence, t.Attempt)
		start := base
		start.Event, start.AtUS = "start", time.Now().UnixMicro()
		children := make([]workflow.Child, len(t.Payload.Children))
		for i, c := range t.Payload.Children {
			children[i] = workflow.Child{Kind: "step", Payload: c, MaxAttempts: chaos.MaxAttempts}
		}
		// All answers from memory (the outcomes the executor handed this
		// run, or the recorded step), so the start line written after it
		// still comes before anything the run does.
		kids, err := workflow.All(ctx, "kids", children...)
		if err != nil {
			start.Phase = "spawn"
			ev.write(start)
			end := base
			end.Event, end.Outcome, end.AtUS = "end", "await", time.Now().UnixMicro()
			ev.write(end)
			return Result{}, err // the task waits for its children
		}
		start.Phase, start.Kids = "resume", kidLines(kids)
		ev.write(start)
		if err := sleep(ctx, base, 20*time.Millisecond, "ok"); err != nil {
			return Result{}, err
		}
		return Result{N: len(kids), Fence: t.Fence, Owner: name}, nil
	})

	leasehold.Handle(h, "cb", func(ctx context.Context, t *leasehold.Task[CallbackPayload]) (Result, error) {
		base := begin(t.ID, t.Fence, t.Attempt)
		start := base
		start.Event, start.AtUS = "start", time.Now().UnixMicro()
		ev.write(start)
		_, err := workflow.WaitForCallback[json.RawMessage](ctx, "approval", time.Duration(t.Payload.TimeoutMS)*time.Millisecond,
			func(_ context.Context, tok string) error {
				cb := base
				cb.Event, cb.Token, cb.AtUS = "callback", tok, time.Now().UnixMicro()
				ev.write(cb)
				return nil
			})
		outcome := "await"
		var refused *workflow.CallbackFailedError
		if errors.As(err, &refused) {
			outcome, err = "failed", leasehold.Fail(err) // a refusal ends the task
		}
		if err != nil {
			end := base
			end.Event, end.Outcome, end.AtUS = "end", outcome, time.Now().UnixMicro()
			ev.write(end)
			return Result{}, err // waiting for the answer
		}
		end := base
		end.Event, end.Outcome, end.AtUS = "end", "ok", time.Now().UnixMicro()
		ev.write(end)
		return Result{Fence: t.Fence, Owner: name}, nil
	})

	// runStep runs step name of a task's handler through workflow.Step,
	// writing its run, done and fail lines; failNow makes this run fail
	// transiently.
	runStep := func(ctx context.Context, base Evidence, name string, workMS int, failNow bool) error {
		_, err := stepRun(ctx, ev, base, name, workMS, failNow)
		return err
	}
	// stop writes the end line of a run that returns err.
	stop := func(base Evidence, err error) error {
		end := base
		end.Event, end.Outcome, end.Cause, end.AtUS = "end", "error", err.Error(), time.Now().UnixMicro()
		ev.write(end)
		return err
	}

	leasehold.Handle(h, "steps", func(ctx context.Context, t *leasehold.Task[StepsPayload]) (Result, error) {
		base := begin(t.ID, t.Fence, t.Attempt)
		start := base
		start.Event, start.AtUS = "start", time.Now().UnixMicro()
		ev.write(start)
		for i := range t.Payload.Steps {
			err := runStep(ctx, base, fmt.Sprintf("s%d", i), t.Payload.WorkMS, i == t.Payload.FailAt && t.Attempt <= t.Payload.FailTimes)
			if err == nil && i == t.Payload.SleepAfter && t.Payload.SleepMS > 0 {
				err = workflow.Sleep(ctx, time.Duration(t.Payload.SleepMS)*time.Millisecond)
			}
			if err != nil {
				return Result{}, stop(base, err)
			}
		}
		end := base
		end.Event, end.Outcome, end.AtUS = "end", "ok", time.Now().UnixMicro()
		ev.write(end)
		return Result{N: t.Payload.Steps, Fence: t.Fence, Owner: name}, nil
	})

	// "mapper": a workflow.Map of its payload's children ("step"), some
	// at a time, every FailEvery-th failing for good; its result is the
	// map's counts (n: how many succeeded).
	leasehold.Handle(h, "mapper", func(ctx context.Context, t *leasehold.Task[MapPayload]) (chaos.MapSummary, error) {
		base := begin(t.ID, t.Fence, t.Attempt)
		start := base
		start.Event, start.AtUS = "start", time.Now().UnixMicro()
		ev.write(start)
		p := t.Payload
		res, err := workflow.Map(ctx, "items", p.N, func(i int) workflow.Child {
			fail := p.FailEvery > 0 && i%p.FailEvery == p.FailEvery-1
			return workflow.Child{Kind: "step", Payload: StepPayload{N: i, WorkMS: p.WorkMS, Fail: fail}, MaxAttempts: chaos.MaxAttempts}
		}, workflow.MapOptions{MaxConcurrency: p.Conc, ToleratedFailurePercentage: p.TolerateFailPct})
		if err != nil {
			return chaos.MapSummary{}, stop(base, err)
		}
		end := base
		end.Event, end.Outcome, end.AtUS = "end", "ok", time.Now().UnixMicro()
		ev.write(end)
		return chaos.MapSummary{Succeeded: res.Succeeded, Total: res.Total, Started: res.Started, Failed: res.Failed}, nil
	})

	// "order": several awaits in one handler: step s0, the children
	// (workflow.All), step s1, a callback (workflow.WaitForCallback, its
	// token written as a callback line for the test to answer), a sleep,
	// step s2.
	leasehold.Handle(h, "order", func(ctx context.Context, t *leasehold.Task[OrderPayload]) (Result, error) {
		base := begin(t.ID, t.Fence, t.Attempt)
		start := base
		start.Event, start.AtUS = "start", time.Now().UnixMicro()
		ev.write(start)
		if err := runStep(ctx, base, "s0", t.Payload.WorkMS, false); err != nil {
			return Result{}, stop(base, err)
		}
		kids := make([]workflow.Child, len(t.Payload.Children))
		for i, c := range t.Payload.Children {
			kids[i] = workflow.Child{Kind: "step", Payload: c, MaxAttempts: chaos.MaxAttempts}
		}
		outs, err := workflow.All(ctx, "pack", kids...)
		if err != nil {
			return Result{}, stop(base, err)
		}
		packed := base
		packed.Event, packed.Phase, packed.AtUS = "packed", "resume", time.Now().UnixMicro()
		packed.Kids = kidLines(outs)
		ev.write(packed)
		if err := runStep(ctx, base, "s1", t.Payload.WorkMS, false); err != nil {
			return Result{}, stop(base, err)
		}
		_, err = workflow.WaitForCallback[json.RawMessage](ctx, "approval", time.Duration(t.Payload.TimeoutMS)*time.Millisecond,
			func(_ context.Context, tok string) error {
				cb := base
				cb.Event, cb.Token, cb.AtUS = "callback", tok, time.Now().UnixMicro()
				ev.write(cb)
				return nil
			})
		if err == nil {
			err = workflow.Sleep(ctx, time.Duration(t.Payload.SleepMS)*time.Millisecond)
		}
		if err == nil {
			err = runStep(ctx, base, "s2", t.Payload.WorkMS, false)
		}
		if err != nil {
			return Result{}, stop(base, err)
		}
		end := base
		end.Event, end.Outcome, end.AtUS = "end", "ok", time.Now().UnixMicro()
		ev.write(end)
		return Result{N: len(outs), Fence: t.Fence, Owner: name}, nil
	})
}

// stepRun runs step name of a task's handler through workflow.Step,
// writing its run, done and fail lines, and returns the step's result
// (recorded, or made by this run); failNow makes this run fail
// transiently.
func stepRun(ctx context.Context, ev evidenceFile, base Evidence, name string, workMS int, failNow bool) (StepResult, error) {
	return workflow.Step(ctx, name, func(ctx context.Context) (StepResult, error) {
		line := base
		line.Event, line.Step, line.Run = "step", name, fmt.Sprintf("%016x", rand.Uint64())
		line.Phase, line.AtUS = "run", time.Now().UnixMicro()
		ev.write(line)
		timer := time.NewTimer(time.Duration(workMS) * time.Millisecond)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-ctx.Done():
			return StepResult{}, fmt.Errorf("chaos step stopped: %w", context.Cause(ctx))
		}
		if failNow {
			line.Phase, line.AtUS = "fail", time.Now().UnixMicro()
			ev.write(line)
			return StepResult{}, fmt.Errorf("planned transient failure of step %s in attempt %d", name, base.Attempt)
		}
		line.Phase, line.AtUS = "done", time.Now().UnixMicro()
		ev.write(line)
		return StepResult{Run: line.Run, Fence: base.Fence}, nil
	})
}

// kidLines is how a resumed parent records its children's outcomes for
// the checks: "ID STATUS N", N the result's n (-1 without one).
func kidLines(kids []workflow.Outcome) []string {
	out := make([]string, len(kids))
	for i, k := range kids {
		n := -1
		var r Result
		if json.Unmarshal(k.Result, &r) == nil && len(k.Result) > 0 {
			n = r.N
		}
		out[i] = fmt.Sprintf("%s %s %d", k.ID, k.Status, n)
	}
	return out
}

// exitAfterFinish is the SDK's HTTP client with one fault: after the store
// answers a DynamoDB write that ended a task with waiters (a child's parent
// or a dependency's dependents), it exits the process with probability
// rate, before the answer reaches the worker and so before any notify; and
// always when the write ended a fence after the first of a task listed in
// the file doomed (the test lists a child whose holder it froze: this
// worker took it over, and the frozen holder wakes to find it ended and
// its parent untold).
type exitAfterFinish struct {
	next interface {
		Do(*http.Request) (*http.Response, error)
	}
	rate   float64
	doomed string
	ev     evidenceFile
	name   string
	pid    int
}

func (c *exitAfterFinish) Do(req *http.Request) (*http.Response, error) {
	resp, err := c.next.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK || req.Header.Get("X-Amz-Target") != "DynamoDB_20120810.UpdateItem" {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return resp, nil // the SDK sees the short body and retries
	}
	var out struct {
		Attributes struct {
			ID      struct{ S string }    `json:"id"`
			Status  struct{ S string }    `json:"status"`
			Fence   struct{ N string }    `json:"fence"`
			Waiters struct{ SS []string } `json:"waiters"`
		}
	}
	if json.Unmarshal(body, &out) != nil {
		return resp, nil
	}
	a := out.Attributes
	switch a.Status.S {
	case "SUCCEEDED", "FAILED", "CANCELLED":
	default:
		return resp, nil
	}
	var fence int64
	_, _ = fmt.Sscan(a.Fence.N, &fence)
	if len(a.Waiters.SS) == 0 || (rand.Float64() >= c.rate && (fence < 2 || !c.isDoomed(a.ID.S))) {
		return resp, nil
	}
	c.ev.write(Evidence{Event: "exit_after_finish", Task: a.ID.S, Fence: fence, Status: a.Status.S,
		Worker: c.name, PID: c.pid, AtUS: time.Now().UnixMicro()})
	os.Exit(3)
	return resp, nil
}

// isDoomed reports whether id is a line of the file doomed.
func (c *exitAfterFinish) isDoomed(id string) bool {
	if c.doomed == "" {
		return false
	}
	b, err := os.ReadFile(c.doomed)
	if err != nil {
		return false
	}
	return slices.Contains(strings.Split(string(b), "\n"), id)
}
