package main_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/workflow"
)

// TestHeartbeatCommand: `leasehold heartbeat TOKEN` beats for a callback
// wait with a heartbeat timeout; a garbage token, a missing one and a beat
// after the wait was answered are refused with the reason and the exit
// code.
func TestHeartbeatCommand(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	tokens := make(chan string, 2)
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "beating", func(ctx context.Context, task *leasehold.Task[struct{}]) (string, error) {
		return workflow.WaitForCallback[string](ctx, "done", time.Hour, func(_ context.Context, token string) error {
			tokens <- token
			return nil
		}, workflow.HeartbeatTimeout(30*time.Minute))
	})
	w, err := leasehold.NewWorker(leasehold.WorkerConfig{
		AWS: s.cfg, Table: s.table, QueueURL: s.queues.Work, DeadLetterQueueURL: s.queues.WorkDLQ, Handlers: hs,
		Logger: slog.New(slog.DiscardHandler), LongPoll: time.Second,
	})
	if err != nil {
		t.Fatalf("NewWorker: %v", err)
	}
	ctx, stop := context.WithCancel(context.WithoutCancel(t.Context()))
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("worker Run: %v", err)
		}
	})

	s.run(t, "", "heartbeat").expect(t, 2, "accepts 1 arg")
	s.run(t, "", "heartbeat", "lhcb1.garbage").expect(t, 1, "callback token")
	s.run(t, "", "enqueue", "--kind", "beating", "--id", "hb", "{}").expect(t, 0, "")
	var tok string
	select {
	case tok = <-tokens:
	case <-time.After(awstest.Scale(time.Minute)):
		t.Fatal("the handler took no callback token")
	}
	for range 2 {
		if r := s.run(t, "", "heartbeat", tok); r.code != 0 || r.stdout != "heartbeat recorded\n" {
			t.Fatalf("heartbeat: exit %d %q %s", r.code, r.stdout, r.stderr)
		}
	}
	if r := s.run(t, "", "complete", tok, `"ok"`); r.code != 0 {
		t.Fatalf("complete: exit %d %q %s", r.code, r.stdout, r.stderr)
	}
	s.run(t, "", "heartbeat", tok).expect(t, 1, "callback token rejected")
}
