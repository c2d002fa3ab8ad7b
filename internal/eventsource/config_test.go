package eventsource

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/leasehold/leasehold/internal/defaults"
)

func TestNewValidatesConfig(t *testing.T) {
	t.Parallel()

	const queue = "https://sqs.us-east-1.amazonaws.com/123456789012/work"
	const fifo = "https://sqs.us-east-1.amazonaws.com/123456789012/work.fifo"
	nop := func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
		return events.SQSEventResponse{}, nil
	}

	tests := []struct {
		name    string
		cfg     Config
		noH     bool
		noC     bool
		wantErr []string // substrings that must all appear; nil means valid
	}{
		{name: "defaults", cfg: Config{QueueURL: queue}},
		{name: "all set", cfg: Config{QueueURL: queue, BatchSize: 5, BatchWindow: 2 * time.Second,
			WaitTime: 5 * time.Second, Pollers: 4, VisibilityTimeout: 90 * time.Second,
			InvocationTimeout: 15 * time.Minute, CallTimeout: 6 * time.Second}},
		{name: "large batch with window", cfg: Config{QueueURL: queue, BatchSize: 10000, BatchWindow: time.Second}},
		{name: "missing queue", cfg: Config{}, wantErr: []string{"QueueURL is required"}},
		{name: "relative queue URL", cfg: Config{QueueURL: "work"}, wantErr: []string{"not an absolute URL"}},
		{name: "negative batch size", cfg: Config{QueueURL: queue, BatchSize: -1}, wantErr: []string{"BatchSize -1"}},
		{name: "batch above 10 without window", cfg: Config{QueueURL: queue, BatchSize: 11}, wantErr: []string{"needs a BatchWindow"}},
		{name: "batch above Lambda limit", cfg: Config{QueueURL: queue, BatchSize: 10001, BatchWindow: time.Second}, wantErr: []string{"exceeds 10000"}},
		{name: "fifo batch above 10", cfg: Config{QueueURL: fifo, BatchSize: 11, BatchWindow: time.Second}, wantErr: []string{"FIFO"}},
		{name: "negative window", cfg: Config{QueueURL: queue, BatchWindow: -time.Second}, wantErr: []string{"BatchWindow"}},
		{name: "window above 5 minutes", cfg: Config{QueueURL: queue, BatchWindow: 301 * time.Second}, wantErr: []string{"BatchWindow"}},
		{name: "wait above 20s", cfg: Config{QueueURL: queue, WaitTime: 21 * time.Second, CallTimeout: time.Minute}, wantErr: []string{"WaitTime"}},
		{name: "fractional wait", cfg: Config{QueueURL: queue, WaitTime: 1500 * time.Millisecond}, wantErr: []string{"WaitTime"}},
		{name: "negative pollers", cfg: Config{QueueURL: queue, Pollers: -2}, wantErr: []string{"Pollers"}},
		{name: "too many pollers", cfg: Config{QueueURL: queue, Pollers: 1001}, wantErr: []string{"Pollers"}},
		{name: "negative batches in flight", cfg: Config{QueueURL: queue, InFlight: -1}, wantErr: []string{"InFlight"}},
		{name: "too many batches in flight", cfg: Config{QueueURL: queue, InFlight: 5}, wantErr: []string{"InFlight"}},
		{name: "fractional visibility", cfg: Config{QueueURL: queue, VisibilityTimeout: 500 * time.Millisecond}, wantErr: []string{"VisibilityTimeout"}},
		{name: "visibility above 12h", cfg: Config{QueueURL: queue, VisibilityTimeout: 13 * time.Hour}, wantErr: []string{"VisibilityTimeout"}},
		{name: "invocation above 15 minutes", cfg: Config{QueueURL: queue, InvocationTimeout: 16 * time.Minute}, wantErr: []string{"InvocationTimeout"}},
		{name: "negative invocation", cfg: Config{QueueURL: queue, InvocationTimeout: -time.Second}, wantErr: []string{"InvocationTimeout"}},
		{name: "call timeout not above wait", cfg: Config{QueueURL: queue, CallTimeout: 20 * time.Second}, wantErr: []string{"must exceed WaitTime"}},
		{name: "negative call timeout", cfg: Config{QueueURL: queue, CallTimeout: -time.Second}, wantErr: []string{"CallTimeout"}},
		{name: "nil handler", cfg: Config{QueueURL: queue}, noH: true, wantErr: []string{"handler is nil"}},
		{name: "nil client", cfg: Config{QueueURL: queue}, noC: true, wantErr: []string{"SQS client is nil"}},
		{name: "every problem reported", cfg: Config{BatchSize: -1, Pollers: -1}, noH: true,
			wantErr: []string{"QueueURL", "BatchSize", "Pollers", "handler"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var client SQSClient = unusedClient{}
			if tt.noC {
				client = nil
			}
			h := Handler(nop)
			if tt.noH {
				h = nil
			}
			r, err := New(client, tt.cfg, h)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("New: unexpected error: %v", err)
				}
				if r == nil {
					t.Fatal("New returned a nil Runner and no error")
				}
				return
			}
			if err == nil {
				t.Fatalf("New accepted %+v", tt.cfg)
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("error %v does not wrap ErrInvalidConfig", err)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
		})
	}
}

func TestNewAppliesDefaults(t *testing.T) {
	t.Parallel()
	r, err := New(unusedClient{}, Config{QueueURL: "https://sqs.us-east-1.amazonaws.com/123456789012/work"},
		func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
			return events.SQSEventResponse{}, nil
		})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	got := r.cfg
	if got.BatchSize != DefaultBatchSize || got.WaitTime != DefaultWaitTime || got.Pollers != DefaultPollers || got.InFlight != 1 ||
		got.InvocationTimeout != DefaultInvocationTimeout || got.CallTimeout != defaults.ReceiveCallTimeout ||
		got.BatchWindow != 0 || got.VisibilityTimeout != 0 || got.Logger == nil {
		t.Errorf("defaults not applied: %+v", got)
	}
}
