package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/cli/rules"
)

type watchFlags struct {
	all      bool
	interval time.Duration
	timeout  time.Duration
}

// watchConcurrency bounds the reads of one watch round.
const watchConcurrency = 8

func init() {
	register((*app).watchCommand)
}

func (a *app) watchCommand() *cobra.Command {
	var f watchFlags
	cmd := &cobra.Command{
		Use:   "watch [ID... | -] | --all",
		Short: "Show live counts per status until the tasks have finished",
		Long: `Watch reads the given tasks (or, with --all, every task of the table) every
--interval and shows how many are in each status, with a progress bar of the
finished ones on a terminal (a line per change otherwise). It ends when every
given task has finished (with --all: when no task is PENDING or RUNNING) and
prints the final counts on stdout. "-" reads the ids from stdin, whitespace
separated, so it takes the output of "enqueue --file".

Exit code 5 when any of the tasks ended FAILED or CANCELLED; 1 when
--timeout passes first; 3 when an id does not exist.

--all reads the whole status index each round; it is meant for development
stacks, not for tables of millions of tasks.`,
		Example: `  leasehold watch greet-ada greet-bob
  leasehold enqueue --file tasks.jsonl | leasehold watch --timeout 10m -
  leasehold watch --all --interval 5s`,
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case f.interval <= 0:
				return usageErrorf("--interval must be positive")
			case f.timeout < 0:
				return usageErrorf("--timeout cannot be negative")
			case f.all && len(args) > 0:
				return usageErrorf("give task ids or --all, not both")
			case !f.all && len(args) == 0:
				return usageErrorf("give the ids of the tasks to watch, - to read them from stdin, or --all")
			}
			ids, err := a.watchIDs(args)
			if err != nil {
				return err
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if f.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, f.timeout)
				defer cancel()
			}
			w := &watcher{app: a, client: c, list: c.List, ids: ids, all: f.all, status: map[string]leasehold.TaskInfo{}}
			return w.run(ctx, f)
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.all, "all", false, "watch every task of the table")
	fl.DurationVar(&f.interval, "interval", time.Second, "time between two rounds of reads")
	fl.DurationVar(&f.timeout, "timeout", 0, "give up after this long (default: no limit)")
	return cmd
}

// watchIDs collects the ids from the arguments and, for "-", stdin, without
// repeats.
func (a *app) watchIDs(args []string) ([]string, error) {
	seen := map[string]bool{}
	var ids []string
	add := func(id string) {
		if id != "" && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	for _, arg := range args {
		if arg != "-" {
			add(arg)
			continue
		}
		sc := bufio.NewScanner(io.LimitReader(a.io.In, 1<<30))
		sc.Buffer(make([]byte, 64<<10), 64<<10)
		sc.Split(bufio.ScanWords)
		for sc.Scan() {
			add(sc.Text())
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("read ids from stdin: %w", err)
		}
	}
	if len(args) > 0 && len(ids) == 0 {
		return nil, usageErrorf("no task ids given (stdin was empty)")
	}
	return ids, nil
}

type watcher struct {
	app    *app
	client *leasehold.Client
	// list reads a page of the status index (client.List; tests replace it).
	list   func(context.Context, leasehold.ListOptions) (leasehold.Page, error)
	ids    []string
	all    bool
	status map[string]leasehold.TaskInfo // ids mode: last seen state
}

// counts is how many tasks are in each status.
type counts map[leasehold.Status]int

func (c counts) String() string {
	var b strings.Builder
	for i, s := range leasehold.Statuses() {
		if i > 0 {
			b.WriteString("  ")
		}
		fmt.Fprintf(&b, "%s %d", s, c[s])
	}
	return b.String()
}

func (c counts) finished() (done, total int) {
	for s, n := range c {
		total += n
		if s.Terminal() {
			done += n
		}
	}
	return done, total
}

func (w *watcher) run(ctx context.Context, f watchFlags) error {
	bar := w.app.newBar(max(len(w.ids), 1), "watch")
	defer bar.finish()
	started := time.Now()
	last := ""
	var complete counts // the last round that was read in full
	for {
		c, err := w.round(ctx)
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
				if w.all {
					// A cut --all round counted only some statuses:
					// report the last full round instead.
					return w.timedOut(f.timeout, complete)
				}
				return w.timedOut(f.timeout, c)
			}
			return err
		}
		complete = c
		done, total := c.finished()
		bar.resize(max(total, 1))
		bar.describe(c.String())
		bar.set(done)
		if line := c.String(); line != last && !w.app.io.ErrIsTerminal {
			fmt.Fprintf(w.app.io.Err, "%6.1fs  %s\n", time.Since(started).Seconds(), line)
			last = line
		}
		if done == total {
			bar.finish()
			return w.report(c)
		}
		timer := time.NewTimer(f.interval)
		select {
		case <-ctx.Done():
			timer.Stop()
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return w.timedOut(f.timeout, c)
			}
			return context.Cause(ctx)
		case <-timer.C:
		}
	}
}

// timedOut prints c, the last counts read in full, and the timeout error.
// A nil c means no round finished before the deadline.
func (w *watcher) timedOut(timeout time.Duration, c counts) error {
	if c == nil {
		return fmt.Errorf("timed out after %s before the first count of every status finished", timeout)
	}
	done, total := c.finished()
	fmt.Fprintln(w.app.io.Out, c.String())
	return fmt.Errorf("timed out after %s: %d of %d tasks have not finished", timeout, total-done, total)
}

// report prints the final counts and turns failures into exit code 5.
func (w *watcher) report(c counts) error {
	if _, err := fmt.Fprintln(w.app.io.Out, c.String()); err != nil {
		return err
	}
	failed, cancelled := c[leasehold.StatusFailed], c[leasehold.StatusCancelled]
	if failed+cancelled == 0 {
		return nil
	}
	shown := 0
	for _, id := range w.ids {
		t := w.status[id]
		if t.Status != leasehold.StatusFailed && t.Status != leasehold.StatusCancelled {
			continue
		}
		if shown == maxReportedLines {
			fmt.Fprintln(w.app.io.Err, "...")
			break
		}
		fmt.Fprintf(w.app.io.Err, "%s %s: %s\n", t.Status, rules.DisplayID(id), clip(rules.OneLine(t.Error), 200))
		shown++
	}
	_, total := c.finished()
	return &endedError{failed: failed, cancelled: cancelled, total: total}
}

// endedError reports the tasks of a watch that ended FAILED or CANCELLED:
// exit code 5, as one task's *leasehold.TaskError has.
type endedError struct{ failed, cancelled, total int }

func (e *endedError) Error() string {
	return fmt.Sprintf("%d of %d tasks ended FAILED, %d CANCELLED", e.failed, e.total, e.cancelled)
}

// round reads the current statuses.
func (w *watcher) round(ctx context.Context) (counts, error) {
	if w.all {
		return w.countAll(ctx)
	}
	var pending []string
	for _, id := range w.ids {
		if !w.status[id].Status.Terminal() {
			pending = append(pending, id)
		}
	}
	infos := make([]leasehold.TaskInfo, len(pending))
	errs := make([]error, len(pending))
	var wg sync.WaitGroup
	sem := make(chan struct{}, watchConcurrency)
	for i, id := range pending {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			errs[i] = context.Cause(ctx)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			infos[i], errs[i] = w.client.Get(ctx, id)
		}()
	}
	wg.Wait()
	for i, id := range pending {
		if errs[i] != nil {
			return w.counts(), w.app.taskErr(id, errs[i])
		}
		w.status[id] = infos[i]
	}
	return w.counts(), nil
}

func (w *watcher) counts() counts {
	c := counts{}
	for _, id := range w.ids {
		if t, ok := w.status[id]; ok {
			c[t.Status]++
		} else {
			c[leasehold.StatusPending]++ // not read yet
		}
	}
	return c
}

// countAll counts every task of the table by status. On error the counts
// are nil: a part of a round is not a count of the table.
func (w *watcher) countAll(ctx context.Context) (counts, error) {
	c := counts{}
	for _, s := range leasehold.Statuses() {
		o := leasehold.ListOptions{Status: s, Limit: rules.MaxListLimit}
		for {
			page, err := w.list(ctx, o)
			if err != nil {
				return nil, err
			}
			c[s] += len(page.Tasks)
			if page.Next == "" {
				break
			}
			o.Cursor = page.Next
		}
	}
	return c, nil
}
