package schedule

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/jonboulle/clockwork"

	"github.com/leasehold/leasehold/internal/defaults"
)

// SQS is the one call the firer makes, with the SDK's signature.
type SQS interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// Fired is one slot sent to its queue.
type Fired struct {
	Name   string    // the schedule
	Slot   time.Time // the slot's time
	TaskID string    // TaskID(Name, Slot)
}

// Config is what Run needs.
type Config struct {
	SQS SQS
	// QueueURL is the work queue, where the token of a spec without a
	// Queue goes.
	QueueURL string
	// QueueURLOf looks up the URL of a spec's Queue; needed only when a
	// spec names one.
	QueueURLOf func(ctx context.Context, name string) (string, error)
	// Specs are fixed schedules.
	Specs []Spec
	// List, when set, returns more schedules (say, those stored in
	// EventBridge Scheduler); Run calls it at the start and every
	// RefreshEvery (default 30s). A failed list keeps the previous ones.
	List         func(ctx context.Context) ([]Spec, error)
	RefreshEvery time.Duration
	// CallTimeout bounds each SQS send and each List (default
	// defaults.ClientCallTimeout, 10s).
	CallTimeout time.Duration
	// Tolerance: see Spec.Due (default DefaultTolerance).
	Tolerance time.Duration
	// RetryAfter is the wait after a failed send before the schedule is
	// decided again (default 2s).
	RetryAfter time.Duration
	Clock      clockwork.Clock
	Logger     *slog.Logger
	// OnFire, when set, is called after each slot is sent, from Run's
	// goroutine.
	OnFire func(Fired)
}

func (c *Config) defaults() error {
	if c.SQS == nil || c.QueueURL == "" {
		return fmt.Errorf("%w: the firer needs an SQS client and the work queue URL", ErrInvalid)
	}
	if c.Specs == nil && c.List == nil {
		return fmt.Errorf("%w: no schedules to fire", ErrInvalid)
	}
	for _, s := range c.Specs {
		if err := s.Validate(); err != nil {
			return err
		}
		if s.Queue != "" && c.QueueURLOf == nil {
			return fmt.Errorf("%w: schedule %s names queue %s, and the firer cannot look queues up", ErrInvalid, s.Name, s.Queue)
		}
	}
	if c.RefreshEvery <= 0 {
		c.RefreshEvery = 30 * time.Second
	}
	if c.CallTimeout <= 0 {
		c.CallTimeout = defaults.ClientCallTimeout
	}
	if c.RetryAfter <= 0 {
		c.RetryAfter = 2 * time.Second
	}
	if c.Clock == nil {
		c.Clock = clockwork.NewRealClock()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// state is what the firer remembers of one schedule.
type state struct {
	spec    Spec
	last    time.Time // the previous decision; zero before the first
	retryAt time.Time // after a failed send: not before this
}

// Run fires the schedules' slots until ctx ends, then returns nil; it
// returns an error only for a bad Config. It runs in the caller's
// goroutine and starts none: the caller owns it, stops it by cancelling ctx
// and has joined it when Run returns. Each slot's token is the inline token
// EventBridge Scheduler would send (Spec.Body), so a slot fired twice, here
// and there or twice here, starts one task.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.defaults(); err != nil {
		return err
	}
	f := &firer{cfg: cfg, states: map[string]*state{}}
	f.setSpecs(nil)
	var nextList time.Time
	for {
		now := cfg.Clock.Now()
		if cfg.List != nil && !now.Before(nextList) {
			f.refresh(ctx)
			nextList = now.Add(cfg.RefreshEvery)
		}
		for _, name := range f.order {
			f.fire(ctx, f.states[name], now)
			if ctx.Err() != nil {
				return nil
			}
		}
		wake := f.wake(now)
		if cfg.List != nil && (wake.IsZero() || nextList.Before(wake)) {
			wake = nextList
		}
		if wake.IsZero() {
			<-ctx.Done()
			return nil
		}
		timer := cfg.Clock.NewTimer(max(wake.Sub(cfg.Clock.Now()), 0))
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-timer.Chan():
		}
	}
}

// Start checks cfg, then runs Run in a goroutine of its own until ctx ends
// or stop is called. stop cancels it and returns once it has returned; it
// may be called more than once. A bad Config is returned at once and
// nothing is started.
func Start(ctx context.Context, cfg Config) (stop func(), err error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = Run(ctx, cfg) // cfg is checked: Run's only error
	}()
	return func() {
		cancel()
		<-done
	}, nil
}

type firer struct {
	cfg    Config
	states map[string]*state
	order  []string // names, fixed specs first, for a stable firing order
}

// setSpecs installs the fixed specs and listed, keeping the state of the
// schedules that stay. A listed schedule named like a fixed one is left out.
func (f *firer) setSpecs(listed []Spec) {
	old := f.states
	f.states, f.order = map[string]*state{}, nil
	add := func(s Spec, fixed bool) {
		if _, dup := f.states[s.Name]; dup {
			if !fixed {
				f.cfg.Logger.Warn("listed schedule ignored: a schedule of that name is given to the runner", "schedule", s.Name)
			}
			return
		}
		st := &state{spec: s}
		if prev, ok := old[s.Name]; ok && prev.spec.Expr.String() == s.Expr.String() {
			st.last, st.retryAt = prev.last, prev.retryAt
		}
		f.states[s.Name] = st
		f.order = append(f.order, s.Name)
	}
	for _, s := range f.cfg.Specs {
		add(s, true)
	}
	for _, s := range listed {
		add(s, false)
	}
}

func (f *firer) refresh(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, f.cfg.CallTimeout)
	listed, err := f.cfg.List(cctx)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			f.cfg.Logger.Warn("could not list the schedules; firing the ones known", "error", err)
		}
		return
	}
	var ok []Spec
	for _, s := range listed {
		if err := s.Validate(); err != nil {
			f.cfg.Logger.Warn("schedule skipped", "schedule", s.Name, "error", err)
			continue
		}
		if s.Queue != "" && f.cfg.QueueURLOf == nil {
			f.cfg.Logger.Warn("schedule skipped: it names a queue and the firer cannot look queues up", "schedule", s.Name)
			continue
		}
		ok = append(ok, s)
	}
	f.setSpecs(ok)
}

// fire sends the slots due at now. After a failure the schedule is decided
// again from the same point after RetryAfter: the slots already sent are
// sent again, which starts no second task.
func (f *firer) fire(ctx context.Context, st *state, now time.Time) {
	if now.Before(st.retryAt) {
		return
	}
	for _, slot := range st.spec.Due(st.last, now, f.cfg.Tolerance) {
		if err := f.send(ctx, st.spec, slot); err != nil {
			if ctx.Err() == nil {
				f.cfg.Logger.Warn("schedule slot not sent; trying again", "schedule", st.spec.Name, "slot", slot.UTC(),
					"task_id", TaskID(st.spec.Name, slot), "error", err, "retry_in", f.cfg.RetryAfter)
			}
			st.retryAt = now.Add(f.cfg.RetryAfter)
			return
		}
		fired := Fired{Name: st.spec.Name, Slot: slot, TaskID: TaskID(st.spec.Name, slot)}
		f.cfg.Logger.Info("schedule fired", "schedule", fired.Name, "slot", slot.UTC(), "task_id", fired.TaskID, "late", now.Sub(slot).Round(time.Millisecond).String())
		if f.cfg.OnFire != nil {
			f.cfg.OnFire(fired)
		}
	}
	st.last = now
	st.retryAt = time.Time{}
}

func (f *firer) send(ctx context.Context, s Spec, slot time.Time) error {
	body, err := s.Body(slot)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, f.cfg.CallTimeout)
	defer cancel()
	url := f.cfg.QueueURL
	if s.Queue != "" {
		if url, err = f.cfg.QueueURLOf(ctx, s.Queue); err != nil {
			return fmt.Errorf("look up queue %s: %w", s.Queue, err)
		}
	}
	_, err = f.cfg.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(body)})
	if err != nil {
		return fmt.Errorf("send the token of %s: %w", TaskID(s.Name, slot), err)
	}
	return nil
}

// wake is when the next slot of any schedule falls due, or a failed one is
// tried again; zero when none will.
func (f *firer) wake(now time.Time) time.Time {
	var wake time.Time
	for _, st := range f.states {
		var t time.Time
		if now.Before(st.retryAt) {
			t = st.retryAt
		} else {
			next, ok := st.spec.Expr.Next(st.last, st.spec.Anchor, st.spec.Location)
			if !ok {
				continue
			}
			t = next
		}
		if wake.IsZero() || t.Before(wake) {
			wake = t
		}
	}
	return wake
}
