package leaseholdtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leaseholdtest"
)

type resize struct {
	URL   string `json:"url"`
	Width int    `json:"width"`
}

// seen is what a handler saw of its task, as its result.
type seen struct {
	ID          string    `json:"id"`
	Kind        string    `json:"kind"`
	Attempt     int       `json:"attempt"`
	MaxAttempts int       `json:"max_attempts"`
	Fence       int64     `json:"fence"`
	LeaseUntil  time.Time `json:"lease_until"`
	CreatedAt   time.Time `json:"created_at"`
	Payload     resize    `json:"payload"`
	Key         string    `json:"key"`
}

func echo(_ context.Context, t *leasehold.Task[resize]) (seen, error) {
	return seen{
		ID: t.ID, Kind: t.Kind, Attempt: t.Attempt, MaxAttempts: t.MaxAttempts, Fence: t.Fence,
		LeaseUntil: t.LeaseUntil, CreatedAt: t.CreatedAt, Payload: t.Payload, Key: t.IdempotencyKey(),
	}, nil
}

func TestRunPassesTheTaskAndReturnsTheResult(t *testing.T) {
	t.Parallel()
	until := time.Date(2026, 12, 3, 1, 2, 3, 0, time.UTC)
	created := until.Add(-time.Hour)
	got, err := leaseholdtest.Run(context.Background(), echo, leaseholdtest.Task[resize]{
		ID: "t-1", Kind: "resize", Attempt: 3, MaxAttempts: 4, Fence: 7,
		LeaseUntil: until, CreatedAt: created, Payload: resize{URL: "s3://b/cat.png", Width: 64},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := seen{
		ID: "t-1", Kind: "resize", Attempt: 3, MaxAttempts: 4, Fence: 7,
		LeaseUntil: until, CreatedAt: created, Payload: resize{URL: "s3://b/cat.png", Width: 64}, Key: "t-1/7",
	}
	if got != want {
		t.Errorf("handler saw %+v, want %+v", got, want)
	}
}

func TestRunDefaults(t *testing.T) {
	t.Parallel()
	before := time.Now()
	got, err := leaseholdtest.Run(context.Background(), echo, leaseholdtest.Task[resize]{Attempt: 6})
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != "leaseholdtest-task" || got.Kind != "leaseholdtest" {
		t.Errorf("id %q kind %q, want the defaults", got.ID, got.Kind)
	}
	if got.Attempt != 6 || got.MaxAttempts != 6 || got.Fence != 6 {
		t.Errorf("attempt %d of %d, fence %d; want 6 of 6, fence 6", got.Attempt, got.MaxAttempts, got.Fence)
	}
	if got.LeaseUntil.Before(before.Add(20*time.Second)) || got.CreatedAt.Before(before) {
		t.Errorf("lease until %v, created %v: want from now", got.LeaseUntil, got.CreatedAt)
	}
}

func TestRunErrors(t *testing.T) {
	t.Parallel()
	errDown := errors.New("image service down")
	tests := []struct {
		name    string
		run     func() error
		want    error  // errors.Is, when set
		message string // in the error
	}{
		{
			name: "the handler's error, unchanged",
			run: func() error {
				_, err := leaseholdtest.Run(context.Background(), func(context.Context, *leasehold.Task[resize]) (string, error) {
					return "", leasehold.Fail(errDown)
				}, leaseholdtest.Task[resize]{})
				return err
			},
			want: errDown,
		},
		{
			name: "a panic",
			run: func() error {
				_, err := leaseholdtest.Run(context.Background(), func(context.Context, *leasehold.Task[resize]) (string, error) {
					panic("boom")
				}, leaseholdtest.Task[resize]{})
				return err
			},
			message: "handler panicked: boom",
		},
		{
			name: "a result JSON cannot encode",
			run: func() error {
				_, err := leaseholdtest.Run(context.Background(), func(context.Context, *leasehold.Task[resize]) (func(), error) {
					return func() {}, nil
				}, leaseholdtest.Task[resize]{})
				return err
			},
			message: "result does not encode as JSON",
		},
		{
			name: "a payload that does not decode",
			run: func() error {
				hs := leasehold.NewHandlers()
				leasehold.Handle(hs, "resize", echo)
				_, err := leaseholdtest.RunKind(context.Background(), hs, leaseholdtest.Task[json.RawMessage]{
					Kind: "resize", Payload: json.RawMessage(`{"width":"wide"}`),
				})
				return err
			},
			message: "payload does not decode",
		},
		{
			name: "a kind nobody registered",
			run: func() error {
				_, err := leaseholdtest.RunKind(context.Background(), leasehold.NewHandlers(), leaseholdtest.Task[json.RawMessage]{Kind: "nope"})
				return err
			},
			message: `no handler for kind "nope"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.run()
			if err == nil {
				t.Fatal("no error")
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("error %v, want %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.message) {
				t.Errorf("error %q does not say %q", err, tt.message)
			}
		})
	}
}

func TestRunKindReturnsTheRecordedJSON(t *testing.T) {
	t.Parallel()
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "area", func(_ context.Context, t *leasehold.Task[resize]) (map[string]int, error) {
		return map[string]int{"px": t.Payload.Width * t.Payload.Width}, nil
	})
	out, err := leaseholdtest.RunKind(context.Background(), hs, leaseholdtest.Task[json.RawMessage]{
		Kind: "area", Payload: json.RawMessage(`{"width":3}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != `{"px":9}` {
		t.Errorf("result %s, want {\"px\":9}", out)
	}
}
