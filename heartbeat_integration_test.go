package leasehold_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/token"
	"github.com/leasehold/leasehold/workflow"
)

// TestCallbackHeartbeatOnTheStack: a callback wait with a heartbeat
// timeout, on the real worker (its sweep on), the DynamoDB store and SQS,
// is kept alive past several heartbeat timeouts by Client.HeartbeatCallback
// and by the plain {"v":1,"heartbeat":TOKEN} message; once the beats stop
// it fails with the heartbeat's reason within a few heartbeat timeouts,
// long before its hour; a beat then is refused with ErrBadCallback.
func TestCallbackHeartbeatOnTheStack(t *testing.T) {
	t.Parallel()
	e := setupStack(t)
	c := newClientOn(t, e)
	hb := awstest.Scale(4 * time.Second)
	tokens := make(chan string, 2)
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "beat", func(ctx context.Context, _ *leasehold.Task[any]) (string, error) {
		return workflow.WaitForCallback[string](ctx, "work", time.Hour, func(_ context.Context, tok string) error {
			tokens <- tok
			return nil
		}, workflow.HeartbeatTimeout(hb))
	})
	w := e.worker(t, leasehold.WorkerConfig{Handlers: hs, LongPoll: time.Second, SweepEvery: time.Second, DispatchGrace: 2 * time.Second})
	ctx, stop := context.WithCancel(context.WithoutCancel(t.Context()))
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	if _, err := c.Enqueue(t.Context(), leasehold.Submission{Kind: "beat", ID: "hb", MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	var tok string
	select {
	case tok = <-tokens:
	case <-time.After(awstest.Scale(time.Minute)):
		t.Fatal("the handler took no callback token")
	}
	waitFor(t, 60*time.Second, func() bool { return e.status(t, "hb") == lease.StatusWaiting })

	// Beat every sixth of the heartbeat timeout for two timeouts and more:
	// by the client, and every third beat as a plain SQS message.
	begin := time.Now()
	for i := 0; time.Since(begin) < 2*hb; i++ {
		if i%3 == 2 {
			e.send(t, e.queues.Work, token.HeartbeatMessage(tok))
		} else if err := c.HeartbeatCallback(t.Context(), tok); err != nil {
			t.Fatalf("beat %d: %v", i, err)
		}
		if got := e.get(t, "hb"); got.Status != lease.StatusWaiting {
			t.Fatalf("beat %d, %s after the wait began: %s (%q), want still WAITING", i, time.Since(begin), got.Status, got.Error)
		}
		time.Sleep(hb / 6)
	}
	// The last message beat must have landed too: the heartbeat deadline
	// moves past the client's last beat.
	last := e.get(t, "hb").BeatUntil
	e.send(t, e.queues.Work, token.HeartbeatMessage(tok))
	waitFor(t, 30*time.Second, func() bool {
		got := e.get(t, "hb")
		return got.Status != lease.StatusWaiting || got.BeatUntil.After(last)
	})
	stopped := time.Now()

	waitFor(t, 120*time.Second, func() bool { return e.status(t, "hb") == lease.StatusFailed })
	got := e.get(t, "hb")
	if !strings.HasPrefix(got.Error, "callback heartbeat timed out after "+hb.String()) {
		t.Fatalf("hb failed with %q, want the heartbeat's reason", got.Error)
	}
	if waited := got.FinishedAt.Sub(stopped); waited > 3*hb+awstest.Scale(30*time.Second) {
		t.Errorf("ended %s after the last beat", waited)
	}
	if err := c.HeartbeatCallback(t.Context(), tok); !errors.Is(err, leasehold.ErrBadCallback) {
		t.Errorf("a beat after the wait ended: %v, want ErrBadCallback", err)
	}
}
