package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/examples"
	"github.com/leasehold/leasehold/internal/cli/rules"
)

type replayFlags struct {
	kinds  []string
	limit  int
	pages  int
	cursor string
	out    string
}

func init() {
	register((*app).replayCommand)
}

// errDiverged: a replay found histories that the build's handlers diverge
// from or fail on (ExitDiverged).
var errDiverged = errors.New("histories diverge from this build's handlers")

func (a *app) replayCommand() *cobra.Command {
	var f replayFlags
	cmd := &cobra.Command{
		Use:   "replay --kind KIND [--kind KIND...] [--out DIR]",
		Short: "Check the workflows in flight against a build's handlers before deploying it",
		Long: `Replay reads the histories of the workflows in flight of each --kind (tasks
PENDING, RUNNING or WAITING with a recorded step or a wait, WAITING first)
from the table and replays each through the handler this binary has for its
kind: every durable call the history records is answered from it, and
nothing beyond it runs (no step's function, no read, no write). It prints a
line per history: ok, DIVERGED (the code asks for another operation than
the history records at some position: the worker would hold the task) or
FAILED (the handler fails outside its durable calls, say on a recorded
result that no longer decodes), and exits 7 if any history diverged or
failed.

The handlers are those linked into the binary that runs the command: for
the leasehold command, leasehold's example kinds (what leasehold run
serves). For your own kinds, --out DIR writes the histories to DIR (one
ID.json each) instead of replaying them here, and a test of your build
replays the files through your handlers with leaseholdtest.Replay: the
project leasehold init writes does both in "make replay-check".

Cost: for each kind, the listing's queries over the tasks in flight (one
DynamoDB query per 1 MB of listing entries) and one BatchGetItem per 100
tasks of the kind (a read unit per 4 KB of each item); nothing is written.
--limit bounds the histories per kind (default 100, at most 1000) and
--pages the reading: each page reads at most 5000 entries of the listing,
and when --pages runs out before the listing does, the cursor to go on
from is printed on stderr as "next-cursor: CURSOR" (--cursor, with a
single --kind). A task started by another (a child, a chain's later link)
has no listing entry of its own and is not read.`,
		Example: `  leasehold replay --kind order
  leasehold replay --kind order --kind invoice --out testdata/replay --limit 500
  go test -run TestReplay ./...   # your build, over the files written`,
		Args: posArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return a.replay(cmd, f) },
	}
	cmd.Flags().StringArrayVar(&f.kinds, "kind", nil, "a kind whose workflows in flight to replay (repeat for more)")
	cmd.Flags().IntVar(&f.limit, "limit", 100, "the most histories read per kind (1..1000)")
	cmd.Flags().IntVar(&f.pages, "pages", 20, "the most pages of the listing read per kind, each at most 5000 entries")
	cmd.Flags().StringVar(&f.cursor, "cursor", "", "go on from a next-cursor an earlier replay printed (with one --kind)")
	cmd.Flags().StringVar(&f.out, "out", "", "write each history to DIR/ID.json instead of replaying it (leaseholdtest.Replay reads them)")
	return cmd
}

func (a *app) replay(cmd *cobra.Command, f replayFlags) error {
	switch {
	case len(f.kinds) == 0:
		return usageErrorf("--kind: name at least one kind")
	case f.limit < 1 || f.limit > rules.MaxListLimit:
		return usageErrorf("--limit %d is outside 1..%d", f.limit, rules.MaxListLimit)
	case f.pages < 1:
		return usageErrorf("--pages %d: want 1 or more", f.pages)
	case f.cursor != "" && len(f.kinds) > 1:
		return usageErrorf("--cursor goes with a single --kind")
	}
	hs := a.io.Handlers
	if hs == nil {
		hs = leasehold.NewHandlers()
		examples.Register(hs)
	}
	if f.out == "" {
		known := hs.Kinds()
		for _, k := range f.kinds {
			if !slices.Contains(known, k) {
				return usageErrorf("--kind %s: this binary has no handler for it: write its histories out with --out DIR and replay them in a test of your build (leaseholdtest.Replay)", k)
			}
		}
	} else if err := os.MkdirAll(f.out, 0o750); err != nil {
		return err
	}
	ctx := cmd.Context()
	c, err := a.client(ctx)
	if err != nil {
		return err
	}
	adm := a.tasksAdmin(c)
	var read, bad int
	for _, kind := range f.kinds {
		cursor, n := f.cursor, 0
		for page := 0; page < f.pages && n < f.limit; page++ {
			hists, next, err := adm.Histories(ctx, kind, f.limit-n, cursor)
			if err != nil {
				return err
			}
			for _, h := range hists {
				n++
				if f.out != "" {
					if err := writeHistory(f.out, h); err != nil {
						return err
					}
					continue
				}
				line, err := hs.Replay(ctx, h)
				if err != nil {
					bad++
				}
				if _, err := fmt.Fprintln(a.io.Out, rules.Escape(line)); err != nil {
					return err
				}
			}
			if cursor = next; cursor == "" {
				break
			}
		}
		if cursor != "" {
			fmt.Fprintf(a.io.Err, "next-cursor: %s\n", cursor)
		}
		read += n
		if f.out != "" {
			fmt.Fprintf(a.io.Err, "kind %s: %d %s written to %s\n", kind, n, histories(n), f.out)
		} else {
			fmt.Fprintf(a.io.Err, "kind %s: %d %s replayed\n", kind, n, histories(n))
		}
	}
	if bad > 0 {
		return fmt.Errorf("%w: %d of %d", errDiverged, bad, read)
	}
	return nil
}

// writeHistory writes h to dir, named by its task's id (escaped as a path
// segment).
func writeHistory(dir string, h []byte) error {
	var head struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(h, &head); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, url.PathEscape(head.ID)+".json"), h, 0o600)
}

// histories is the noun for n histories.
func histories(n int) string {
	if n == 1 {
		return "history"
	}
	return "histories"
}
