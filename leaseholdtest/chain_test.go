package leaseholdtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/workflow"
)

// appendKind appends its payload to its predecessor's result; "fail"
// fails for good.
func chainHandlers(c *counter) *leasehold.Handlers {
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "append", func(ctx context.Context, task *leasehold.Task[string]) (string, error) {
		c.add(task.ID)
		if task.Payload == "fail" {
			return "", leasehold.Fail(errors.New("asked to fail"))
		}
		prev := ""
		if deps, ok := workflow.Dependencies(ctx); ok {
			if len(deps) != 1 || deps[0].Status != leasehold.StatusSucceeded || json.Unmarshal(deps[0].Result, &prev) != nil {
				return "", leasehold.Fail(errors.New("bad predecessor"))
			}
		}
		return prev + task.Payload, nil
	})
	return hs
}

// A chain of three known at enqueue runs in order, each link reading the
// one before; the links get the ids HEAD#2, HEAD#3 unless given one, and
// none waits (no WAITING state, no watch).
func TestEnvChainRunsInOrder(t *testing.T) {
	t.Parallel()
	var c counter
	env := leaseholdtest.New(t, chainHandlers(&c))
	mustEnqueue(t, env, leasehold.Submission{
		Kind:    "append",
		Payload: "a",
		ID:      "c",
		Then:    []leasehold.Link{{Kind: "append", Payload: "b"}, {Kind: "append", Payload: "c", ID: "last"}},
	})
	mustRun(t, env)
	if got := mustTask(t, env, "last"); got.Status != leasehold.StatusSucceeded || string(got.Result) != `"abc"` || got.Attempt != 1 {
		t.Fatalf("last link: %s %s in attempt %d (error %q), want SUCCEEDED \"abc\"", got.Status, got.Result, got.Attempt, got.Error)
	}
	mid := mustTask(t, env, "c#2")
	if mid.Status != leasehold.StatusSucceeded || string(mid.Result) != `"ab"` || mid.Wait != "after" || len(mid.WaitFor) != 1 || mid.WaitFor[0] != "c" {
		t.Fatalf("second link: %s %s, wait %q for %v", mid.Status, mid.Result, mid.Wait, mid.WaitFor)
	}
	for _, id := range []string{"c", "c#2", "last"} {
		if n := c.get(id); n != 1 {
			t.Errorf("%s ran %d times, want once", id, n)
		}
	}
}

// A link that fails ends the chain: the links after it are CANCELLED with
// the reason and never run.
func TestEnvChainStopsAtAFailure(t *testing.T) {
	t.Parallel()
	var c counter
	env := leaseholdtest.New(t, chainHandlers(&c))
	mustEnqueue(t, env, leasehold.Submission{
		Kind:    "append",
		Payload: "a",
		ID:      "f",
		Then:    []leasehold.Link{{Kind: "append", Payload: "fail"}, {Kind: "append", Payload: "x"}, {Kind: "append", Payload: "y"}},
	})
	mustRun(t, env)
	if got := mustTask(t, env, "f#2"); got.Status != leasehold.StatusFailed {
		t.Fatalf("failing link: %s", got.Status)
	}
	for _, id := range []string{"f#3", "f#4"} {
		got := mustTask(t, env, id)
		if got.Status != leasehold.StatusCancelled || got.Error != "chain: f#2 ended FAILED: asked to fail" {
			t.Errorf("%s: %s %q, want CANCELLED naming f#2", id, got.Status, got.Error)
		}
		if n := c.get(id); n != 0 {
			t.Errorf("%s ran %d times after its chain failed", id, n)
		}
	}
}

// Links are checked at enqueue.
func TestEnvChainBadLinks(t *testing.T) {
	t.Parallel()
	env := leaseholdtest.New(t, chainHandlers(&counter{}))
	for name, links := range map[string][]leasehold.Link{
		"no kind":     {{Payload: "x"}},
		"a repeat id": {{Kind: "append", ID: "d"}, {Kind: "append", ID: "d"}},
		"itself":      {{Kind: "append", ID: "h"}},
		"too many":    make([]leasehold.Link, 26),
	} {
		if _, err := env.Enqueue(leasehold.Submission{Kind: "append", Payload: "a", ID: "h", Then: links}); !errors.Is(err, leasehold.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}
