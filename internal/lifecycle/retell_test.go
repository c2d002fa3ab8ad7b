package lifecycle_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/jonboulle/clockwork"

	"github.com/leasehold/leasehold/internal/durable"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lifecycle"
	"github.com/leasehold/leasehold/internal/token"
)

// Every path that acknowledges a token of an ended task tells the task's
// waiters again first (docs/workflows.md): whoever ended it may have
// stopped between its end's write and its notification, and the message at
// hand may be the task's last token.

// frozenChild sets up the interleaving an outside chaos run found: parent p
// waits for children p/0 and p/1; p/1 has ended; p/0's first holder (the
// returned executor, whose clock never moves: a frozen process that renews
// nothing) runs its handler until thaw is closed. It returns once that
// handler runs, with the function that waits for the frozen holder's
// Process.
func frozenChild(t *testing.T, e *env) (thaw chan struct{}, wait func() lifecycle.Result) {
	t.Helper()
	thaw, running := make(chan struct{}), make(chan struct{}, 1)
	e.handlers["parent"] = func(ctx context.Context, task lease.Task) ([]byte, error) {
		if r, ok := durable.WaitResultsOf(ctx); ok {
			return []byte(fmt.Sprintf(`"%d children"`, len(r.Tasks))), nil
		}
		return nil, &durable.AwaitChildrenError{Children: []durable.Child{{Kind: "frozen"}, {Kind: "child", Payload: []byte(`2`)}}}
	}
	e.handlers["child"] = func(_ context.Context, task lease.Task) ([]byte, error) { return task.Payload, nil }
	e.handlers["frozen"] = func(ctx context.Context, task lease.Task) ([]byte, error) {
		if task.Fence == 1 {
			running <- struct{}{}
			<-thaw
		}
		return []byte(`"frozen"`), nil
	}
	if res := e.exec.Process(t.Context(), nil, msg("p", inline(t, "parent", "p", "", 0))); res.Outcome != lifecycle.OutcomeSuspended {
		t.Fatalf("parent: %+v, want suspended", res)
	}
	kids := e.sqs.sentTo(workURL)
	e.exec.Process(t.Context(), nil, msg("k1", aws.ToString(kids[1].MessageBody)))
	if got := e.get(t, "p"); !slices.Equal(got.Ended, []string{"p/1"}) {
		t.Fatalf("parent heard of %v, want p/1", got.Ended)
	}
	frozen := e.another(t, func(c *lifecycle.Config) {
		c.Owner, c.Clock = "frozen", clockwork.NewFakeClockAt(epoch)
	})
	done := make(chan lifecycle.Result, 1)
	go func() { done <- frozen.Process(t.Context(), nil, msg("k0", aws.ToString(kids[0].MessageBody))) }()
	<-running
	// The lease (20 s) and the skew (2 s) run out on the store's clock.
	e.clock.Advance(25 * time.Second)
	return thaw, func() lifecycle.Result { return <-done }
}

// The chaos run's interleaving: the frozen holder's lease is taken over, the
// child finished under fence 2 by a worker killed right after its finish
// write (no notify, no delete). The frozen holder wakes, its finish fails
// with the lease lost, and it acknowledges the child's message: it must tell
// the parent first, or nothing ever will.
func TestStaleFinishOfAnEndedChildTellsTheParent(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	thaw, wait := frozenChild(t, e)
	taken, err := e.store.Claim(t.Context(), "p/0", "killed")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Finish(t.Context(), taken.LeaseOf(), []byte(`"taken over"`)); err != nil {
		t.Fatal(err)
	}
	close(thaw)
	res := wait()
	if !res.Ack || res.Outcome != lifecycle.OutcomeLeaseLost {
		t.Fatalf("stale holder: %+v, want its message acknowledged after a lost lease", res)
	}
	if got := e.get(t, "p"); !slices.Contains(got.Ended, "p/0") {
		t.Fatalf("the stale holder acknowledged the child's last token without telling the parent: parent %s, heard of %v", got.Status, got.Ended)
	}
	e.drainSent(t, 2)
	if got := e.get(t, "p"); got.Status != lease.StatusSucceeded {
		t.Fatalf("parent %s, want SUCCEEDED once woken", got.Status)
	}
}

// failingNotify fails every Notify while on, as a store that does not
// answer in time would.
type failingNotify struct {
	lease.Store
	mu sync.Mutex
	on bool
}

func (f *failingNotify) Notify(ctx context.Context, w lease.Waiter, ended lease.Task) (lease.Task, error) {
	f.mu.Lock()
	on := f.on
	f.mu.Unlock()
	if on {
		return lease.Task{}, fmt.Errorf("notify: %w: timed out", lease.ErrBackend)
	}
	return f.Store.Notify(ctx, w, ended)
}

func (f *failingNotify) set(on bool) {
	f.mu.Lock()
	f.on = on
	f.mu.Unlock()
}

// The same interleaving with no kill, as on a loaded machine: the holder
// that took the lease over finishes the child but cannot tell the parent,
// so it keeps its delivery of the token for a retry; the stale holder's
// delete of its own delivery deletes that one too on a queue that honours
// an old receipt handle (the emulators do). The stale holder must tell the
// parent before it acknowledges.
func TestStaleFinishTellsTheParentWhenTheNewHolderCouldNot(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	thaw, wait := frozenChild(t, e)
	flaky := &failingNotify{Store: e.store}
	taker := e.another(t, func(c *lifecycle.Config) { c.Owner, c.Store = "taker", flaky })
	flaky.set(true)
	kid := aws.ToString(e.sqs.sentTo(workURL)[0].MessageBody)
	if res := taker.Process(t.Context(), nil, msg("k0-again", kid)); res.Ack || res.Outcome != lifecycle.OutcomeSucceeded {
		t.Fatalf("taker: %+v, want the child succeeded and its token kept to tell the parent", res)
	}
	flaky.set(false)
	close(thaw)
	if res := wait(); !res.Ack {
		t.Fatalf("stale holder: %+v, want acknowledged", res)
	}
	if got := e.get(t, "p"); !slices.Contains(got.Ended, "p/0") {
		t.Fatalf("parent %s heard of %v: nobody told it of p/0", got.Status, got.Ended)
	}
}

// endsFirst ends a task behind the worker's back just before the worker's
// op call, once: the worker's write then finds it ended, as when another
// worker ended it a moment earlier and stopped before telling its waiters.
type endsFirst struct {
	lease.Store
	op  string
	end func(context.Context) error
	mu  sync.Mutex
}

func (s *endsFirst) before(ctx context.Context, op string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.op != op || s.end == nil {
		return nil
	}
	end := s.end
	s.end = nil
	return end(ctx)
}

func (s *endsFirst) Resume(ctx context.Context, id string, fence int64, owner string) (lease.Task, error) {
	if err := s.before(ctx, "resume"); err != nil {
		return lease.Task{}, err
	}
	return s.Store.Resume(ctx, id, fence, owner)
}

func (s *endsFirst) EndWait(ctx context.Context, e lease.WaitEnd) (lease.Task, error) {
	if err := s.before(ctx, "endwait"); err != nil {
		return lease.Task{}, err
	}
	return s.Store.EndWait(ctx, e)
}

func (s *endsFirst) EndWaiting(ctx context.Context, prev lease.Task, status lease.Status, reason string) (lease.Task, error) {
	if err := s.before(ctx, "endwaiting"); err != nil {
		return lease.Task{}, err
	}
	return s.Store.EndWaiting(ctx, prev, status, reason)
}

// watched creates a dependent "dep" of task id (after any), registered on
// it.
func watched(t *testing.T, e *env, id string) {
	t.Helper()
	if _, err := e.store.Create(t.Context(), lease.NewTask{ID: "dep", Kind: "child", MaxAttempts: 1, After: []string{id}, AfterAny: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Watch(t.Context(), id, lease.Waiter{ID: "dep", Mode: lease.WaitAfterAny}); err != nil {
		t.Fatal(err)
	}
}

// waitingFor claims stored task id and suspends it as w says.
func waitingFor(t *testing.T, e *env, id string, w lease.Wait) lease.Task {
	t.Helper()
	held, err := e.store.Claim(t.Context(), id, "someone")
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.store.Suspend(t.Context(), held.LeaseOf(), w)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// The paths other than a lost lease by which a worker's write finds the
// task of its token ended: each must tell the task's waiters before the
// message is acknowledged.
func TestEveryWriteThatFindsTheTaskEndedTellsItsWaiters(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// arrange stores task "w" (its dependent registered) and returns
		// the message to deliver, the operation the task is ended before,
		// and how it is ended.
		arrange func(t *testing.T, e *env) (body, op string, end func(context.Context) error)
	}{{
		// A wake token: the children have ended; the task is cancelled
		// between the worker's read and its resume.
		name: "resume",
		arrange: func(t *testing.T, e *env) (string, string, func(context.Context) error) {
			waitingFor(t, e, "w", lease.Wait{Mode: lease.WaitChildren, For: []string{"w/0"}})
			if _, err := e.store.Notify(t.Context(), lease.Waiter{ID: "w", Mode: lease.WaitChildren}, lease.Task{ID: "w/0", Status: lease.StatusSucceeded}); err != nil {
				t.Fatal(err)
			}
			return token.Wake("w"), "resume", func(ctx context.Context) error {
				seen, err := e.store.Get(ctx, "w")
				if err == nil {
					_, err = e.store.EndWaiting(ctx, seen, lease.StatusCancelled, "cancelled on request")
				}
				return err
			}
		},
	}, {
		// The callback's timeout token: the callback landed between the
		// worker's read and its write, and its worker stopped.
		name: "callback timeout",
		arrange: func(t *testing.T, e *env) (string, string, func(context.Context) error) {
			waiting := waitingFor(t, e, "w", lease.Wait{Mode: lease.WaitCallback, Until: e.clock.Now().Add(time.Minute), Nonce: "n0nce-n0nce-n0nce-n0nce"})
			e.clock.Advance(2 * time.Minute)
			return token.Ref("w"), "endwait", func(ctx context.Context) error {
				_, err := e.store.EndWait(ctx, lease.WaitEnd{ID: "w", Fence: waiting.Fence, Attempt: waiting.Attempt, Nonce: "n0nce-n0nce-n0nce-n0nce", Status: lease.StatusSucceeded, Result: []byte(`1`)})
				return err
			}
		},
	}, {
		// The callback's own message, delivered again after its first
		// delivery's worker ended the task and stopped.
		name: "callback redelivered",
		arrange: func(t *testing.T, e *env) (string, string, func(context.Context) error) {
			waiting := waitingFor(t, e, "w", lease.Wait{Mode: lease.WaitCallback, Until: e.clock.Now().Add(time.Hour), Nonce: "n0nce-n0nce-n0nce-n0nce"})
			cb := token.Callback{ID: "w", Fence: waiting.Fence, Attempt: waiting.Attempt, Nonce: "n0nce-n0nce-n0nce-n0nce"}.String()
			body, err := token.CallbackMessage(cb, []byte(`1`), false, "")
			if err != nil {
				t.Fatal(err)
			}
			return body, "endwait", func(ctx context.Context) error {
				_, err := e.store.EndWait(ctx, lease.WaitEnd{ID: "w", Fence: waiting.Fence, Attempt: waiting.Attempt, Nonce: "n0nce-n0nce-n0nce-n0nce", Status: lease.StatusSucceeded, Result: []byte(`1`)})
				return err
			}
		},
	}, {
		// A cancel's token ends a flagged waiting task, which its
		// deadline's sweep ended a moment before.
		name: "end waiting",
		arrange: func(t *testing.T, e *env) (string, string, func(context.Context) error) {
			// Flagged while its attempt ran, then suspended: the token
			// that comes next ends the wait cancelled (runResuming).
			held, err := e.store.Claim(t.Context(), "w", "someone")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.store.RequestCancel(t.Context(), "w"); err != nil {
				t.Fatal(err)
			}
			if _, err := e.store.Suspend(t.Context(), held.LeaseOf(), lease.Wait{Mode: lease.WaitChildren, For: []string{"w/0"}}); err != nil {
				t.Fatal(err)
			}
			return token.Ref("w"), "endwaiting", func(ctx context.Context) error {
				seen, err := e.store.Get(ctx, "w")
				if err == nil {
					_, err = e.store.AbandonWait(ctx, lease.WaitAbandon{ID: "w", Fence: seen.Fence, Status: lease.StatusFailed, Error: "the wait's deadline passed"})
				}
				return err
			}
		},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var store *endsFirst
			e := setup(t, func(cfg *lifecycle.Config) {
				store = &endsFirst{Store: cfg.Store}
				cfg.Store = store
			})
			e.handlers["child"] = func(context.Context, lease.Task) ([]byte, error) { return []byte(`"dep ran"`), nil }
			if _, err := e.store.Create(t.Context(), lease.NewTask{ID: "w", Kind: "child", MaxAttempts: 3}); err != nil {
				t.Fatal(err)
			}
			watched(t, e, "w")
			body, op, end := c.arrange(t, e)
			store.mu.Lock()
			store.op, store.end = op, end
			store.mu.Unlock()
			res := e.exec.Process(t.Context(), nil, msg("m", body))
			if store.end != nil {
				t.Fatalf("the worker never made the %s write the test ends the task before (result %+v)", op, res)
			}
			if got := e.get(t, "w"); !got.Status.Terminal() {
				t.Fatalf("w is %s, want ended behind the worker's back", got.Status)
			}
			if got := e.get(t, "dep"); !slices.Contains(got.Ended, "w") {
				t.Fatalf("the message (acked %t, %q) left w's dependent unaware of w's end: dep %s, heard of %v",
					res.Ack, res.Reason, got.Status, got.Ended)
			}
		})
	}
}
