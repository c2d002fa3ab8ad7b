package leaseholdtest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/workflow"
)

// TestDroppedWaitFailsTheTask (issue 35, point 4): a handler that is asked
// to wait (a sleep, a condition, children, a map, a callback) and returns
// success without returning the wait's error is not recorded as succeeded
// past the wait: the task fails, its error naming the wait, and the code
// after the dropped wait runs in no later attempt.
func TestDroppedWaitFailsTheTask(t *testing.T) {
	waits := []struct {
		name string
		wait func(ctx context.Context) error
		want string
	}{
		{"sleep", func(ctx context.Context) error { return workflow.Sleep(ctx, time.Hour) }, `workflow.Sleep (step "sleep#1")`},
		{"condition", func(ctx context.Context) error {
			_, err := workflow.WaitFor(ctx, "ready", workflow.Poll{}, func(context.Context) (bool, bool, error) { return false, false, nil })
			return err
		}, `workflow.WaitFor "ready"`},
		{"children", func(ctx context.Context) error {
			_, err := workflow.All(ctx, "kids", workflow.Child{Kind: "noop"})
			return err
		}, `workflow.All "kids"`},
		{"map", func(ctx context.Context) error {
			_, err := workflow.Map(ctx, "items", 3, func(int) workflow.Child { return workflow.Child{Kind: "noop"} }, workflow.MapOptions{})
			return err
		}, `workflow.Map "items"`},
		{"callback", func(ctx context.Context) error {
			_, err := workflow.WaitForCallback[string](ctx, "approval", time.Hour, func(context.Context, string) error { return nil })
			return err
		}, `workflow.WaitForCallback "approval"`},
	}
	for _, w := range waits {
		t.Run(w.name, func(t *testing.T) {
			hs := leasehold.NewHandlers()
			c := &counter{}
			leasehold.Handle(hs, "drops", func(ctx context.Context, task *leasehold.Task[struct{}]) (string, error) {
				if err := w.wait(ctx); err == nil {
					t.Errorf("the %s did not ask to wait", w.name)
				}
				c.add("past the wait") // the error is dropped
				return "done", nil
			})
			leasehold.Handle(hs, "noop", func(context.Context, *leasehold.Task[struct{}]) (struct{}, error) { return struct{}{}, nil })
			env := leaseholdtest.New(t, hs)
			id := mustEnqueue(t, env, leasehold.Submission{Kind: "drops"})
			mustRun(t, env)
			got := mustTask(t, env, id)
			if got.Status != leasehold.StatusFailed || !strings.Contains(got.Error, w.want) || !strings.Contains(got.Error, "returned success after") {
				t.Errorf("task %s %q, want FAILED naming %s", got.Status, got.Error, w.want)
			}
			if got.Attempt != 1 || c.get("past the wait") != 1 {
				t.Errorf("attempt %d, %d runs past the wait: want one attempt, not retried", got.Attempt, c.get("past the wait"))
			}
		})
	}
}
