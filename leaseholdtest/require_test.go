package leaseholdtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/workflow"
)

// fakeT is a testing.TB whose Fatal and Error calls are recorded instead
// of ending the test: to show that an assertion fails when it should, and
// with what message. Everything else (Helper, Context, Cleanup) is the
// real test's.
type fakeT struct {
	testing.TB
	mu   sync.Mutex
	msgs []string
}

func (f *fakeT) Helper() {}

func (f *fakeT) record(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.msgs = append(f.msgs, s)
}

func (f *fakeT) Fatal(args ...any)                 { f.record(fmt.Sprint(args...)) }
func (f *fakeT) Fatalf(format string, args ...any) { f.record(fmt.Sprintf(format, args...)) }
func (f *fakeT) Error(args ...any)                 { f.record(fmt.Sprint(args...)) }
func (f *fakeT) Errorf(format string, args ...any) { f.record(fmt.Sprintf(format, args...)) }

func (f *fakeT) failed() bool { return len(f.messages()) > 0 }

func (f *fakeT) messages() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.msgs, "\n")
}

// requireFails runs check on a fakeT and fails t unless check failed it
// once with a message holding every one of want.
func requireFails(t *testing.T, name string, check func(tb testing.TB), want ...string) {
	t.Helper()
	ft := &fakeT{TB: t}
	check(ft)
	if !ft.failed() {
		t.Errorf("%s: passed, want a failure", name)
		return
	}
	msg := ft.messages()
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("%s: the failure does not say %q:\n%s", name, w, msg)
		}
	}
}

type order struct {
	ID    int    `json:"id"`
	Total int    `json:"total"`
	Note  string `json:"note,omitempty"`
}

// shopEnv enqueues an order task that spawns two "ship" children, and a
// "mail" task with options, and runs them: ship for order 2 fails.
func shopEnv(t *testing.T) *leaseholdtest.Env {
	t.Helper()
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "order", func(ctx context.Context, task *leasehold.Task[[]order]) (int, error) {
		kids := make([]workflow.Child, len(task.Payload))
		for i, o := range task.Payload {
			kids[i] = workflow.Child{Kind: "ship", Payload: o}
		}
		if _, err := workflow.All(ctx, "ship", kids...); err != nil {
			return 0, err
		}
		return len(task.Payload), nil
	})
	leasehold.Handle(hs, "ship", func(_ context.Context, task *leasehold.Task[order]) (string, error) {
		if task.Payload.ID == 2 {
			return "", leasehold.Fail(errors.New("no stock"))
		}
		return "shipped", nil
	})
	leasehold.Handle(hs, "mail", func(context.Context, *leasehold.Task[string]) (bool, error) { return true, nil })
	env := leaseholdtest.New(t, hs)
	mustEnqueue(t, env, leasehold.Submission{
		Kind:    "order",
		Payload: []order{{ID: 1, Total: 50}, {ID: 2, Total: 150}},
		ID:      "o",
	})
	mustEnqueue(t, env, leasehold.Submission{
		Kind:        "mail",
		Payload:     "hello",
		ID:          "m",
		Queue:       "mail",
		MaxAttempts: 3,
		Delay:       time.Hour,
	})
	mustRun(t, env)
	return env
}

// RequireEnqueued finds a task however it was made (a child a workflow
// spawned, here) by kind and payload, compared as JSON or by a Match, and
// checks the Submission fields given.
func TestRequireEnqueuedFinds(t *testing.T) {
	t.Parallel()
	env := shopEnv(t)

	kid := leaseholdtest.RequireEnqueued(t, env, leasehold.Submission{Kind: "ship", Payload: order{ID: 1, Total: 50}})
	if kid.Parent != "o" || kid.Status != leasehold.StatusSucceeded {
		t.Errorf("child %s: parent %q, %s; want o's child, SUCCEEDED", kid.ID, kid.Parent, kid.Status)
	}
	// The same payload as raw JSON, in another key order and spacing.
	if got := leaseholdtest.RequireEnqueued(t, env, leasehold.Submission{Kind: "ship", Payload: json.RawMessage(`{ "total": 50, "id": 1 }`)}); got.ID != kid.ID {
		t.Errorf("raw JSON found %s, want %s", got.ID, kid.ID)
	}
	big := leaseholdtest.RequireEnqueued(t, env, leasehold.Submission{
		Kind:    "ship",
		Payload: leaseholdtest.Payload(func(o order) bool { return o.Total > 100 }),
	})
	leaseholdtest.RequireState(t, env, big.ID, leasehold.StatusFailed)
	leaseholdtest.RequireEnqueued(t, env, leasehold.Submission{Kind: "order", ID: "o"})
	leaseholdtest.RequireEnqueued(t, env, leasehold.Submission{
		Kind:        "mail",
		Payload:     "hello",
		Queue:       "mail",
		MaxAttempts: 3,
		Delay:       time.Hour,
	})
	leaseholdtest.RequireEnqueued(t, env, leasehold.Submission{Kind: "mail", RunAt: time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC)})

	// A task enqueued through the Env's Client counts too.
	if _, err := env.Client().Enqueue(t.Context(), leasehold.Submission{Kind: "mail", Payload: "from the client", ID: "c"}); err != nil {
		t.Fatal(err)
	}
	leaseholdtest.RequireEnqueued(t, env, leasehold.Submission{Kind: "mail", Payload: "from the client", ID: "c"})
}

// RequireEnqueued fails, with a -want +got line per difference of each
// task of the kind, when no task matches, when several do, and when the
// kind was never enqueued.
func TestRequireEnqueuedFails(t *testing.T) {
	t.Parallel()
	env := shopEnv(t)
	requireFails(t, "another payload", func(tb testing.TB) {
		leaseholdtest.RequireEnqueued(tb, env, leasehold.Submission{Kind: "ship", Payload: order{ID: 1, Total: 51}})
	}, `no task of kind "ship" enqueued with payload {"id":1,"total":51}`, `-{"id":1,"total":51}`, `+{"id":1,"total":50}`, `+{"id":2,"total":150}`, `tasks of other kinds: "mail" ×1, "order" ×1`)
	requireFails(t, "two match", func(tb testing.TB) {
		leaseholdtest.RequireEnqueued(tb, env, leasehold.Submission{Kind: "ship"})
	}, `2 tasks of kind "ship" match, want exactly one`)
	requireFails(t, "no such kind", func(tb testing.TB) {
		leaseholdtest.RequireEnqueued(tb, env, leasehold.Submission{Kind: "refund"})
	}, `no task of kind "refund" was enqueued at all`)
	requireFails(t, "options differ", func(tb testing.TB) {
		leaseholdtest.RequireEnqueued(tb, env, leasehold.Submission{
			Kind:        "mail",
			Payload:     "hello",
			Queue:       "post",
			MaxAttempts: 5,
			Delay:       time.Minute,
		})
	}, "max attempts: -5 +3", "queue: -post +mail", "delay: -1m0s +1h0m0s")
	requireFails(t, "a refusing Match", func(tb testing.TB) {
		leaseholdtest.RequireEnqueued(tb, env, leasehold.Submission{
			Kind:    "ship",
			Payload: leaseholdtest.Payload(func(o order) bool { return o.Total > 1000 }),
		})
	}, "is refused by the predicate")
	requireFails(t, "a payload of another type", func(tb testing.TB) {
		leaseholdtest.RequireEnqueued(tb, env, leasehold.Submission{
			Kind:    "mail",
			Payload: leaseholdtest.Payload(func(o order) bool { return true }),
		})
	}, "does not decode into leaseholdtest_test.order")
	requireFails(t, "an id", func(tb testing.TB) {
		leaseholdtest.RequireEnqueued(tb, env, leasehold.Submission{Kind: "order", ID: "p"})
	}, "id: -p +o")
	requireFails(t, "a payload that does not encode", func(tb testing.TB) {
		leaseholdtest.RequireEnqueued(tb, env, leasehold.Submission{Kind: "order", Payload: func() {}})
	}, "does not encode as JSON")
}

// RequireState passes for the task's status and fails for another, saying
// what the task is instead.
func TestRequireState(t *testing.T) {
	t.Parallel()
	env := shopEnv(t)
	big := leaseholdtest.RequireEnqueued(t, env, leasehold.Submission{Kind: "ship", Payload: order{ID: 2, Total: 150}})
	if got := leaseholdtest.RequireState(t, env, big.ID, leasehold.StatusFailed); got.Error == "" {
		t.Errorf("the failed child has no error")
	}
	requireFails(t, "another status", func(tb testing.TB) {
		leaseholdtest.RequireState(tb, env, big.ID, leasehold.StatusSucceeded)
	}, "is not SUCCEEDED", "-status SUCCEEDED", "+status FAILED", `no stock`, "history: attempt 1 FAILED")
	requireFails(t, "no such task", func(tb testing.TB) {
		leaseholdtest.RequireState(tb, env, "nope", leasehold.StatusSucceeded)
	}, "task nope", "not found")
}
