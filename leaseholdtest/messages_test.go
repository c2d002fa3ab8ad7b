package leaseholdtest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/workflow"
)

// note is the messages' payload in these tests.
type note struct{ N int }

// collector receives want messages on "orders", each within a day, with a
// step after each (counted, so that a replay running one again shows),
// publishes its progress as the event "got", and returns the numbers in
// the order received.
func collector(c *counter, want int) func(context.Context, *leasehold.Task[struct{}]) (string, error) {
	return func(ctx context.Context, _ *leasehold.Task[struct{}]) (string, error) {
		var got []string
		for i := range want {
			o, ok, err := workflow.Receive[note](ctx, "orders", 24*time.Hour)
			if err != nil {
				return "", err
			}
			if !ok {
				return "timed out after " + strings.Join(got, ","), nil
			}
			name := fmt.Sprintf("handle-%d", i)
			if _, err := workflow.Step(ctx, name, func(context.Context) (int, error) { c.add(name); return o.N, nil }); err != nil {
				return "", err
			}
			got = append(got, fmt.Sprint(o.N))
			if err := workflow.SetEvent(ctx, "got", len(got)); err != nil {
				return "", err
			}
		}
		return strings.Join(got, ","), nil
	}
}

// TestReceiveInOrderOnce (issue 37, point 6): three messages on one topic
// are received in send order, each once, across suspensions: the first
// comes while the workflow waits (it is woken), the next two are queued
// before it runs again; a duplicate send (same message id) is delivered
// once; the steps after each receive run once; the event reports the
// progress between runs.
func TestReceiveInOrderOnce(t *testing.T) {
	hs := leasehold.NewHandlers()
	c := &counter{}
	leasehold.Handle(hs, "collect", collector(c, 3))
	env := leaseholdtest.New(t, hs)
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "collect"})
	mustRun(t, env)
	if got := mustTask(t, env, id); got.Status != leasehold.StatusPending {
		t.Fatalf("before any message the workflow is %s (%s), want PENDING, waiting", got.Status, got.Error)
	}
	if _, err := env.GetEvent(id, "got"); !errors.Is(err, leasehold.ErrNotFound) {
		t.Fatalf("GetEvent before any message = %v, want ErrNotFound", err)
	}
	send := func(msgID string, n int, wantSeq int64) {
		t.Helper()
		seq, err := env.Send(id, "orders", msgID, note{N: n})
		if err != nil || seq != wantSeq {
			t.Fatalf("Send(%s) = %d, %v; want seq %d", msgID, seq, err, wantSeq)
		}
	}
	send("a", 10, 1)
	send("a", 10, 1) // a retried send: placed once
	mustRun(t, env)
	if v, err := env.GetEvent(id, "got"); err != nil || string(v) != "1" {
		t.Fatalf("GetEvent after the first message = %s, %v; want 1", v, err)
	}
	send("b", 20, 2)
	send("c", 30, 3)
	send("b", 20, 2)
	mustRun(t, env)
	got := mustTask(t, env, id)
	if got.Status != leasehold.StatusSucceeded || string(got.Result) != `"10,20,30"` {
		t.Fatalf("the workflow: %s %s (%s), want SUCCEEDED 10,20,30", got.Status, got.Result, got.Error)
	}
	for i := range 3 {
		if n := c.get(fmt.Sprintf("handle-%d", i)); n != 1 {
			t.Errorf("handle-%d ran %d times, want once", i, n)
		}
	}
	if v, err := env.GetEvent(id, "got"); err != nil || string(v) != "3" {
		t.Fatalf("GetEvent at the end = %s, %v; want 3", v, err)
	}
	if _, err := env.Send(id, "orders", "d", note{N: 40}); !errors.Is(err, leasehold.ErrFinished) {
		t.Fatalf("Send to the ended workflow = %v, want ErrFinished", err)
	}
	if _, err := env.Send("nobody", "orders", "e", note{N: 1}); !errors.Is(err, leasehold.ErrNotFound) {
		t.Fatalf("Send to no workflow = %v, want ErrNotFound", err)
	}
	// A replay receives the same messages: the recorded history runs
	// through the same code without diverging.
	h, err := env.History(id)
	if err != nil || !strings.Contains(string(h), "recv:orders#3") {
		t.Fatalf("History = %s, %v; want the receives recorded", h, err)
	}
	line, err := hs.Replay(t.Context(), h)
	if err != nil || c.get("handle-0") != 1 {
		t.Fatalf("the replay: %s, %v (handle-0 ran %d times); want the same messages, nothing run again", line, err, c.get("handle-0"))
	}
	t.Log(line)
}

// A receive with no message within its timeout returns ok false, and the
// message sent after it goes to the next receive on the topic.
func TestReceiveTimeout(t *testing.T) {
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "late", func(ctx context.Context, _ *leasehold.Task[struct{}]) (string, error) {
		_, ok, err := workflow.Receive[note](ctx, "orders", time.Hour)
		if err != nil || ok {
			return "", err
		}
		o, ok, err := workflow.Receive[note](ctx, "orders", 24*time.Hour)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("timed out, then %d (%v)", o.N, ok), nil
	})
	env := leaseholdtest.New(t, hs)
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "late"})
	mustRun(t, env)
	env.Clock().Advance(2 * time.Hour)
	mustRun(t, env)
	if got := mustTask(t, env, id); got.Status != leasehold.StatusPending || !strings.Contains(got.Error, "recv:orders#2") {
		t.Fatalf("after the first timeout the workflow is %s (%s), want PENDING in its second receive", got.Status, got.Error)
	}
	if _, err := env.Send(id, "orders", "x", note{N: 7}); err != nil {
		t.Fatal(err)
	}
	mustRun(t, env)
	if got := mustTask(t, env, id); got.Status != leasehold.StatusSucceeded || string(got.Result) != `"timed out, then 7 (true)"` {
		t.Fatalf("the workflow: %s %s (%s), want SUCCEEDED with message 7 after the timeout", got.Status, got.Result, got.Error)
	}
}

// Over-size messages and bad topics are refused at the sender, sending
// nothing.
func TestSendRefusals(t *testing.T) {
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "collect", collector(&counter{}, 1))
	env := leaseholdtest.New(t, hs)
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "collect"})
	mustRun(t, env)
	if _, err := env.Send(id, "orders", "big", strings.Repeat("x", 40<<10)); !errors.Is(err, leasehold.ErrTooLarge) {
		t.Fatalf("Send of 40 KiB = %v, want ErrTooLarge", err)
	}
	if _, err := env.Send(id, "no spaces", "x", 1); !errors.Is(err, leasehold.ErrInvalid) {
		t.Fatalf("Send on a bad topic = %v, want ErrInvalid", err)
	}
}

// Client.GetEvent blocks until the workflow sets the event.
func TestClientGetEventWaits(t *testing.T) {
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "collect", collector(&counter{}, 2))
	env := leaseholdtest.New(t, hs)
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "collect"})
	mustRun(t, env)
	type answer struct {
		v   string
		err error
	}
	done := make(chan answer, 1)
	go func() {
		v, err := env.Client().GetEvent(t.Context(), id, "got", time.Minute)
		done <- answer{string(v), err}
	}()
	env.Clock().BlockUntilContext(t.Context(), 1) // GetEvent waits on the clock
	select {
	case a := <-done:
		t.Fatalf("GetEvent returned %q, %v before the event was set", a.v, a.err)
	default:
	}
	if _, err := env.Send(id, "orders", "a", note{N: 1}); err != nil {
		t.Fatal(err)
	}
	mustRun(t, env)
	// Run advanced no time: GetEvent still waits on the clock.
	env.Clock().BlockUntilContext(t.Context(), 1)
	env.Clock().Advance(2 * time.Second)
	if a := <-done; a.err != nil || a.v != "1" {
		t.Fatalf("GetEvent = %q, %v; want 1", a.v, a.err)
	}
}

// A send that races the receiver's suspension (it lands while the task is
// still RUNNING, after its receive wrote the wait) still wakes it: the
// wake finds the task running, and the message form of the same message,
// delayed, wakes it once it sleeps.
func TestSendRacingTheSuspensionWakes(t *testing.T) {
	hs := leasehold.NewHandlers()
	var env *leaseholdtest.Env
	sent := false
	leasehold.Handle(hs, "racer", func(ctx context.Context, task *leasehold.Task[struct{}]) (string, error) {
		o, _, err := workflow.Receive[note](ctx, "orders", 24*time.Hour)
		if err != nil {
			if !sent {
				sent = true
				if _, serr := env.Send(task.ID, "orders", "racing", note{N: 5}); serr != nil {
					return "", leasehold.Fail(serr)
				}
			}
			return "", err
		}
		return fmt.Sprint(o.N), nil
	})
	env = leaseholdtest.New(t, hs)
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "racer"})
	mustRun(t, env)
	if got := mustTask(t, env, id); got.Status != leasehold.StatusPending || !sent {
		t.Fatalf("after the racing send the workflow is %s (%s), want PENDING, asleep in its receive", got.Status, got.Error)
	}
	env.Clock().Advance(5 * time.Second) // the delayed wake, not the receive's hour
	mustRun(t, env)
	if got := mustTask(t, env, id); got.Status != leasehold.StatusSucceeded || string(got.Result) != `"5"` {
		t.Fatalf("the workflow: %s %s (%s), want SUCCEEDED 5, woken by the racing send", got.Status, got.Result, got.Error)
	}
}
