package leaseholdtest

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/claimcheck"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/replay"
)

// Replay replays recorded histories through handlers, the build under
// test, as its check before a deploy: each path is a history file (as
// `leasehold replay --out DIR` and Env.History write them) or a directory
// whose *.json files are. Each history runs as a subtest named by its
// file, with every durable call the history records answered from it and
// nothing run beyond it (no step's function, no read, no write); the
// subtest fails when the code diverges from the history (the worker would
// hold the task: a step renamed, inserted or removed, a result type or an
// await's shape changed, not guarded by workflow.Version) or fails in the
// replay (a recorded result that no longer decodes, say), and logs what
// the replay found otherwise. Paths that hold no history fail t: a check
// that replays nothing proves nothing; skip the call when there is
// nothing to replay.
func Replay(t *testing.T, handlers *leasehold.Handlers, paths ...string) {
	t.Helper()
	if handlers == nil {
		t.Fatal("leaseholdtest.Replay: handlers is nil")
	}
	files, err := historyFiles(paths)
	if err != nil {
		t.Fatalf("leaseholdtest.Replay: %v", err)
	}
	if len(files) == 0 {
		t.Fatalf("leaseholdtest.Replay: no history files in %s", strings.Join(paths, ", "))
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".json"), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			line, err := handlers.Replay(t.Context(), b)
			if err != nil {
				t.Errorf("%s: %v", f, err)
				return
			}
			t.Log(line)
		})
	}
}

// historyFiles lists the files of paths: each a file, or a directory's
// *.json files in name order.
func historyFiles(paths []string) ([]string, error) {
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		in, err := filepath.Glob(filepath.Join(p, "*.json"))
		if err != nil {
			return nil, err
		}
		sort.Strings(in)
		files = append(files, in...)
	}
	return files, nil
}

// History returns the recorded history of the task id as it stands now,
// as the file `leasehold replay --out` writes for a task on a table: to
// keep as a test's fixture, or to Replay against changed code.
func (e *Env) History(id string) ([]byte, error) {
	t, err := e.store.Get(e.ctx, id)
	if err != nil {
		return nil, fmt.Errorf("leaseholdtest: task %s: %w", id, err)
	}
	// A history past the task's item: the file holds it whole.
	if t.Steps, err = lease.ReadHistory(e.ctx, e.store, t, 0); err != nil {
		return nil, fmt.Errorf("leaseholdtest: task %s: %w", id, err)
	}
	// Values kept in the payload bucket (the Env's, in memory) go into
	// the file with it, as `leasehold replay` puts the bucket's.
	h := replay.Of(t, e.clock.Now())
	if err := h.Resolve(e.ctx, &claimcheck.Checker{Blobs: e.blobs}); err != nil {
		return nil, fmt.Errorf("leaseholdtest: task %s: %w", id, err)
	}
	return h.Encode()
}
