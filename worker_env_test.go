package leasehold

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/jonboulle/clockwork"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/leasemem"
	"github.com/leasehold/leasehold/settings"
)

// NewWorkerFromEnv covers every option: the worker's, Run's and the log
// level. With a DLQ URL set it makes no AWS call (the config has no
// endpoint or credentials).
func TestNewWorkerFromEnvReadsEveryVariable(t *testing.T) {
	for k, v := range map[string]string{
		settings.EnvTable: "tasks", settings.EnvWorkQueueURL: "https://sqs.example/work", settings.EnvWorkDLQURL: "https://sqs.example/dlq",
		settings.EnvLogLevel: "DEBUG", settings.EnvVisibilityMargin: "7s", settings.EnvLeaseDuration: "30s", settings.EnvRenewBefore: "12s",
		settings.EnvReceiveVisibility: "45s", settings.EnvLongPoll: "3s", settings.EnvPollers: "4", settings.EnvBatchWindow: "2s",
		settings.EnvBackoff: "3s,1m", settings.EnvUnknownKindBackoff: "20s, 30m", settings.EnvUnknownKindLimit: "48h", settings.EnvWaitTimeout: "72h",
		settings.EnvServeQueueURLs: "https://sqs.example/work, https://sqs.example/images",
	} {
		t.Setenv(k, v)
	}
	w, err := NewWorkerFromEnv(t.Context(), WorkerConfig{AWS: aws.Config{Region: "us-east-1"}, Handlers: NewHandlers()})
	if err != nil {
		t.Fatal(err)
	}
	lc := w.exec.Config()
	if lc.VisibilityMargin != 7*time.Second || lc.LeaseDuration != 30*time.Second || lc.RenewBefore != 12*time.Second {
		t.Errorf("visibility margin %s, lease %s, renew before %s; want 7s, 30s, 12s", lc.VisibilityMargin, lc.LeaseDuration, lc.RenewBefore)
	}
	if lc.UnknownKindBackoffMin != 20*time.Second || lc.UnknownKindBackoffMax != 30*time.Minute || lc.UnknownKindLimit != 48*time.Hour {
		t.Errorf("unknown kinds: backoff %s..%s, limit %s; want 20s..30m, 48h", lc.UnknownKindBackoffMin, lc.UnknownKindBackoffMax, lc.UnknownKindLimit)
	}
	if lc.WaitTimeout != 72*time.Hour {
		t.Errorf("wait timeout %s, want 72h", lc.WaitTimeout)
	}
	// ExponentialBackoff(3s, 1m) draws attempt n's delay from [d/2, d], d = min(3s·2^(n-1), 1m).
	if d := lc.Backoff(1); d < 1500*time.Millisecond || d > 3*time.Second {
		t.Errorf("backoff of attempt 1 = %s, want within [1.5s, 3s]", d)
	}
	if d := lc.Backoff(20); d < 30*time.Second || d > time.Minute {
		t.Errorf("backoff of attempt 20 = %s, want within [30s, 1m]", d)
	}
	if got := w.QueueURLs(); !slices.Equal(got, []string{"https://sqs.example/work", "https://sqs.example/images"}) {
		t.Errorf("served queues %v, want the work and images queues", got)
	}
	if !w.log.Enabled(t.Context(), slog.LevelDebug) {
		t.Errorf("%s=DEBUG: the worker's logger does not log DEBUG", settings.EnvLogLevel)
	}
	if o := w.run; o.VisibilityTimeout != 45*time.Second || o.WaitTime != 3*time.Second || o.Pollers != 4 || o.BatchWindow != 2*time.Second {
		t.Errorf("run settings %+v; want receive visibility 45s, long poll 3s, 4 pollers, batch window 2s", o)
	}

	// A logger of the caller's replaces the one of LEASEHOLD_LOG_LEVEL, and
	// a field the caller set wins over its variable.
	w, err = NewWorkerFromEnv(t.Context(), WorkerConfig{AWS: aws.Config{Region: "us-east-1"}, Handlers: NewHandlers(),
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})), LeaseDuration: 40 * time.Second})
	if err != nil || w.log.Enabled(t.Context(), slog.LevelWarn) {
		t.Errorf("with a Logger at ERROR: err %v, logs WARN %v; want the caller's logger", err, w.log.Enabled(t.Context(), slog.LevelWarn))
	}
	if err == nil && w.exec.Config().LeaseDuration != 40*time.Second {
		t.Errorf("LeaseDuration set to 40s and %s=30s: the worker's lease is %s", settings.EnvLeaseDuration, w.exec.Config().LeaseDuration)
	}

	for env, bad := range map[string]string{settings.EnvBackoff: "2s", settings.EnvUnknownKindBackoff: "1m,10s", settings.EnvUnknownKindLimit: "soon", settings.EnvWaitTimeout: "a week"} {
		t.Run(env, func(t *testing.T) {
			t.Setenv(env, bad)
			if _, err := NewWorkerFromEnv(t.Context(), WorkerConfig{Handlers: NewHandlers()}); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), env) {
				t.Errorf("%s=%q: err %v, want ErrConfig naming it", env, bad, err)
			}
		})
	}

	t.Setenv(settings.EnvLogLevel, "LOUD")
	if _, err := NewWorkerFromEnv(t.Context(), WorkerConfig{Handlers: NewHandlers()}); err == nil || !strings.Contains(err.Error(), settings.EnvLogLevel) {
		t.Errorf("%s=LOUD: err %v, want ErrConfig naming it", settings.EnvLogLevel, err)
	}
}

// fakeLookup answers the DLQ lookups.
type fakeLookup struct {
	redrive     string            // the work queue's RedrivePolicy attribute
	queues      map[string]string // name -> URL
	workMissing bool              // the work queue does not exist
	endpoint    string            // the client's base endpoint, if any
}

func (f fakeLookup) Options() sqs.Options {
	o := sqs.Options{Region: "eu-west-1"}
	if f.endpoint != "" {
		o.BaseEndpoint = aws.String(f.endpoint)
	}
	return o
}

func (f fakeLookup) GetQueueUrl(_ context.Context, in *sqs.GetQueueUrlInput, _ ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	if url, ok := f.queues[aws.ToString(in.QueueName)]; ok {
		return &sqs.GetQueueUrlOutput{QueueUrl: aws.String(url)}, nil
	}
	return nil, &sqstypes.QueueDoesNotExist{}
}

func (f fakeLookup) GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	if f.workMissing {
		return nil, &sqstypes.QueueDoesNotExist{}
	}
	attrs := map[string]string{}
	if f.redrive != "" {
		attrs[string(sqstypes.QueueAttributeNameRedrivePolicy)] = f.redrive
	}
	return &sqs.GetQueueAttributesOutput{Attributes: attrs}, nil
}

func TestFindDeadLetterQueue(t *testing.T) {
	t.Parallel()
	q := fakeLookup{
		redrive:  `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:stack-work-dlq","maxReceiveCount":10}`,
		queues:   map[string]string{"stack-work-dlq": "https://sqs.example/stack-work-dlq", "named": "https://sqs.example/named"},
		endpoint: "http://127.0.0.1:4566",
	}
	for _, c := range []struct {
		name      string
		q         fakeLookup
		dlqName   string
		want, why string
	}{
		{"by name", q, "named", "https://sqs.example/named", ""},
		// A missing queue is named once, with where it was looked for.
		{"missing name", q, "nope", "", "SQS queue nope does not exist (region eu-west-1, endpoint http://127.0.0.1:4566)"},
		{"missing work queue", fakeLookup{workMissing: true}, "", "",
			"read the work queue's redrive policy: SQS queue https://sqs.example/work does not exist (region eu-west-1, endpoint https://sqs.eu-west-1.amazonaws.com)"},
		{"redrive target", q, "", "https://sqs.example/stack-work-dlq", ""},
		{"no redrive policy", fakeLookup{}, "", "", "the work queue has no redrive policy"},
	} {
		url, why := findDeadLetterQueue(t.Context(), c.q, "https://sqs.example/work", c.dlqName)
		if url != c.want || why != c.why {
			t.Errorf("%s: %q, %q; want %q, %q", c.name, url, why, c.want, c.why)
		}
	}
}

// A handler sees its attempt's fence and lease expiry, and the idempotency
// key built from them.
func TestHandlerSeesFenceAndLease(t *testing.T) {
	t.Parallel()
	clock := clockwork.NewFakeClockAt(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	store := leasemem.New(lease.Options{Clock: clock, LeaseDuration: 30 * time.Second})
	hs := NewHandlers()
	var seen Task[struct{}]
	Handle(hs, "k", func(_ context.Context, task *Task[struct{}]) (int, error) { seen = *task; return 1, nil })
	w, err := newWorker(store, &recordingSQS{}, WorkerConfig{QueueURL: "https://sqs.example/work", Handlers: hs,
		Clock: clock, Logger: slog.New(slog.DiscardHandler), LeaseDuration: 30 * time.Second, Owner: "test"})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"v": 1, "kind": "k", "id": "t1"})
	ev := events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m1", ReceiptHandle: "r1", Body: string(body),
		Attributes: map[string]string{"ApproximateReceiveCount": "1"}}}}
	if resp, err := w.HandleSQS(t.Context(), ev); err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("HandleSQS = %+v, %v", resp, err)
	}
	if seen.Fence != 1 || !seen.LeaseUntil.Equal(clock.Now().Add(30*time.Second)) || seen.IdempotencyKey() != "t1/1" {
		t.Errorf("handler saw fence %d, lease until %s, key %q; want 1, %s, t1/1", seen.Fence, seen.LeaseUntil, seen.IdempotencyKey(), clock.Now().Add(30*time.Second))
	}
}

func TestExponentialBackoffBounds(t *testing.T) {
	t.Parallel()
	b := settings.ExponentialBackoff(time.Second, 8*time.Second)
	for attempt, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 4: 8 * time.Second, 9: 8 * time.Second} {
		for range 50 {
			if d := b(attempt); d < want/2 || d > want {
				t.Fatalf("attempt %d: %s, want within [%s, %s]", attempt, d, want/2, want)
			}
		}
	}
}

// Without credentials, NewWorkerFromEnv fails before its first call (the
// DLQ lookup) with one line that says what to set, not the SDK's provider
// chain; the provider's error stays reachable.
func TestNewWorkerFromEnvWithoutCredentials(t *testing.T) {
	t.Setenv(settings.EnvTable, "tasks")
	t.Setenv(settings.EnvWorkQueueURL, "http://sqs.example/000000000000/work")
	t.Setenv(settings.EnvWorkDLQURL, "")
	t.Setenv(settings.EnvWorkDLQName, "")
	chain := errors.New("failed to refresh cached credentials, no EC2 IMDS role found, operation error ec2imds: GetMetadata")
	failing := aws.Config{Region: "us-east-1", Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{}, chain
	})}
	for name, cfg := range map[string]aws.Config{"failing provider": failing, "no provider": {Region: "us-east-1"}} {
		t.Run(name, func(t *testing.T) {
			_, err := NewWorkerFromEnv(t.Context(), WorkerConfig{AWS: cfg, Handlers: NewHandlers()})
			if err == nil {
				t.Fatal("NewWorkerFromEnv without credentials succeeded")
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") || strings.Contains(msg, "IMDS") ||
				!strings.Contains(msg, "AWS_PROFILE") || !strings.Contains(msg, "AWS_ACCESS_KEY_ID") {
				t.Errorf("error %q: want one line naming AWS_PROFILE and AWS_ACCESS_KEY_ID, without the provider chain", msg)
			}
			var ce *CredentialsError
			if !errors.Is(err, ErrConfig) || !errors.As(err, &ce) {
				t.Errorf("error %v: want ErrConfig and a *CredentialsError", err)
			}
			if cfg.Credentials != nil && !errors.Is(err, chain) {
				t.Errorf("error %v: the provider's error is not reachable", err)
			}
		})
	}
}
