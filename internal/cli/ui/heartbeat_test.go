package ui_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/cli/ui"
	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/workflow"
)

// The task page of a callback wait with a heartbeat timeout shows its
// last heartbeat and when it ends without another.
func TestTaskPageShowsTheLastHeartbeat(t *testing.T) {
	t.Parallel()
	hs := leasehold.NewHandlers()
	tokens := make(chan string, 1)
	leasehold.Handle(hs, "beat", func(ctx context.Context, _ *leasehold.Task[int]) (string, error) {
		return workflow.WaitForCallback[string](ctx, "work", time.Hour, func(_ context.Context, tok string) error {
			tokens <- tok
			return nil
		}, workflow.HeartbeatTimeout(10*time.Minute))
	})
	env := leaseholdtest.New(t, hs)
	if _, err := env.Enqueue(leasehold.Submission{Kind: "beat", ID: "beat-1"}); err != nil {
		t.Fatal(err)
	}
	if err := env.Run(); err != nil {
		t.Fatal(err)
	}
	env.Clock().Advance(3 * time.Minute)
	if err := env.HeartbeatCallback(<-tokens); err != nil {
		t.Fatal(err)
	}
	beat := env.Clock().Now().UTC()
	srv, err := ui.New(ui.Config{Tasks: env.Client(), Queues: &fakeQueues{}, WorkQueueURL: workURL, Now: env.Clock().Now})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, env, srv, &fakeQueues{})
	body := f.get(t, "/task?id=beat-1")
	want := "last heartbeat " + beat.Format("2006-01-02 15:04:05Z") + "; ends " + beat.Add(10*time.Minute).Format("2006-01-02 15:04:05Z") + " without another"
	if !strings.Contains(body, want) {
		t.Errorf("the task page does not show %q:\n%s", want, body)
	}
}
