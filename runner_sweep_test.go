package leasehold

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/leasemem"
	"github.com/leasehold/leasehold/settings"
)

// SweepEvery comes from the config, else LEASEHOLD_SWEEP_EVERY; zero is
// the default period and negative turns the sweep off.
func TestSweepEvery(t *testing.T) {
	cases := []struct {
		name string
		set  time.Duration
		env  string
		want time.Duration
	}{
		{"default: on, every defaults.SweepEvery (0 here)", 0, "", 0},
		{"a period", 5 * time.Second, "", 5 * time.Second},
		{"negative turns it off", -1, "", -1},
		{"env period", 0, "30s", 30 * time.Second},
		{"env negative turns it off", 0, "-1s", -time.Second},
		{"the config wins over the env", time.Second, "-1s", time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := WorkerConfig{QueueURL: "https://sqs.example/work", Handlers: NewHandlers(), Logger: slog.New(slog.DiscardHandler), SweepEvery: c.set}
			if err := fromEnv(&cfg, func(k string) string {
				if k == settings.EnvSweepEvery {
					return c.env
				}
				return ""
			}); err != nil {
				t.Fatal(err)
			}
			w, err := newWorker(leasemem.New(lease.Options{}), &batchingSQS{}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if w.sweepEvery != c.want {
				t.Fatalf("sweep every %s, want %s", w.sweepEvery, c.want)
			}
		})
	}
	cfg := WorkerConfig{}
	if err := fromEnv(&cfg, func(k string) string { return map[string]string{settings.EnvSweepEvery: "often"}[k] }); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), settings.EnvSweepEvery) {
		t.Fatalf("LEASEHOLD_SWEEP_EVERY=often: %v, want ErrConfig naming the variable", err)
	}
}

// batchingSQS adds the call the sweep sends tokens with.
type batchingSQS struct{ recordingSQS }

func (*batchingSQS) SendMessageBatch(context.Context, *sqs.SendMessageBatchInput, ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	return &sqs.SendMessageBatchOutput{}, nil
}

// newWorker wires the sweeper whenever the store has the calls it makes
// (NewWorker's always does), and leaves it out otherwise, so
// that Run refuses to start unless SweepEvery < 0 rather than not sweeping.
func TestNewWorkerWiresTheSweeper(t *testing.T) {
	hs := NewHandlers()
	cfg := WorkerConfig{QueueURL: "https://sqs.example/work", Handlers: hs, Logger: slog.New(slog.DiscardHandler), Owner: "test"}
	w, err := newWorker(leasemem.New(lease.Options{}), &batchingSQS{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if w.sweeper == nil {
		t.Fatal("store and client that can sweep: no sweeper")
	}
	// (Every worker's SQS client can send batches: children's tokens go
	// that way. A store without the sweep's calls is what leaves it out.)
	w, err = newWorker(struct{ lease.Store }{leasemem.New(lease.Options{})}, &recordingSQS{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if w.sweeper != nil {
		t.Fatal("store without the sweep's calls: a sweeper")
	}
}

// deadLetterSQS is a client whose dead-letter queues are empty and whose
// queues have no redrive policy; it records whose attributes are read.
type deadLetterSQS struct {
	batchingSQS
	mu   sync.Mutex
	read []string
}

func (d *deadLetterSQS) ReceiveMessage(context.Context, *sqs.ReceiveMessageInput, ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	return &sqs.ReceiveMessageOutput{}, nil
}

func (d *deadLetterSQS) DeleteMessageBatch(context.Context, *sqs.DeleteMessageBatchInput, ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	return &sqs.DeleteMessageBatchOutput{}, nil
}

func (d *deadLetterSQS) GetQueueAttributes(_ context.Context, in *sqs.GetQueueAttributesInput, _ ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.read = append(d.read, aws.ToString(in.QueueUrl))
	return &sqs.GetQueueAttributesOutput{}, nil
}

// Run's sweep also looks for the dead-letter queues of the other queues
// the worker serves (QueueURLs), through their redrive policies; the
// default queue's is DeadLetterQueueURL.
func TestWorkerSweepRecoversTheDeadLettersOfItsQueues(t *testing.T) {
	t.Parallel()
	q := &deadLetterSQS{}
	cfg := WorkerConfig{QueueURL: "https://sqs.example/1/work", QueueURLs: []string{"https://sqs.example/1/work", "https://sqs.example/1/images"},
		DeadLetterQueueURL: "https://sqs.example/1/work-dlq", Handlers: NewHandlers(), Logger: slog.New(slog.DiscardHandler), Owner: "test"}
	w, err := newWorker(leasemem.New(lease.Options{}), q, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.sweeper.RedriveDeadLetters(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(q.read, []string{"https://sqs.example/1/images"}) {
		t.Fatalf("read the redrive policies of %v, want the served named queue's only", q.read)
	}
}
