package schedule

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/jonboulle/clockwork"
	"go.uber.org/goleak"

	"github.com/leasehold/leasehold/internal/token"
)

// Every goroutine is joined; the HTTP client's idle keep-alive connections
// of the stack tests are the only ones left.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
	)
}

// fakeSQS records the bodies sent; fail makes the next sends fail.
type fakeSQS struct {
	mu     sync.Mutex
	bodies []string
	fail   int
}

func (f *fakeSQS) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail > 0 {
		f.fail--
		return nil, errors.New("injected send failure")
	}
	f.bodies = append(f.bodies, aws.ToString(in.MessageBody))
	return &sqs.SendMessageOutput{}, nil
}

// runFirer runs Run in a goroutine it joins at the end of the test, and
// returns the channel of fired slots.
func runFirer(t *testing.T, cfg Config) <-chan Fired {
	t.Helper()
	fired := make(chan Fired, 100)
	cfg.OnFire = func(f Fired) { fired <- f }
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return fired
}

func next(t *testing.T, fired <-chan Fired) Fired {
	t.Helper()
	select {
	case f := <-fired:
		return f
	case <-time.After(10 * time.Second):
		t.Fatal("no slot fired")
		return Fired{}
	}
}

func TestRunFiresEachSlotOnItsTime(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 3, 10, 0, 3, 0, time.UTC)
	clock := clockwork.NewFakeClockAt(start)
	e, _ := Parse("rate(10 seconds)", Local)
	q := &fakeSQS{}
	fired := runFirer(t, Config{SQS: q, QueueURL: "http://q", Clock: clock, Tolerance: 2 * time.Second, // 10:00:00 is missed
		Specs: []Spec{{Name: "tick", Expr: e, Kind: "greet", CatchUp: CatchUp{Mode: None}}}})

	for i, want := range []time.Time{start.Add(7 * time.Second), start.Add(17 * time.Second)} {
		// The firer waits on a timer until the slot.
		if err := clock.BlockUntilContext(t.Context(), 1); err != nil {
			t.Fatal(err)
		}
		select {
		case f := <-fired:
			t.Fatalf("slot %d fired before its time: %+v", i, f)
		default:
		}
		clock.Advance(want.Sub(clock.Now()))
		f := next(t, fired)
		if !f.Slot.Equal(want) || f.TaskID != TaskID("tick", want) {
			t.Fatalf("fired %+v, want slot %s", f, want)
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	tok, err := token.Decode(q.bodies[1])
	if err != nil || tok.ID != "sched:tick:2026-12-03T10:00:20Z" || tok.Kind != "greet" {
		t.Fatalf("second body %s: %+v, %v", q.bodies[1], tok, err)
	}
}

func TestRunRetriesAFailedSend(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 3, 10, 0, 9, 0, time.UTC)
	clock := clockwork.NewFakeClockAt(start)
	e, _ := Parse("rate(10 seconds)", Local)
	q := &fakeSQS{fail: 1}
	fired := runFirer(t, Config{SQS: q, QueueURL: "http://q", Clock: clock, RetryAfter: 2 * time.Second,
		Specs: []Spec{{Name: "tick", Expr: e, Kind: "greet", CatchUp: CatchUp{Mode: None}}}})
	if err := clock.BlockUntilContext(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second) // 10:00:10: the send fails
	if err := clock.BlockUntilContext(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Second) // the retry, two seconds late: still on time
	if f := next(t, fired); !f.Slot.Equal(start.Add(time.Second)) {
		t.Fatalf("fired %+v, want the 10:00:10 slot", f)
	}
}

// A runner started after a stop catches up by its policy.
func TestRunCatchesUpOnStart(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 3, 10, 0, 35, 0, time.UTC)
	clock := clockwork.NewFakeClockAt(start)
	e, _ := Parse("rate(10 seconds)", Local)
	fired := runFirer(t, Config{SQS: &fakeSQS{}, QueueURL: "http://q", Clock: clock, Tolerance: 2 * time.Second,
		Specs: []Spec{{Name: "tick", Expr: e, Kind: "greet", CatchUp: CatchUp{Mode: All, Limit: 2}}}})
	for _, want := range []string{"sched:tick:2026-12-03T10:00:20Z", "sched:tick:2026-12-03T10:00:30Z"} {
		if f := next(t, fired); f.TaskID != want {
			t.Fatalf("fired %s, want %s", f.TaskID, want)
		}
	}
}

func TestRunRefusesABadConfig(t *testing.T) {
	t.Parallel()
	e, _ := Parse("rate(1 minute)", AWS)
	for _, cfg := range []Config{
		{},
		{SQS: &fakeSQS{}, QueueURL: "u"},
		{SQS: &fakeSQS{}, QueueURL: "u", Specs: []Spec{{Name: "x", Expr: e}}},
		{SQS: &fakeSQS{}, QueueURL: "u", Specs: []Spec{{Name: "x", Expr: e, Kind: "k", Queue: "other"}}},
	} {
		if err := Run(t.Context(), cfg); !errors.Is(err, ErrInvalid) {
			t.Errorf("Run(%+v) = %v, want ErrInvalid", cfg, err)
		}
	}
}

// Start refuses a bad config at once; stop cancels the firer and returns
// only after it has (goleak checks nothing is left).
func TestStartAndStop(t *testing.T) {
	t.Parallel()
	if stop, err := Start(t.Context(), Config{}); !errors.Is(err, ErrInvalid) || stop != nil {
		t.Fatalf("Start(bad) = %v, want ErrInvalid and no stop", err)
	}
	clock := clockwork.NewFakeClockAt(time.Date(2026, 12, 3, 10, 0, 5, 0, time.UTC))
	e, _ := Parse("rate(10 seconds)", Local)
	q := &fakeSQS{}
	stop, err := Start(t.Context(), Config{SQS: q, QueueURL: "http://q", Clock: clock, Tolerance: time.Second,
		Specs: []Spec{{Name: "tick", Expr: e, Kind: "greet", CatchUp: CatchUp{Mode: None}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := clock.BlockUntilContext(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	stop()
	stop()
	clock.Advance(time.Minute) // nothing fires after stop
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.bodies) != 0 {
		t.Fatalf("sent %v after stop", q.bodies)
	}
}
