package leaseholdtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leaseholdtest"
)

func TestOutcomeOf(t *testing.T) {
	t.Parallel()
	errDown := errors.New("down")
	tests := []struct {
		name    string
		handler leasehold.HandlerFunc[resize, string]
		want    leaseholdtest.Outcome
		delay   time.Duration
	}{
		{"result", func(context.Context, *leasehold.Task[resize]) (string, error) { return "ok", nil }, leaseholdtest.Succeeded, 0},
		{"plain error", func(context.Context, *leasehold.Task[resize]) (string, error) { return "", errDown }, leaseholdtest.Retried, 0},
		{"panic", func(context.Context, *leasehold.Task[resize]) (string, error) { panic("boom") }, leaseholdtest.Retried, 0},
		{"fail", func(context.Context, *leasehold.Task[resize]) (string, error) { return "", leasehold.Fail(errDown) }, leaseholdtest.Failed, 0},
		{"wrapped fail", func(context.Context, *leasehold.Task[resize]) (string, error) {
			return "", fmt.Errorf("resize: %w", leasehold.Fail(errDown))
		}, leaseholdtest.Failed, 0},
		{"cancel", func(context.Context, *leasehold.Task[resize]) (string, error) { return "", leasehold.Cancel(errDown) }, leaseholdtest.Cancelled, 0},
		{"snooze", func(context.Context, *leasehold.Task[resize]) (string, error) {
			return "", leasehold.Snooze(time.Minute)
		}, leaseholdtest.Snoozed, time.Minute},
		{"snooze too short", func(context.Context, *leasehold.Task[resize]) (string, error) { return "", leasehold.Snooze(0) }, leaseholdtest.Snoozed, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := leaseholdtest.Run(context.Background(), tt.handler, leaseholdtest.Task[resize]{})
			got, delay := leaseholdtest.OutcomeOf(err)
			if got != tt.want || delay != tt.delay {
				t.Errorf("OutcomeOf(%v) = %s, %s; want %s, %s", err, got, delay, tt.want, tt.delay)
			}
		})
	}
}

// A payload the handler's type cannot decode fails the task for good.
func TestOutcomeOfABadPayload(t *testing.T) {
	t.Parallel()
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "resize", echo)
	_, err := leaseholdtest.RunKind(context.Background(), hs, leaseholdtest.Task[json.RawMessage]{
		Kind: "resize", Payload: json.RawMessage(`{"width":"wide"}`),
	})
	if got, _ := leaseholdtest.OutcomeOf(err); got != leaseholdtest.Failed {
		t.Errorf("OutcomeOf(%v) = %s, want failed", err, got)
	}
}
