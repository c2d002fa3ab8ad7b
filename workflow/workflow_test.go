package workflow_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/durable"
	"github.com/leasehold/leasehold/workflow"
)

// Outside a handler run by a worker there is nothing to read and no token
// to hand out, and each function says so rather than pretending.
func TestOutsideAWorker(t *testing.T) {
	ctx := context.Background()
	if outs, err := workflow.All(ctx, "kids", workflow.Child{Kind: "k"}); err == nil || outs != nil {
		t.Errorf("All outside a worker = %v, %v; want an error", outs, err)
	}
	if deps, ok := workflow.Dependencies(ctx); ok || deps != nil {
		t.Errorf("Dependencies outside a worker = %v, %v; want nil, false", deps, ok)
	}
	submitted := false
	_, err := workflow.WaitForCallback[string](ctx, "cb", time.Hour, func(context.Context, string) error { submitted = true; return nil })
	if err == nil || submitted {
		t.Errorf("WaitForCallback outside a worker: err %v, submitted %v; want an error and no token handed out", err, submitted)
	}
	ran := false
	_, err = workflow.Step(ctx, "s", func(context.Context) (int, error) { ran = true; return 1, nil })
	if err == nil || ran {
		t.Errorf("Step outside a worker: err %v, ran %v; want an error and no run", err, ran)
	}
}

// A child payload that cannot be encoded fails the task for good: it never
// will encode.
func TestAllUnencodablePayload(t *testing.T) {
	_, err := workflow.AllWithin(context.Background(), "kids", time.Hour, workflow.Child{Kind: "k"}, workflow.Child{Kind: "k", Payload: math.Inf(1)})
	var perm *durable.PermanentError
	if !errors.As(err, &perm) || !strings.Contains(err.Error(), "child 1") {
		t.Errorf("AllWithin with an unencodable payload = %v, want a permanent failure naming child 1", err)
	}
	if got := workflow.ChildIDIn("p", "kids", 3); got != "p/kids/3" {
		t.Errorf("ChildIDIn = %q", got)
	}
}
