package lifecycle_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/durable"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lifecycle"
)

// taken records every transition the package's executions take.
var taken struct {
	sync.Mutex
	seen       map[lifecycle.Transition]int // Event left empty
	undeclared []string
}

// transitionsChecked runs the package's tests with every execution's
// transitions recorded, then fails the run when one was not declared, or,
// when every test ran (no -run, no -short), when a declared transition was
// never taken: the tests between them drive every path of the machine.
type transitionsChecked struct{ m *testing.M }

func (c transitionsChecked) Run() int {
	taken.seen = map[lifecycle.Transition]int{}
	lifecycle.SetTransitionHook(func(from, to lifecycle.State, declared bool) {
		taken.Lock()
		defer taken.Unlock()
		taken.seen[lifecycle.Transition{From: from, To: to}]++
		if !declared {
			taken.undeclared = append(taken.undeclared, from.String()+" -> "+to.String())
		}
	})
	code := c.m.Run()
	lifecycle.SetTransitionHook(nil)
	taken.Lock()
	defer taken.Unlock()
	if len(taken.undeclared) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: executions took transitions not declared in lifecycle's transitions table: %s\n", strings.Join(taken.undeclared, ", "))
		code = max(code, 1)
	}
	if missing := untaken(); len(missing) > 0 && everyTestRan() {
		fmt.Fprintf(os.Stderr, "FAIL: no test took these declared transitions: %s\n", strings.Join(missing, ", "))
		code = max(code, 1)
	}
	return code
}

// untaken lists the declared transitions no execution took; taken is
// locked.
func untaken() []string {
	var missing []string
	for _, t := range lifecycle.Transitions() {
		if taken.seen[lifecycle.Transition{From: t.From, To: t.To}] == 0 {
			missing = append(missing, t.From.String()+" -> "+t.To.String())
		}
	}
	return missing
}

// everyTestRan reports whether the run was the whole package's: no -run,
// -skip or -short.
func everyTestRan() bool {
	for _, name := range []string{"test.run", "test.skip"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != "" {
			return false
		}
	}
	return !testing.Short()
}

// The transitions the package's other tests do not take.

// notWaitingOnce answers the first Resume with ErrNotWaiting, as when
// another token's worker resumed the task first.
type notWaitingOnce struct {
	lease.Store
	done atomic.Bool
}

func (s *notWaitingOnce) Resume(ctx context.Context, id string, fence int64, owner string) (lease.Task, error) {
	if s.done.CompareAndSwap(false, true) {
		return lease.Task{}, lease.ErrNotWaiting
	}
	return s.Store.Resume(ctx, id, fence, owner)
}

// A resume that loses to another token claims instead; a claim that finds
// the task WAITING again resumes it.
func TestResumeLostToAnotherTokenResumesAgain(t *testing.T) {
	t.Parallel()
	var wrapped *notWaitingOnce
	e := setup(t, func(c *lifecycle.Config) {
		wrapped = &notWaitingOnce{Store: c.Store}
		c.Store = wrapped
	})
	var runs int
	fanInHandlers(e, &runs)
	e.exec.Process(t.Context(), nil, msg("p", inline(t, "parent", "p", "", 0)))
	e.drainSent(t, 0)
	if got := e.get(t, "p"); got.Status != lease.StatusSucceeded || runs != 2 || !wrapped.done.Load() {
		t.Fatalf("parent %s after %d runs (resume refused: %v); want SUCCEEDED after 2", got.Status, runs, wrapped.done.Load())
	}
}

// A callback awaited without its token fails the attempt for good.
func TestAwaitCallbackWithoutTokenFails(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.handlers["cb"] = func(context.Context, lease.Task) ([]byte, error) {
		return nil, &durable.AwaitCallbackError{Timeout: time.Minute}
	}
	res := e.exec.Process(t.Context(), nil, msg("m", inline(t, "cb", "c", "", 0)))
	if got := e.get(t, "c"); !res.Ack || res.Outcome != lifecycle.OutcomeFailed || got.Status != lease.StatusFailed {
		t.Fatalf("result %+v, task %s; want acked and FAILED", res, got.Status)
	}
}

// A retry whose token cannot be sent keeps the message, whether the
// attempt ended in an unknown kind or in children whose tokens could not be
// sent.
func TestRetryWithoutItsTokenKeepsTheMessage(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.sqs.failSend = true
	e.handlers["parent"] = func(context.Context, lease.Task) ([]byte, error) {
		return nil, &durable.AwaitChildrenError{Children: []durable.Child{{Kind: "leaf"}}}
	}
	for _, kind := range []string{"parent", "nobody-knows"} {
		res := e.exec.Process(t.Context(), nil, msg("m-"+kind, inline(t, kind, kind, "", 3)))
		if got := e.get(t, kind); res.Ack || got.Status != lease.StatusPending {
			t.Fatalf("%s: result %+v, task %s; want kept and PENDING", kind, res, got.Status)
		}
	}
}
