package leaseholdtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/workflow"
)

type blob struct {
	Data string `json:"data"`
}

// TestLargePayloadAndResultThroughTheBucket: a 300 KB payload (over the
// 128 KiB inline limit) and a 200 KB result (over 64 KiB) go through the
// Env's payload bucket as through a deployed one, the task's item keeping
// references; small ones make no call to it.
func TestLargePayloadAndResultThroughTheBucket(t *testing.T) {
	t.Parallel()
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "echo", func(ctx context.Context, task *leasehold.Task[blob]) (blob, error) {
		if strings.HasPrefix(task.Payload.Data, "big") && len(task.Payload.Data) != 300<<10 {
			return blob{}, errors.New("payload not read back whole")
		}
		if strings.HasPrefix(task.Payload.Data, "big") {
			return blob{Data: strings.Repeat("r", 200<<10)}, nil
		}
		return task.Payload, nil
	})
	env := leaseholdtest.New(t, hs)

	small := mustEnqueue(t, env, leasehold.Submission{Kind: "echo", Payload: blob{Data: strings.Repeat("s", 60<<10)}})
	mustRun(t, env)
	if got := mustTask(t, env, small); got.Status != leasehold.StatusSucceeded {
		t.Fatalf("small task %s: %s", got.Status, got.Error)
	}
	if n := env.BlobCalls(); n != 0 {
		t.Fatalf("%d calls to the payload bucket for a 60 KB payload and result, want 0", n)
	}

	big := mustEnqueue(t, env, leasehold.Submission{Kind: "echo", Payload: blob{Data: "big" + strings.Repeat("b", 300<<10-3)}})
	mustRun(t, env)
	got := mustTask(t, env, big)
	if got.Status != leasehold.StatusSucceeded {
		t.Fatalf("300 KB payload: %s (%s), want SUCCEEDED", got.Status, got.Error)
	}
	if len(got.Payload) < 300<<10 || len(got.Result) < 200<<10 {
		t.Fatalf("read back a %d-byte payload and a %d-byte result", len(got.Payload), len(got.Result))
	}
	payload, result, err := env.StoredPayload(big)
	if err != nil {
		t.Fatal(err)
	}
	if len(payload) > 1024 || len(result) > 1024 || !bytes.Contains(payload, []byte("leasehold-blob")) || !bytes.Contains(result, []byte("leasehold-blob")) {
		t.Fatalf("the item holds a %d-byte payload and a %d-byte result, want references", len(payload), len(result))
	}
	info, err := env.Client().Get(context.Background(), big)
	if err != nil || len(info.Payload) < 300<<10 || len(info.Result) < 200<<10 {
		t.Fatalf("Client.Get: %d-byte payload, %d-byte result, %v; want them read through the bucket", len(info.Payload), len(info.Result), err)
	}
	r, err := leasehold.Result[blob](context.Background(), env.Client(), big)
	if err != nil || len(r.Data) != 200<<10 {
		t.Fatalf("leasehold.Result: %d bytes, %v", len(r.Data), err)
	}
	if _, err := env.Enqueue(leasehold.Submission{Kind: "echo", Payload: blob{Data: strings.Repeat("x", 11<<20)}}); !errors.Is(err, leasehold.ErrTooLarge) {
		t.Fatalf("an 11 MB payload: %v, want ErrTooLarge", err)
	}
}

// TestLargeStepResultsAndAnswerThroughTheBucket: two steps of 100 KB each
// (together over the 64 KiB that a task's steps share) and a 200 KB answer
// to a resumable callback (over its 16 KiB) are kept in the payload
// bucket, the steps recording references; every later run replays them
// whole without running the steps again. Small steps make no call.
func TestLargeStepResultsAndAnswerThroughTheBucket(t *testing.T) {
	t.Parallel()
	ran := map[string]int{}
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "flow", func(ctx context.Context, task *leasehold.Task[int]) (string, error) {
		var sizes []int
		for _, name := range []string{"a", "b", "small"} {
			v, err := workflow.Step(ctx, name, func(context.Context) (string, error) {
				ran[name]++
				if name == "small" {
					return "s", nil
				}
				return strings.Repeat(name, 100<<10), nil
			})
			if err != nil {
				return "", err
			}
			sizes = append(sizes, len(v))
		}
		answer, err := workflow.WaitForCallback[string](ctx, "approve", time.Hour, func(context.Context, string) error { return nil })
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%v %d", sizes, len(answer)), nil
	})
	env := leaseholdtest.New(t, hs)
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "flow", Payload: 1})
	mustRun(t, env)
	tok, err := env.CallbackToken(id)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.CompleteCallback(tok, strings.Repeat("y", 200<<10)); err != nil {
		t.Fatalf("a 200 KB answer to a resumable callback: %v", err)
	}
	mustRun(t, env)
	got := mustTask(t, env, id)
	if want := `"[102400 102400 1] 204800"`; got.Status != leasehold.StatusSucceeded || string(got.Result) != want {
		t.Fatalf("task: %s %s (%s), want SUCCEEDED with %s", got.Status, got.Result, got.Error, want)
	}
	if ran["a"] != 1 || ran["b"] != 1 || ran["small"] != 1 {
		t.Fatalf("step functions ran %v, want each once (replayed after the callback)", ran)
	}
	stored, err := env.StoredSteps(id)
	if err != nil {
		t.Fatal(err)
	}
	refs := 0
	for _, r := range stored {
		if len(r) > 1024 {
			t.Fatalf("the item keeps a %d-byte step result, want a reference", len(r))
		}
		if bytes.Contains(r, []byte("leasehold-blob")) {
			refs++
		}
	}
	if refs != 3 { // a, b and the answer; not "small"
		t.Fatalf("%d of the %d recorded steps are references, want 3 (two steps and the answer)", refs, len(stored))
	}
	if steps := got.Steps; len(steps) < 2 || len(steps[0].Result) < 100<<10 {
		t.Fatalf("Env.Task's steps are not read back through the bucket: %d", len(steps))
	}
}

// TestLargeChildAndLinkPayloadsThroughTheBucket: a child of workflow.All
// with a 200 KB payload (over the 128 KiB inline limit) and a chain whose
// two links carry 50 KB each (over the 64 KiB a chain's links share) run,
// their payloads kept in the payload bucket and read back whole.
func TestLargeChildAndLinkPayloadsThroughTheBucket(t *testing.T) {
	t.Parallel()
	seen := map[string]int{}
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "size", func(ctx context.Context, task *leasehold.Task[blob]) (int, error) {
		seen[task.ID] = len(task.Payload.Data)
		return len(task.Payload.Data), nil
	})
	leasehold.Handle(hs, "parent", func(ctx context.Context, task *leasehold.Task[int]) (int, error) {
		out, err := workflow.All(ctx, "kids", workflow.Child{Kind: "size", Payload: blob{Data: strings.Repeat("c", 200<<10)}})
		if err != nil {
			return 0, err
		}
		if out[0].Status != leasehold.StatusSucceeded {
			return 0, leasehold.Fail(fmt.Errorf("child %s: %s", out[0].Status, out[0].Error))
		}
		return 1, nil
	})
	env := leaseholdtest.New(t, hs)
	parent := mustEnqueue(t, env, leasehold.Submission{Kind: "parent", Payload: 1})
	chain := mustEnqueue(t, env, leasehold.Submission{Kind: "size", Payload: blob{Data: "first"}, Then: []leasehold.Link{
		{Kind: "size", Payload: blob{Data: strings.Repeat("l", 50<<10)}},
		{Kind: "size", Payload: blob{Data: strings.Repeat("m", 50<<10)}},
	}})
	mustRun(t, env)
	if got := mustTask(t, env, parent); got.Status != leasehold.StatusSucceeded {
		t.Fatalf("parent: %s (%s)", got.Status, got.Error)
	}
	sizes := []int{}
	for id, n := range seen {
		if id != chain {
			sizes = append(sizes, n)
		}
	}
	slices.Sort(sizes)
	if want := []int{50 << 10, 50 << 10, 200 << 10}; !slices.Equal(sizes, want) {
		t.Fatalf("the child and the links read payloads of %v bytes, want %v", sizes, want)
	}
}

// TestLargeChildResultsFanIn: two children of workflow.All return 100 KB
// each (over the 64 KiB inline limit of a result): the parent's recorded
// outcomes keep references, and the handler reads both results whole.
func TestLargeChildResultsFanIn(t *testing.T) {
	t.Parallel()
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "big", func(ctx context.Context, task *leasehold.Task[int]) (string, error) {
		return strings.Repeat("r", 100<<10), nil
	})
	leasehold.Handle(hs, "parent", func(ctx context.Context, task *leasehold.Task[int]) (int, error) {
		out, err := workflow.All(ctx, "kids", workflow.Child{Kind: "big", Payload: 1}, workflow.Child{Kind: "big", Payload: 2})
		if err != nil {
			return 0, err
		}
		n := 0
		for _, o := range out {
			var s string
			if err := json.Unmarshal(o.Result, &s); err != nil {
				return 0, leasehold.Fail(fmt.Errorf("child %s's result: %w", o.ID, err))
			}
			n += len(s)
		}
		return n, nil
	})
	env := leaseholdtest.New(t, hs)
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "parent", Payload: 1})
	mustRun(t, env)
	if got := mustTask(t, env, id); got.Status != leasehold.StatusSucceeded || string(got.Result) != "204800" {
		t.Fatalf("parent: %s %s (%s), want SUCCEEDED with 204800", got.Status, got.Result, got.Error)
	}
}
