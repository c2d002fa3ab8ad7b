package leaseholdtest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/workflow"
)

// workflow.Map inside a child context or a branch, and workflow.Receive
// inside a branch, fail the task with an error that says why and what to
// do instead (docs/workflows.md, "Inside branches and child contexts").
func TestMapAndReceiveInsideSpacesRefusedSayingWhy(t *testing.T) {
	t.Parallel()
	hs := leasehold.NewHandlers()
	mapIn := func(ctx context.Context) (int, error) {
		res, err := workflow.Map(ctx, "m", 2, func(i int) workflow.Child { return workflow.Child{Kind: "one", Payload: i} }, workflow.MapOptions{})
		return res.Succeeded, err
	}
	leasehold.Handle(hs, "map-in-context", func(ctx context.Context, _ *leasehold.Task[int]) (int, error) {
		return workflow.RunInChildContext(ctx, "inner", mapIn)
	})
	leasehold.Handle(hs, "map-in-branch", func(ctx context.Context, _ *leasehold.Task[int]) (int, error) {
		return workflow.Go(ctx, "side", mapIn).Get(ctx)
	})
	leasehold.Handle(hs, "receive-in-branch", func(ctx context.Context, _ *leasehold.Task[int]) (int, error) {
		return workflow.Go(ctx, "ear", func(ctx context.Context) (int, error) {
			n, _, err := workflow.Receive[int](ctx, "orders", 0)
			return n, err
		}).Get(ctx)
	})
	leasehold.Handle(hs, "one", func(context.Context, *leasehold.Task[int]) (int, error) { return 1, nil })
	env := leaseholdtest.New(t, hs)
	want := map[string][]string{
		"map-in-context":    {`workflow.Map inside the child context or branch "@inner": refused`, "a space's path does not fit", "workflow.All inside the space"},
		"map-in-branch":     {`workflow.Map inside the child context or branch "@side": refused`, "workflow.All inside the space"},
		"receive-in-branch": {`workflow.Receive inside the branch "@ear": refused`, "would depend on timing", "in a child context"},
	}
	ids := map[string]string{}
	for kind := range want {
		ids[kind] = mustEnqueue(t, env, leasehold.Submission{Kind: kind, MaxAttempts: 1})
	}
	mustRun(t, env)
	for kind, parts := range want {
		got := mustTask(t, env, ids[kind])
		if got.Status != leasehold.StatusFailed {
			t.Errorf("%s: %s (%s), want FAILED", kind, got.Status, got.Error)
			continue
		}
		for _, p := range parts {
			if !strings.Contains(got.Error, p) {
				t.Errorf("%s: error %q, want it to say %q", kind, got.Error, p)
			}
		}
	}
}
