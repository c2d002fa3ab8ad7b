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
	if kids, ok := workflow.Children(ctx); ok || kids != nil {
		t.Errorf("Children outside a worker = %v, %v; want nil, false", kids, ok)
	}
	if deps, ok := workflow.Dependencies(ctx); ok || deps != nil {
		t.Errorf("Dependencies outside a worker = %v, %v; want nil, false", deps, ok)
	}
	if tok, err := workflow.CallbackToken(ctx); err == nil || tok != "" {
		t.Errorf("CallbackToken outside a worker = %q, %v; want an error", tok, err)
	}
	ran := false
	_, err := workflow.Step(ctx, "s", func(context.Context) (int, error) { ran = true; return 1, nil })
	if err == nil || ran {
		t.Errorf("Step outside a worker: err %v, ran %v; want an error and no run", err, ran)
	}
}

func TestAwaitChildren(t *testing.T) {
	err := workflow.AwaitChildrenWithin(time.Hour, workflow.Child{Kind: "k", Payload: map[string]int{"n": 1}, Queue: "q"})
	var ac *durable.AwaitChildrenError
	if !errors.As(err, &ac) {
		t.Fatalf("AwaitChildrenWithin = %v, want an *AwaitChildrenError", err)
	}
	if ac.Timeout != time.Hour || len(ac.Children) != 1 || string(ac.Children[0].Payload) != `{"n":1}` || ac.Children[0].Queue != "q" {
		t.Errorf("AwaitChildrenWithin = %+v", ac)
	}
	// A payload that cannot be encoded fails the task for good: it never
	// will encode.
	err = workflow.AwaitChildren(workflow.Child{Kind: "k"}, workflow.Child{Kind: "k", Payload: math.Inf(1)})
	var perm *durable.PermanentError
	if !errors.As(err, &perm) || !strings.Contains(err.Error(), "child 1") {
		t.Errorf("AwaitChildren with an unencodable payload = %v, want a permanent failure naming child 1", err)
	}
	if got := workflow.ChildID("p", 3); got != "p/3" {
		t.Errorf("ChildID = %q", got)
	}
}

func TestAwaitCallback(t *testing.T) {
	var ac *durable.AwaitCallbackError
	if err := workflow.AwaitCallback(time.Minute); !errors.As(err, &ac) || ac.Timeout != time.Minute {
		t.Errorf("AwaitCallback = %v", err)
	}
}
