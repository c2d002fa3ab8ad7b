package main

import (
	"context"
	"log"
	"os"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/chaos"
	"github.com/leasehold/leasehold/workflow"
)

// registerDeploy registers the kind "deploy", whose code this process
// runs in the version code names (CHAOS_CODE, "v1" or "v2"): the chaos
// test restarts its workers with v2 while tasks of the kind are in flight,
// and with v1 again later (docs/chaos.md, "Deploys").
//
// v1, for every task: step s0, step s1 (its result is the summary), a
// sleep of the payload's SleepMS, step s2. v2 makes one change, the one
// the payload's Change names:
//
//   - "rename": step s1 is called "summary";
//   - "sleep": a sleep of 200 ms is inserted before s1;
//   - "version": workflow.Version("audit", 1) after s0, and under version 1
//     a step "audit" before s1.
//
// A task in flight under v1 (asleep after s1) replays s0 and then meets
// the change: the first two diverge there (the task is held until v1 is
// back), the third takes version 0 and goes on under v2 without the audit.
// A task that starts under v2 takes version 1.
func registerDeploy(h *leasehold.Handlers, ev evidenceFile, name string, pid int, code string) {
	leasehold.Handle(h, "deploy", func(ctx context.Context, t *leasehold.Task[chaos.DeployPayload]) (chaos.DeployResult, error) {
		base := Evidence{Task: t.ID, Fence: t.Fence, Attempt: t.Attempt, Worker: name, PID: pid}
		start := base
		start.Event, start.Phase, start.AtUS = "start", code, time.Now().UnixMicro()
		ev.write(start)
		stop := func(err error) (chaos.DeployResult, error) {
			end := base
			end.Event, end.Outcome, end.Cause, end.AtUS = "end", "error", err.Error(), time.Now().UnixMicro()
			ev.write(end)
			return chaos.DeployResult{}, err
		}
		p := t.Payload
		if _, err := stepRun(ctx, ev, base, "s0", p.WorkMS, false); err != nil {
			return stop(err)
		}
		summaryStep, version := "s1", 0
		if code == "v2" {
			switch p.Change {
			case chaos.ChangeRename:
				summaryStep = "summary"
			case chaos.ChangeSleep:
				if err := workflow.Sleep(ctx, 200*time.Millisecond); err != nil {
					return stop(err)
				}
			case chaos.ChangeVersion:
				v, err := workflow.Version(ctx, "audit", 1)
				if err != nil {
					return stop(err)
				}
				if version = v; v >= 1 {
					if _, err := stepRun(ctx, ev, base, "audit", p.WorkMS, false); err != nil {
						return stop(err)
					}
				}
			}
		}
		summary, err := stepRun(ctx, ev, base, summaryStep, p.WorkMS, false)
		if err != nil {
			return stop(err)
		}
		if err := workflow.Sleep(ctx, time.Duration(p.SleepMS)*time.Millisecond); err != nil {
			return stop(err)
		}
		if _, err := stepRun(ctx, ev, base, "s2", p.WorkMS, false); err != nil {
			return stop(err)
		}
		end := base
		end.Event, end.Outcome, end.AtUS = "end", "ok", time.Now().UnixMicro()
		ev.write(end)
		return chaos.DeployResult{N: p.N, Code: code, Version: version, Summary: summary.Run}, nil
	})
}

// codeVersion reads CHAOS_CODE: "v1" (the default) or "v2".
func codeVersion() string {
	switch c := os.Getenv("CHAOS_CODE"); c {
	case "", "v1":
		return "v1"
	case "v2":
		return "v2"
	default:
		log.Fatalf("chaosworker: CHAOS_CODE=%q: want v1 or v2", c)
		return ""
	}
}
