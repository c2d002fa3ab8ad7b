package leaseholdtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/workflow"
)

// TestReplayPredictsTheHold (issue 35, point 3): for every change that
// diverges under a task in flight, the replay of the task's exported
// history through the new code reports the divergence the worker then
// holds the task for, and through the old code reports none; a replay
// runs no step's function and changes nothing in the store.
func TestReplayPredictsTheHold(t *testing.T) {
	for _, ch := range divergingChanges() {
		t.Run(ch.name, func(t *testing.T) {
			hs, d, c := ch.handlers()
			env := leaseholdtest.New(t, hs)
			d.v.Store(1)
			id := mustEnqueue(t, env, leasehold.Submission{Kind: "flow"})
			// The task's waits: the callback case's, the map's first wave
			// (its parent and ten children delivered), a sleep.
			replayWant := ch.want
			switch ch.name {
			case "the awaited callback renamed":
				mustRun(t, env)
				replayWant = `recorded "callback:approval" (callback), which the task waits in, the code asked for "callback:approve" (callback)`
			case "a map reshaped between its waves":
				env.SetMaxDeliveries(12)
				if err := env.Run(); err == nil {
					t.Fatal("Run under the bound finished the map")
				}
				replayWant = `the code asked for "map:items" (map 40/20)`
			default:
				env.SetMaxDeliveries(1)
				if err := env.Run(); !errors.Is(err, leaseholdtest.ErrTooManyDeliveries) {
					t.Fatalf("Run of one delivery: %v", err)
				}
			}
			hist := mustHistory(t, env, id)
			ran := c.total()

			if line, err := hs.Replay(t.Context(), hist); err != nil || !strings.HasPrefix(line, "ok ") {
				t.Fatalf("replay through the code that recorded it: %q, %v; want ok", line, err)
			}
			d.v.Store(2)
			line, err := hs.Replay(t.Context(), hist)
			if err == nil || !strings.HasPrefix(line, "DIVERGED ") || !strings.Contains(err.Error(), replayWant) {
				t.Fatalf("replay through the changed code: %q, %v; want DIVERGED with %q", line, err, replayWant)
			}
			if c.total() != ran {
				t.Errorf("the replays ran %d step functions or callbacks' submits, want none", c.total()-ran)
			}
			if after := mustHistory(t, env, id); !bytes.Equal(after, hist) {
				t.Errorf("the replays changed the task:\n%s\nwant\n%s", after, hist)
			}

			// The worker, given the changed code, holds the task as the
			// replay said it would.
			env.SetMaxDeliveries(10000)
			if ch.name == "the awaited callback renamed" {
				tok, err := env.CallbackToken(id)
				if err != nil {
					t.Fatal(err)
				}
				if err := env.CompleteCallback(tok, "yes"); err != nil {
					t.Fatal(err)
				}
				// Once answered, the history records the callback: the
				// replay's divergence is the live one word for word.
				if _, err := hs.Replay(t.Context(), mustHistory(t, env, id)); err == nil || !strings.Contains(err.Error(), ch.want) {
					t.Fatalf("replay of the answered callback: %v, want %q", err, ch.want)
				}
			}
			mustRun(t, env)
			checkHeld(t, env, id, ch.want, c, nil)
		})
	}
}

// TestReplayOfGuardedChanges: the changes of TestVersionGuardsAChange,
// guarded by workflow.Version, replay the histories recorded before them
// without a divergence; the same change unguarded does not.
func TestReplayOfGuardedChanges(t *testing.T) {
	var guarded, v2 bool
	hs := leasehold.NewHandlers()
	c := &counter{}
	leasehold.Handle(hs, "flow", func(ctx context.Context, _ *leasehold.Task[struct{}]) (string, error) {
		step := func(name string) error {
			_, err := workflow.Step(ctx, name, func(context.Context) (string, error) { c.add(name); return name, nil })
			return err
		}
		validate := v2
		if v2 && guarded {
			v, err := workflow.Version(ctx, "validate-first", 1)
			if err != nil {
				return "", err
			}
			validate = v == 1
		}
		if validate {
			if err := step("validate"); err != nil {
				return "", err
			}
		}
		if err := step("summarize"); err != nil {
			return "", err
		}
		if err := workflow.Sleep(ctx, time.Hour); err != nil {
			return "", err
		}
		return "done", step("send")
	})
	env := leaseholdtest.New(t, hs)
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "flow"})
	env.SetMaxDeliveries(1)
	if err := env.Run(); !errors.Is(err, leaseholdtest.ErrTooManyDeliveries) {
		t.Fatalf("Run of one delivery: %v", err)
	}
	hist := mustHistory(t, env, id)
	v2 = true
	if _, err := hs.Replay(t.Context(), hist); err == nil || !strings.Contains(err.Error(), `the code asked for step string "validate"`) {
		t.Fatalf("unguarded: %v, want a divergence at validate", err)
	}
	guarded = true
	line, err := hs.Replay(t.Context(), hist)
	if err != nil || !strings.Contains(line, "replayed 2 recorded operations") {
		t.Fatalf("guarded: %q, %v; want both operations replayed", line, err)
	}
	// And the worker agrees: the task goes on along its old path.
	env.SetMaxDeliveries(10000)
	mustRun(t, env)
	if got := mustTask(t, env, id); got.Status != leasehold.StatusSucceeded || c.get("validate") != 0 || c.get("summarize") != 1 {
		t.Fatalf("guarded, live: %s %q, validate %d, summarize %d", got.Status, got.Error, c.get("validate"), c.get("summarize"))
	}
}

// TestReplayReports: what a replay says beside a divergence: a handler
// that fails outside its durable calls, a kind with no handler, a task
// sleeping at its last recorded operation, and files that are not
// histories this build reads.
func TestReplayReports(t *testing.T) {
	var fail bool
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "nap", func(ctx context.Context, _ *leasehold.Task[struct{}]) (string, error) {
		if fail {
			return "", errors.New("boom")
		}
		if _, err := workflow.Step(ctx, "a", func(context.Context) (int, error) { return 1, nil }); err != nil {
			return "", err
		}
		return "done", workflow.Sleep(ctx, time.Hour)
	})
	env := leaseholdtest.New(t, hs)
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "nap"})
	mustRun(t, env) // it sleeps: Run advances the fake clock past the hour
	env.SetMaxDeliveries(1)
	id2 := mustEnqueue(t, env, leasehold.Submission{Kind: "nap"})
	if err := env.Run(); !errors.Is(err, leaseholdtest.ErrTooManyDeliveries) {
		t.Fatalf("Run of one delivery: %v", err)
	}
	hist := mustHistory(t, env, id2)
	// Read before its wake-up (Run has moved the fake clock to it), the
	// sleep waits in the replay as it would in a live run.
	var h map[string]any
	if err := json.Unmarshal(hist, &h); err != nil {
		t.Fatal(err)
	}
	h["exported"] = leaseholdtest.Start.Format(time.RFC3339Nano)
	early, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	line, err := hs.Replay(t.Context(), early)
	if err != nil || !strings.Contains(line, "replayed 2 recorded operations; waits: sleep#1 until") {
		t.Errorf("sleeping: %q, %v", line, err)
	}
	line, err = hs.Replay(t.Context(), hist)
	if err != nil || !strings.Contains(line, "replayed 2 recorded operations; then the handler returns") {
		t.Errorf("woken: %q, %v", line, err)
	}
	if line, err := hs.Replay(t.Context(), mustHistory(t, env, id)); err != nil || !strings.Contains(line, "replayed 2 recorded operations") {
		t.Errorf("ended: %q, %v", line, err)
	}
	fail = true
	if _, err := hs.Replay(t.Context(), hist); err == nil || !strings.Contains(err.Error(), "FAILED") || !strings.Contains(err.Error(), "boom") {
		t.Errorf("failing handler: %v, want FAILED with its error", err)
	}
	if _, err := leasehold.NewHandlers().Replay(t.Context(), hist); err == nil || !strings.Contains(err.Error(), `no handler for kind "nap" in this build`) {
		t.Errorf("no handler: %v", err)
	}
	for _, bad := range []string{`{}`, `{"leasehold_history":2,"id":"x","kind":"k","steps":[]}`, `{"leasehold_history":1,"id":"x","kind":"k","steps":[],"extra":1}`, `not json`} {
		if _, err := hs.Replay(t.Context(), []byte(bad)); err == nil || !strings.Contains(err.Error(), "not a leasehold history") {
			t.Errorf("%s: %v, want it refused", bad, err)
		}
	}
}

// TestReplayFiles: Replay runs each history file of a directory as a
// subtest.
func TestReplayFiles(t *testing.T) {
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "nap", func(ctx context.Context, _ *leasehold.Task[struct{}]) (string, error) {
		return "done", workflow.Sleep(ctx, time.Hour)
	})
	env := leaseholdtest.New(t, hs)
	env.SetMaxDeliveries(2)
	dir := t.TempDir()
	for range 2 {
		id := mustEnqueue(t, env, leasehold.Submission{Kind: "nap"})
		_ = env.Run()
		if err := os.WriteFile(filepath.Join(dir, id+".json"), mustHistory(t, env, id), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	leaseholdtest.Replay(t, hs, dir)
}

func mustHistory(t *testing.T, env *leaseholdtest.Env, id string) []byte {
	t.Helper()
	b, err := env.History(id)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// total is the sum of c's counts.
func (c *counter) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.n {
		n += v
	}
	return n
}

// A history whose payload (200 KB) and step result (100 KB) are in the
// payload bucket (the Env's, in memory) replays: Env.History carries the
// values with their references, and the replay answers the handler's
// reads from them, checking each against its digest. A file without the
// values fails the replay, naming the bucket's setting.
func TestReplayReadsThePayloadBucket(t *testing.T) {
	payload := strings.Repeat("p", 200_000)
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "big", func(ctx context.Context, task *leasehold.Task[string]) (int, error) {
		if task.Payload != payload {
			return 0, fmt.Errorf("payload of %d bytes, want %d", len(task.Payload), len(payload))
		}
		r, err := workflow.Step(ctx, "fetch", func(context.Context) (string, error) { return strings.Repeat("r", 100_000), nil })
		if err != nil {
			return 0, err
		}
		if len(r) != 100_000 {
			return 0, fmt.Errorf("step result of %d bytes, want 100000", len(r))
		}
		if err := workflow.Sleep(ctx, time.Hour); err != nil {
			return 0, err
		}
		return len(r), nil
	})
	env := leaseholdtest.New(t, hs)
	id := mustEnqueue(t, env, leasehold.Submission{Kind: "big", Payload: payload})
	env.SetMaxDeliveries(1)
	if err := env.Run(); !errors.Is(err, leaseholdtest.ErrTooManyDeliveries) {
		t.Fatalf("Run of one delivery: %v", err)
	}
	hist := mustHistory(t, env, id)
	line, err := hs.Replay(t.Context(), hist)
	if err != nil || !strings.Contains(line, "replayed 2 recorded operations") {
		t.Fatalf("replay: %q, %v; want both operations replayed", line, err)
	}
	var file map[string]json.RawMessage
	if err := json.Unmarshal(hist, &file); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(file["payload"], []byte("leasehold-blob")) || len(file["blobs"]) < 300_000 {
		t.Fatalf("the file's payload %.60s, blobs of %d bytes; want a reference and both values", file["payload"], len(file["blobs"]))
	}
	delete(file, "blobs")
	bare, err := json.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hs.Replay(t.Context(), bare); err == nil || !strings.Contains(err.Error(), "LEASEHOLD_PAYLOAD_BUCKET") {
		t.Fatalf("a file without the values: %v, want a failure naming LEASEHOLD_PAYLOAD_BUCKET", err)
	}
}
