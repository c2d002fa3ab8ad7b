package dispatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/leasehold/leasehold/internal/dispatch"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/query"
	"github.com/leasehold/leasehold/settings"
)

func TestEnqueueThousands(t *testing.T) {
	t.Parallel()
	e := setupUnit(t)
	const n = 2500
	tasks := make([]lease.NewTask, n)
	for i := range tasks {
		tasks[i] = lease.NewTask{ID: fmt.Sprintf("bulk-%05d", i), Kind: "k", Payload: []byte(fmt.Sprintf(`{"i":%d}`, i))}
	}
	tasks[7].ID, tasks[7].Payload = tasks[3].ID, tasks[3].Payload // a duplicate within the batch
	tasks[100].Kind = ""                                          // invalid
	tasks[200].RunAt = e.clock.Now().Add(10 * time.Minute)        // delayed within SQS's cap
	tasks[300].RunAt = e.clock.Now().Add(2 * time.Hour)           // left to the sweep
	tasks[400].MaxAttempts = 9                                    // kept
	res, err := dispatch.Enqueue(t.Context(), e.store, e.sqs, workQueue, tasks, func(c *dispatch.Config) { c.Clock = e.clock })
	if !errors.Is(err, dispatch.ErrIncomplete) {
		t.Fatalf("Enqueue error %v, want ErrIncomplete for the invalid task", err)
	}
	if len(res) != n {
		t.Fatalf("%d results for %d tasks", len(res), n)
	}
	for i, r := range res {
		switch i {
		case 100:
			if !errors.Is(r.Err, lease.ErrInvalid) || r.Sent {
				t.Fatalf("invalid task: %+v", r)
			}
			continue
		case 300:
			if r.Err != nil || r.Sent || !r.Task.DispatchAt.Equal(r.Task.RunAt) {
				t.Fatalf("task due in 2h: %+v", r)
			}
			continue
		}
		if r.Err != nil || !r.Sent || r.Task.ID != tasks[i].ID {
			t.Fatalf("result %d: %+v", i, r)
		}
	}
	// A task whose token went first is not in the sweep index; the one
	// due in 2 hours is, at its start.
	for i, r := range res {
		if i != 100 && i != 300 && !r.Task.DispatchAt.IsZero() {
			t.Fatalf("task %d, sent before its create, has a sweep entry at %s", i, r.Task.DispatchAt)
		}
	}
	if !res[3].Duplicate && !res[7].Duplicate {
		t.Fatalf("neither copy of a duplicated id is reported as a duplicate")
	}
	if res[400].Task.MaxAttempts != 9 || res[0].Task.MaxAttempts != 5 {
		t.Fatalf("max attempts %d and %d, want 9 and the default 5", res[400].Task.MaxAttempts, res[0].Task.MaxAttempts)
	}
	tokens := e.sqs.take()
	if len(tokens) != n-2 {
		t.Fatalf("%d tokens, want %d", len(tokens), n-2)
	}
	for _, tk := range tokens {
		// Each token went out before its task was stored, carrying it.
		if tk.CreateToken == "" {
			t.Fatalf("token of %s has no create token", tk.ID)
		}
		if want := int32(0); tk.ID == tasks[200].ID {
			want = 600
			if tk.Delay != want {
				t.Fatalf("delay %d for the delayed task, want %d", tk.Delay, want)
			}
		} else if tk.Delay != want {
			t.Fatalf("delay %d for %s", tk.Delay, tk.ID)
		}
	}
	e.sqs.mu.Lock()
	defer e.sqs.mu.Unlock()
	if calls := len(e.sqs.batches); calls < (n-2+9)/10 || calls > (n-2+9)/10+(n/200) {
		t.Fatalf("%d SendMessageBatch calls for %d tokens", calls, n-2)
	}
}

func TestEnqueueSendFailureKeepsTheTask(t *testing.T) {
	t.Parallel()
	e := setupUnit(t)
	e.sqs.set(func(f *fakeSQS) { f.failIDs["b"] = true })
	res, err := e.d.Enqueue(t.Context(), []lease.NewTask{{ID: "a", Kind: "k"}, {ID: "b", Kind: "k"}})
	if !errors.Is(err, dispatch.ErrIncomplete) {
		t.Fatalf("error %v", err)
	}
	if res[0].Err != nil || !res[0].Sent {
		t.Fatalf("a: %+v", res[0])
	}
	if !errors.Is(res[1].Err, dispatch.ErrSend) || res[1].Sent || res[1].Task.Status != lease.StatusPending {
		t.Fatalf("b: %+v", res[1])
	}
	// a's token went before its create, so a is not in the sweep index; b,
	// whose tokens (before and after the create) were both refused, is.
	if !res[0].Task.DispatchAt.IsZero() || res[1].Task.DispatchAt.IsZero() {
		t.Fatalf("sweep entries: a %s, b %s; want none for a and one for b", res[0].Task.DispatchAt, res[1].Task.DispatchAt)
	}
	// Enqueueing again sends the token for the stored task.
	e.sqs.set(func(f *fakeSQS) { clear(f.failIDs) })
	res, err = e.d.Enqueue(t.Context(), []lease.NewTask{{ID: "b", Kind: "k"}})
	if err != nil || !res[0].Duplicate || !res[0].Sent {
		t.Fatalf("again: %+v, %v", res[0], err)
	}
}

func TestEnqueueCancelledContext(t *testing.T) {
	t.Parallel()
	e := setupUnit(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	res, err := e.d.Enqueue(ctx, []lease.NewTask{{ID: "a", Kind: "k"}, {ID: "b", Kind: "k"}})
	if !errors.Is(err, dispatch.ErrIncomplete) {
		t.Fatalf("error %v", err)
	}
	for _, r := range res {
		if r.Err == nil || r.Sent {
			t.Fatalf("result %+v under a cancelled context", r)
		}
	}
}

func TestEnqueueRejectsConfig(t *testing.T) {
	t.Parallel()
	e := setupUnit(t)
	if _, err := dispatch.Enqueue(t.Context(), e.store, e.sqs, "", nil); !errors.Is(err, dispatch.ErrConfig) {
		t.Fatalf("no queue URL: %v", err)
	}
	if _, err := dispatch.Enqueue(t.Context(), nil, e.sqs, workQueue, nil); !errors.Is(err, dispatch.ErrConfig) {
		t.Fatalf("no store: %v", err)
	}
}

func TestNewRejectsConfig(t *testing.T) {
	t.Parallel()
	e := setupUnit(t)
	base := dispatch.Config{Store: e.store, SQS: e.sqs, WorkQueueURL: workQueue}
	cases := map[string]func(*dispatch.Config){
		"no store":           func(c *dispatch.Config) { c.Store = nil },
		"no sqs":             func(c *dispatch.Config) { c.SQS = nil },
		"no queue":           func(c *dispatch.Config) { c.WorkQueueURL = "" },
		"negative grace":     func(c *dispatch.Config) { c.DispatchGrace = -time.Second },
		"too many attempts":  func(c *dispatch.Config) { c.DefaultMaxAttempts = lease.MaxAttemptsLimit + 1 },
		"negative conc":      func(c *dispatch.Config) { c.Concurrency = -1 },
		"page size too big":  func(c *dispatch.Config) { c.SweepPageSize = query.MaxDueLimit + 1 },
		"negative timeout":   func(c *dispatch.Config) { c.CallTimeout = -time.Second },
		"negative sweep con": func(c *dispatch.Config) { c.SweepConcurrency = -2 },
	}
	for name, mod := range cases {
		cfg := base
		mod(&cfg)
		if _, err := dispatch.New(cfg); !errors.Is(err, dispatch.ErrConfig) {
			t.Errorf("%s: error %v, want ErrConfig", name, err)
		}
	}
	if _, err := dispatch.New(base); err != nil {
		t.Fatalf("valid config: %v", err)
	}
}

func TestHandleRoutesByEventShape(t *testing.T) {
	t.Parallel()
	e := setupUnit(t)
	read := func(name string) json.RawMessage {
		t.Helper()
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	out, err := e.d.Handle(t.Context(), read("intake-event.json"))
	if err != nil {
		t.Fatalf("Handle(SQS event): %v", err)
	}
	resp, ok := out.(events.SQSEventResponse)
	if !ok {
		t.Fatalf("Handle(SQS event) = %T, want events.SQSEventResponse", out)
	}
	if fails := failures(resp); len(fails) != 0 {
		t.Fatalf("failures %v, want none", fails)
	}
	if dl := e.sqs.deadLetters(); len(dl) != 1 {
		t.Fatalf("%d dead letters, want the submission without a kind", len(dl))
	}
	const now, later = "b2f7c9d4-5e3a-4c1b-9f80-7a6d5c4b3e21", "report-2031-03"
	if got := tokenIDs(e.sqs.take()); len(got) != 1 || got[now] != 1 {
		t.Fatalf("tokens %v, want one for the task due now", got)
	}

	// Twenty minutes on, both are due in the sweep index: the delayed one
	// at its start, the other because it was never claimed.
	e.clock.Advance(20 * time.Minute)
	out, err = e.d.Handle(t.Context(), read("scheduled-event.json"))
	if err != nil {
		t.Fatalf("Handle(scheduled event): %v", err)
	}
	if st, ok := out.(dispatch.SweepStats); !ok || st.Dispatched != 2 {
		t.Fatalf("Handle(scheduled event) = %#v, want SweepStats with 2 dispatched", out)
	}
	if got := tokenIDs(e.sqs.take()); got[later] != 1 || got[now] != 1 {
		t.Fatalf("tokens %v", got)
	}

	for _, bad := range []string{`[]`, `{}`, `{"Records":[{"eventSource":"aws:s3"}]}`, `{"source":"aws.events","detail-type":"Object Created"}`} {
		if _, err := e.d.Handle(t.Context(), json.RawMessage(bad)); !errors.Is(err, dispatch.ErrUnknownEvent) {
			t.Errorf("Handle(%s): error %v, want ErrUnknownEvent", bad, err)
		}
	}
}

func TestSettingsFromEnv(t *testing.T) {
	t.Parallel()
	full := map[string]string{
		settings.EnvTable: "tasks", settings.EnvWorkQueueURL: "https://q/work", settings.EnvIntakeDLQURL: "https://q/dlq",
		settings.EnvDispatchGrace: "90s", settings.EnvMaxAttempts: "7", settings.EnvDispatchConcurrency: "12", settings.EnvSweepConcurrency: "3",
		settings.EnvNamedQueues: "arn:aws:sqs:us-east-1:1:images, https://q/reports",
	}
	s, err := dispatch.SettingsFrom(func(k string) string { return full[k] })
	if err != nil {
		t.Fatal(err)
	}
	want := dispatch.Settings{Table: "tasks", QueueURL: "https://q/work", IntakeDLQURL: "https://q/dlq",
		DispatchGrace: 90 * time.Second, MaxAttempts: 7, DispatchConcurrency: 12, SweepConcurrency: 3,
		NamedQueues: []string{"arn:aws:sqs:us-east-1:1:images", "https://q/reports"}}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("settings %+v, want %+v", s, want)
	}
	if g := s.StoreOptions().DispatchGrace; g != 90*time.Second {
		t.Fatalf("store grace %s", g)
	}
	for _, c := range []struct{ env, value, mention string }{
		{settings.EnvTable, "", settings.EnvTable},
		{settings.EnvWorkQueueURL, "", settings.EnvWorkQueueURL},
		{settings.EnvDispatchGrace, "2", settings.EnvDispatchGrace},
		{settings.EnvDispatchGrace, "-1m", settings.EnvDispatchGrace},
		{settings.EnvDispatchGrace, "0s", settings.EnvDispatchGrace},
		{settings.EnvListing, "maybe", settings.EnvListing},
		{settings.EnvLogLevel, "LOUD", settings.EnvLogLevel},
		{settings.EnvMaxAttempts, "many", settings.EnvMaxAttempts},
		{settings.EnvDispatchConcurrency, "0", settings.EnvDispatchConcurrency},
	} {
		env := map[string]string{}
		for k, v := range full {
			env[k] = v
		}
		env[c.env] = c.value
		_, err := dispatch.SettingsFrom(func(k string) string { return env[k] })
		if !errors.Is(err, dispatch.ErrConfig) || !strings.Contains(err.Error(), c.mention) {
			t.Errorf("%s=%q: error %v", c.env, c.value, err)
		}
	}
}

// stallingSQS takes the first batch but answers it only after the call's
// deadline, as a queue too slow for the call timeout does.
type stallingSQS struct {
	*fakeSQS
	calls atomic.Int32
}

func (s *stallingSQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	out, err := s.fakeSQS.SendMessageBatch(ctx, in, opts...)
	if s.calls.Add(1) == 1 && err == nil {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return out, err
}

// A batch whose call timed out is sent again, not reported as unsent.
func TestEnqueueSendsAgainAfterNoAnswer(t *testing.T) {
	t.Parallel()
	var stalling *stallingSQS
	e := setupUnit(t, func(c *dispatch.Config) {
		stalling = &stallingSQS{fakeSQS: c.SQS.(*fakeSQS)}
		c.SQS = stalling
		c.CallTimeout = 100 * time.Millisecond
	})
	res, err := e.d.Enqueue(t.Context(), []lease.NewTask{{ID: "a", Kind: "k"}})
	if err != nil || res[0].Err != nil || !res[0].Sent {
		t.Fatalf("Enqueue whose first send got no answer: %+v, %v; want it sent", res[0], err)
	}
	if n := stalling.calls.Load(); n != 2 {
		t.Errorf("%d SendMessageBatch calls, want 2: the unanswered one and its retry", n)
	}
}
