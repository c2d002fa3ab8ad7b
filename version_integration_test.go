package leasehold_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/workflow"
)

// versionChange is one change of docs/versioning.md, deployed on the
// stack under a task in flight.
type versionChange struct {
	kind string
	// code is the workflow under code version v: 1 before the deploy, 2
	// after it.
	code func(ctx context.Context, v int32, r versionRun) (string, error)
	// atWait says the task in flight under code 1 is suspended at its
	// wait (a sleep, a callback, a map's wave): the deploy happens then.
	atWait func(lease.Task) bool
	// oldPath and newPath are the results of the task in flight and of a
	// task started after the deploy; oldEffects and newEffects, the side
	// effects each runs, every one of them once.
	oldPath, newPath       string
	oldEffects, newEffects []string
	// held, for a change deployed without its guard, is the divergence
	// the task in flight is held with instead (no new task is started).
	held string
}

// versionRun is what a run of a change's code counts its side effects
// and hands its callback token out with.
type versionRun struct {
	id     string
	count  func(name string) func(context.Context) (string, error)
	tokens *sync.Map // task id → callback token
}

// effect counts the side effect name of r's task.
func (r versionRun) effect(ctx context.Context, name string) {
	_, _ = r.count(r.id + " " + name)(ctx)
}

// step is a durable step whose function counts its side effect.
func (r versionRun) step(ctx context.Context, name string) error {
	_, err := workflow.Step(ctx, name, r.count(r.id+" "+name))
	return err
}

// nap is the wait a change's task in flight is deployed under: long
// enough that the test sees the task asleep before it wakes.
func (r versionRun) nap(ctx context.Context) error {
	return workflow.Sleep(ctx, awstest.Scale(4*time.Second))
}

// approval waits for a callback named "approval", handing its token out.
func (r versionRun) approval(ctx context.Context) error {
	_, err := workflow.WaitForCallback[string](ctx, "approval", time.Hour, func(_ context.Context, tok string) error {
		r.tokens.Store(r.id, tok)
		return nil
	})
	return err
}

// guard is workflow.Version in the new code; the old code has no guard
// and takes version 0.
func guard(ctx context.Context, v int32, change string) (int, error) {
	if v == 1 {
		return 0, nil
	}
	return workflow.Version(ctx, change, 1)
}

func asleep(t lease.Task) bool {
	return t.Status == lease.StatusPending && slices.ContainsFunc(t.Steps, func(s lease.Step) bool { return s.Name == "sleep#1" })
}

func waiting(t lease.Task) bool { return t.Status == lease.StatusWaiting }

// versionChanges are the changes of docs/versioning.md, each guarded by
// workflow.Version as the page shows, and a rename deployed without its
// guard.
func versionChanges() []versionChange {
	items := func(name string, n int, more ...string) []string {
		for i := range n {
			more = append(more, fmt.Sprintf("%s#%d", name, i))
		}
		return more
	}
	return []versionChange{
		{kind: "add-step", atWait: asleep, code: func(ctx context.Context, v int32, r versionRun) (string, error) {
			ver, err := guard(ctx, v, "validate-first")
			if err != nil {
				return "", err
			}
			out := "summarized"
			if ver >= 1 {
				if err := r.step(ctx, "validate"); err != nil {
					return "", err
				}
				out = "validated and summarized"
			}
			if err := r.step(ctx, "summarize"); err != nil {
				return "", err
			}
			if err := r.nap(ctx); err != nil {
				return "", err
			}
			return out, r.step(ctx, "send")
		}, oldPath: "summarized", newPath: "validated and summarized",
			oldEffects: []string{"summarize", "send"}, newEffects: []string{"validate", "summarize", "send"}},

		{kind: "remove-step", atWait: asleep, code: func(ctx context.Context, v int32, r versionRun) (string, error) {
			if err := r.step(ctx, "a"); err != nil {
				return "", err
			}
			ver, err := guard(ctx, v, "drop-b")
			if err != nil {
				return "", err
			}
			out := "without b"
			if ver == 0 {
				if err := r.step(ctx, "b"); err != nil {
					return "", err
				}
				out = "with b"
			}
			if err := r.nap(ctx); err != nil {
				return "", err
			}
			return out, r.step(ctx, "c")
		}, oldPath: "with b", newPath: "without b",
			oldEffects: []string{"a", "b", "c"}, newEffects: []string{"a", "c"}},

		{kind: "rename-step", atWait: waiting, code: func(ctx context.Context, v int32, r versionRun) (string, error) {
			ver, err := guard(ctx, v, "summarise-spelling")
			if err != nil {
				return "", err
			}
			name := map[int]string{0: "summarize", 1: "summarise"}[ver]
			if err := r.step(ctx, name); err != nil {
				return "", err
			}
			if err := r.approval(ctx); err != nil {
				return "", err
			}
			return name, r.step(ctx, "send")
		}, oldPath: "summarize", newPath: "summarise",
			oldEffects: []string{"summarize", "send"}, newEffects: []string{"summarise", "send"}},

		{kind: "rename-unguarded", atWait: waiting, code: func(ctx context.Context, v int32, r versionRun) (string, error) {
			name := map[int32]string{1: "summarize", 2: "summarise"}[v]
			if err := r.step(ctx, name); err != nil {
				return "", err
			}
			if err := r.approval(ctx); err != nil {
				return "", err
			}
			return name, r.step(ctx, "send")
		}, held: `held: diverged from its history at operation 1: recorded step string "summarize", the code asked for step string "summarise"`,
			oldEffects: []string{"summarize"}},

		{kind: "change-result-type", atWait: asleep, code: func(ctx context.Context, v int32, r versionRun) (string, error) {
			ver, err := guard(ctx, v, "count-struct")
			if err != nil {
				return "", err
			}
			out := ""
			if ver >= 1 {
				n, err := workflow.Step(ctx, "count-v2", func(ctx context.Context) (struct{ N int }, error) {
					r.effect(ctx, "count-v2")
					return struct{ N int }{3}, nil
				})
				if err != nil {
					return "", err
				}
				out = fmt.Sprint("struct ", n.N)
			} else {
				n, err := workflow.Step(ctx, "count", func(ctx context.Context) (int, error) { r.effect(ctx, "count"); return 3, nil })
				if err != nil {
					return "", err
				}
				out = fmt.Sprint("int ", n)
			}
			return out, r.nap(ctx)
		}, oldPath: "int 3", newPath: "struct 3",
			oldEffects: []string{"count"}, newEffects: []string{"count-v2"}},

		{kind: "reshape-map", atWait: waiting, code: func(ctx context.Context, v int32, r versionRun) (string, error) {
			ver, err := guard(ctx, v, "bigger-waves")
			if err != nil {
				return "", err
			}
			name, n, conc := "items", 6, 2 // three waves
			if ver >= 1 {
				name, n, conc = "items-v2", 4, 4
			}
			res, err := workflow.Map(ctx, name, n, func(i int) workflow.Child {
				return workflow.Child{Kind: "version-item", Payload: fmt.Sprintf("%s %s#%d", r.id, name, i)}
			}, workflow.MapOptions{MaxConcurrency: conc})
			if err != nil {
				return "", err
			}
			return fmt.Sprint(name, " ", res.Succeeded), r.step(ctx, "send")
		}, oldPath: "items 6", newPath: "items-v2 4",
			oldEffects: items("items", 6, "send"), newEffects: items("items-v2", 4, "send")},

		{kind: "insert-sleep", atWait: asleep, code: func(ctx context.Context, v int32, r versionRun) (string, error) {
			if err := r.step(ctx, "a"); err != nil {
				return "", err
			}
			ver, err := guard(ctx, v, "cool-down")
			if err != nil {
				return "", err
			}
			out := "one sleep"
			if ver >= 1 {
				if err := workflow.Sleep(ctx, time.Second); err != nil {
					return "", err
				}
				out = "two sleeps"
			}
			if err := r.nap(ctx); err != nil {
				return "", err
			}
			return out, r.step(ctx, "c")
		}, oldPath: "one sleep", newPath: "two sleeps",
			oldEffects: []string{"a", "c"}, newEffects: []string{"a", "c"}},
	}
}

// TestVersionPatternsOnTheStack (issue 35, point 2): each change of
// docs/versioning.md is deployed on the stack under a task in flight at
// its wait (a sleep, a callback, a map between waves), guarded by
// workflow.Version: the task finishes along its old path with every side
// effect once, and a task started after the deploy takes the new path.
// The same rename without its guard holds its task in flight instead,
// the renamed step never running. All the changes share one table, queue
// and worker, and run at once.
func TestVersionPatternsOnTheStack(t *testing.T) {
	t.Parallel()
	e := setupStack(t)
	c := newClientOn(t, e)
	changes := versionChanges()
	count, runsOf := stepCounter()
	var tokens sync.Map
	hs := leasehold.NewHandlers()
	code := map[string]*atomic.Int32{}
	for _, ch := range changes {
		v := &atomic.Int32{}
		v.Store(1)
		code[ch.kind] = v
		leasehold.Handle(hs, ch.kind, func(ctx context.Context, task *leasehold.Task[any]) (string, error) {
			return ch.code(ctx, v.Load(), versionRun{id: task.ID, count: count, tokens: &tokens})
		})
	}
	leasehold.Handle(hs, "version-item", func(ctx context.Context, task *leasehold.Task[string]) (string, error) {
		return count(task.Payload)(ctx)
	})
	w := e.worker(t, leasehold.WorkerConfig{Handlers: hs})
	ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(4*time.Minute))
	defer cancel()
	enqueue := func(id, kind string) {
		if _, err := c.Enqueue(ctx, leasehold.Submission{Kind: kind, ID: id}); err != nil {
			t.Fatalf("enqueue %s: %v", id, err)
		}
	}
	for _, ch := range changes {
		enqueue(ch.kind+"-old", ch.kind)
	}
	// answer completes the callback of each task waiting on one, once
	// its kind is deployed (the task in flight is answered after the
	// deploy, so its run after the answer is the new code's).
	answered := map[string]bool{}
	answer := func() {
		tokens.Range(func(k, tok any) bool {
			id := k.(string)
			if answered[id] || code[id[:strings.LastIndex(id, "-")]].Load() != 2 || e.status(t, id) != lease.StatusWaiting {
				return true
			}
			// A refusal with the task no longer waiting is an answer that
			// landed but whose reply was lost, and the SDK's retry refused.
			if _, err := c.CompleteCallback(ctx, tok.(string), "approved"); err != nil && e.status(t, id) == lease.StatusWaiting {
				t.Fatalf("answer %s: %v", id, err)
			}
			answered[id] = true
			return true
		})
	}

	// The deploy of each change, once its task in flight is at its wait;
	// a task of the new code is started then.
	e.pumpHiding(t, w, 90*time.Second, 10, func() bool {
		deployed := 0
		for _, ch := range changes {
			if code[ch.kind].Load() == 2 {
				deployed++
				continue
			}
			got := e.get(t, ch.kind+"-old")
			if got.Status.Terminal() {
				t.Fatalf("%s ended (%s) before the test saw it at its wait", got.ID, got.Status)
			}
			if ch.atWait(got) {
				code[ch.kind].Store(2)
				deployed++
				if ch.held == "" {
					enqueue(ch.kind+"-new", ch.kind)
				}
			}
		}
		answer()
		return deployed == len(changes)
	})
	e.pumpHiding(t, w, 120*time.Second, 10, func() bool {
		answer()
		for _, ch := range changes {
			ids := []string{ch.kind + "-old", ch.kind + "-new"}
			if ch.held != "" {
				if got := e.get(t, ids[0]); !strings.HasPrefix(got.Error, "held: diverged") {
					return false
				}
				continue
			}
			for _, id := range ids {
				got := e.get(t, id)
				if got.Status.Terminal() && got.Status != lease.StatusSucceeded || strings.HasPrefix(got.Error, "held:") {
					t.Fatalf("%s: %s %q; want it to go on along its path", id, got.Status, got.Error)
				}
				if got.Status != lease.StatusSucceeded {
					return false
				}
			}
		}
		return true
	})

	runs := runsOf()
	effectsOf := func(id string) map[string]int {
		out := map[string]int{}
		for k, n := range runs {
			if name, ok := strings.CutPrefix(k, id+" "); ok {
				out[name] = n
			}
		}
		return out
	}
	for _, ch := range changes {
		t.Run(ch.kind, func(t *testing.T) {
			old := e.get(t, ch.kind+"-old")
			checkEffects(t, old.ID, effectsOf(old.ID), ch.oldEffects)
			if ch.held != "" {
				if old.Status != lease.StatusPending || !strings.Contains(old.Error, ch.held) {
					t.Errorf("the task in flight under the unguarded change: %s %q; want PENDING, held with %q", old.Status, old.Error, ch.held)
				}
				return
			}
			checkVersionedTask(t, old, ch.oldPath, false)
			fresh := e.get(t, ch.kind+"-new")
			checkVersionedTask(t, fresh, ch.newPath, true)
			checkEffects(t, fresh.ID, effectsOf(fresh.ID), ch.newEffects)
		})
	}
}

// checkVersionedTask checks that task succeeded with the result want,
// with a version recorded in its history if and only if versioned.
func checkVersionedTask(t *testing.T, task lease.Task, want string, versioned bool) {
	t.Helper()
	if task.Status != lease.StatusSucceeded || string(task.Result) != fmt.Sprintf("%q", want) {
		t.Errorf("%s: %s %s %q; want SUCCEEDED %q", task.ID, task.Status, task.Result, task.Error, want)
	}
	names := make([]string, len(task.Steps))
	for i, s := range task.Steps {
		names[i] = s.Name
	}
	if hasVersion := slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, "version:") }); hasVersion != versioned {
		t.Errorf("%s: steps %v; want a version recorded: %t", task.ID, names, versioned)
	}
}

// checkEffects checks that task id ran each side effect of want once,
// and no other.
func checkEffects(t *testing.T, id string, got map[string]int, want []string) {
	t.Helper()
	wantRuns := map[string]int{}
	for _, name := range want {
		wantRuns[name] = 1
	}
	if !maps.Equal(got, wantRuns) {
		t.Errorf("%s: side effects %v; want each of %v once, and no other", id, got, want)
	}
}
