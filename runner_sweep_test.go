package leasehold

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/leasemem"
	"github.com/leasehold/leasehold/settings"
)

func TestSweepRunOptions(t *testing.T) {
	cases := []struct {
		name string
		opts []RunOption
		env  string
		want time.Duration
	}{
		{"default: on, every settings.DefaultSweepEvery (0 here)", nil, "", 0},
		{"WithSweep", []RunOption{WithSweep(5 * time.Second)}, "", 5 * time.Second},
		{"WithSweep(0) keeps the default", []RunOption{WithSweep(0)}, "", 0},
		{"WithoutSweep", []RunOption{WithoutSweep()}, "", -1},
		{"the last one wins", []RunOption{WithoutSweep(), WithSweep(time.Second)}, "", time.Second},
		{"env period", nil, "30s", 30 * time.Second},
		{"env negative turns it off", nil, "-1s", -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(settings.EnvSweepEvery, c.env)
			opts := c.opts
			if c.env != "" {
				env, err := RunOptionsFromEnv()
				if err != nil {
					t.Fatal(err)
				}
				opts = append(opts, env...)
			}
			var o runOptions
			for _, opt := range opts {
				opt(&o)
			}
			if o.sweepEvery != c.want {
				t.Fatalf("sweep every %s, want %s", o.sweepEvery, c.want)
			}
		})
	}
	t.Setenv(settings.EnvSweepEvery, "often")
	if _, err := RunOptionsFromEnv(); !errors.Is(err, ErrConfig) {
		t.Fatalf("LEASEHOLD_SWEEP_EVERY=often: %v, want ErrConfig", err)
	}
}

// batchingSQS adds the call the sweep sends tokens with.
type batchingSQS struct{ recordingSQS }

func (*batchingSQS) SendMessageBatch(context.Context, *sqs.SendMessageBatchInput, ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	return &sqs.SendMessageBatchOutput{}, nil
}

// newWorker wires the sweeper whenever the store has the calls it makes
// (NewWorker's always does), and leaves it out otherwise, so
// that Run refuses to start without WithoutSweep rather than not sweeping.
func TestNewWorkerWiresTheSweeper(t *testing.T) {
	hs := NewHandlers()
	o := workerOptions{}
	WithLogger(slog.New(slog.DiscardHandler))(&o)
	WithOwner("test")(&o)
	cfg := WorkerConfig{QueueURL: "https://sqs.example/work", Handlers: hs}
	w, err := newWorker(leasemem.New(lease.Options{}), &batchingSQS{}, cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	if w.sweeper == nil {
		t.Fatal("store and client that can sweep: no sweeper")
	}
	// (Every worker's SQS client can send batches: children's tokens go
	// that way. A store without the sweep's calls is what leaves it out.)
	w, err = newWorker(struct{ lease.Store }{leasemem.New(lease.Options{})}, &recordingSQS{}, cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	if w.sweeper != nil {
		t.Fatal("store without the sweep's calls: a sweeper")
	}
}
