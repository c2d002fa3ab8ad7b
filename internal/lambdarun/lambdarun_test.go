package lambdarun

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"
)

func TestStoppingRunsTheHookWithinTheBudgetThenExitsZero(t *testing.T) {
	var out bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&out, nil))
	var (
		ran      bool
		entered  time.Time
		deadline time.Time
		code     = -1
	)
	start := time.Now()
	Stopping(log, func(ctx context.Context) {
		ran, entered = true, time.Now()
		deadline, _ = ctx.Deadline()
		<-ctx.Done() // a hook that would run on: the budget ends it
	}, func(c int) { code = c })
	took := time.Since(start)
	if !ran {
		t.Fatal("the stop hook did not run")
	}
	if deadline.IsZero() || deadline.After(entered.Add(StopBudget)) {
		t.Errorf("the hook's context ends %s after the hook began, want at most %s", deadline.Sub(entered), StopBudget)
	}
	if took < StopBudget {
		t.Errorf("Stopping returned after %s, before the hook's budget of %s ended", took, StopBudget)
	}
	if code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	var line struct{ Msg string }
	if err := json.Unmarshal(out.Bytes(), &line); err != nil || line.Msg == "" {
		t.Fatalf("logged %q, want one JSON line: %v", out.String(), err)
	}
}

func TestStoppingWithoutAHookExitsZero(t *testing.T) {
	code := -1
	Stopping(slog.New(slog.DiscardHandler), nil, func(c int) { code = c })
	if code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
}
