package cli

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/admin"
)

// selection picks tasks for a bulk cancel or retry: from the listing, by
// status (newest first), kind, queue and age.
type selection struct {
	statuses    []string
	kind, queue string
	since       time.Duration
	dryRun      bool
	concurrency int
}

func (s *selection) flags(cmd *cobra.Command, statuses string) {
	fl := cmd.Flags()
	fl.StringSliceVar(&s.statuses, "status", nil, "select the tasks with these statuses (comma-separated; default "+statuses+")")
	fl.StringVar(&s.kind, "kind", "", "select the tasks of this kind")
	fl.StringVar(&s.queue, "queue", "", "select the tasks of this queue (its NAME)")
	fl.DurationVar(&s.since, "since", 0, "select the tasks created at most this long ago, e.g. 2h")
	fl.BoolVar(&s.dryRun, "dry-run", false, "print the selected ids and their count; change nothing")
	fl.IntVar(&s.concurrency, "concurrency", 8, "tasks changed at once")
}

// many reports whether the command acts on the tasks the selection flags
// pick (no ID given) rather than on one ID, or why neither.
func (s *selection) many(cmd *cobra.Command, args []string) (bool, error) {
	chosen := false
	for _, f := range []string{"status", "kind", "queue", "since", "dry-run"} {
		chosen = chosen || cmd.Flags().Changed(f)
	}
	switch {
	case len(args) == 1 && chosen:
		return false, usageErrorf("give an ID or selection flags, not both")
	case len(args) == 0 && !chosen:
		return false, usageErrorf("give an ID, or selection flags (--status, --kind, --queue, --since) for many")
	}
	return len(args) == 0, nil
}

// check validates the selection against the statuses the action takes.
func (s *selection) check(allowed []leasehold.Status) ([]leasehold.Status, error) {
	if s.since < 0 {
		return nil, usageErrorf("--since cannot be negative")
	}
	if s.concurrency < 1 || s.concurrency > 64 {
		return nil, usageErrorf("--concurrency must be 1..64")
	}
	if len(s.statuses) == 0 {
		return allowed, nil
	}
	var out []leasehold.Status
	for _, raw := range s.statuses {
		st, err := leasehold.ParseStatus(raw)
		if err != nil || !slices.Contains(allowed, st) {
			return nil, usageErrorf("--status %s: want one of %s", raw, statusNames(allowed))
		}
		out = append(out, st)
	}
	return out, nil
}

func statusNames(ss []leasehold.Status) string {
	names := make([]string, len(ss))
	for i, s := range ss {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// selectIDs lists the tasks the selection picks. The listing is newest
// first within a status, so --since stops a status's pages at the first
// older task.
func (s *selection) selectIDs(ctx context.Context, c *leasehold.Client, statuses []leasehold.Status) ([]string, error) {
	cutoff := time.Time{}
	if s.since > 0 {
		cutoff = time.Now().Add(-s.since)
	}
	var ids []string
	for _, st := range statuses {
		cursor := ""
	pages:
		for {
			page, err := c.List(ctx, leasehold.ListOptions{Status: st, Limit: leasehold.MaxListLimit, Cursor: cursor})
			if err != nil {
				return nil, err
			}
			for _, t := range page.Tasks {
				if !cutoff.IsZero() && t.CreatedAt.Before(cutoff) {
					break pages
				}
				if (s.kind == "" || t.Kind == s.kind) && (s.queue == "" || t.Queue == s.queue) {
					ids = append(ids, t.ID)
				}
			}
			if page.Next == "" {
				break
			}
			cursor = page.Next
		}
	}
	return ids, nil
}

// outcome tallies a bulk action.
type bulkTally struct {
	mu     sync.Mutex
	counts map[string]int
	errs   []string
}

func (b *bulkTally) add(what string, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.counts[what]++
	if err != nil && len(b.errs) < maxReportedLines {
		b.errs = append(b.errs, err.Error())
	}
}

// bulk runs act on every task the selection picks, concurrency at a time,
// with a progress bar, and prints a summary. act returns the word for its
// outcome ("cancelled", "already ended", ...) and, for a failure, an error.
func (a *app) bulk(cmd *cobra.Command, s *selection, allowed []leasehold.Status, verb string,
	act func(context.Context, *leasehold.Client, string) (string, error),
) error {
	statuses, err := s.check(allowed)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	c, err := a.client(ctx)
	if err != nil {
		return err
	}
	ids, err := s.selectIDs(ctx, c, statuses)
	if err != nil {
		return err
	}
	if s.dryRun {
		for _, id := range ids {
			fmt.Fprintln(a.io.Out, admin.DisplayID(id))
		}
		fmt.Fprintf(a.io.Err, "dry run: %d tasks would be %s (statuses %s); nothing changed\n", len(ids), verb, statusNames(statuses))
		return nil
	}
	tally := &bulkTally{counts: map[string]int{}}
	bar := a.newBar(len(ids), verb)
	work := make(chan string)
	var done sync.WaitGroup
	var finished int
	var mu sync.Mutex
	for range min(s.concurrency, max(len(ids), 1)) {
		done.Go(func() {
			for id := range work {
				what, err := act(ctx, c, id)
				if err != nil {
					err = fmt.Errorf("%s: %w", admin.DisplayID(id), err)
				}
				tally.add(what, err)
				mu.Lock()
				finished++
				bar.set(finished)
				mu.Unlock()
			}
		})
	}
feed:
	for _, id := range ids {
		select {
		case work <- id:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	done.Wait()
	bar.finish()
	for _, e := range tally.errs {
		fmt.Fprintf(a.io.Err, "leasehold: %s\n", e)
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(tally.counts)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, tally.counts[k]))
	}
	if len(parts) == 0 {
		parts = []string{"no task selected"}
	}
	fmt.Fprintf(a.io.Out, "%d tasks selected: %s\n", len(ids), strings.Join(parts, ", "))
	if n := tally.counts["failed"]; n > 0 {
		return fmt.Errorf("%d of %d tasks could not be %s", n, len(ids), verb)
	}
	return ctx.Err()
}

// cancelOne is bulk cancel's action on one task.
func cancelOne(ctx context.Context, c *leasehold.Client, id string) (string, error) {
	info, err := c.Cancel(ctx, id)
	switch {
	case errors.Is(err, leasehold.ErrFinished):
		return "already ended", nil
	case err != nil:
		return "failed", err
	case info.Status == leasehold.StatusCancelled:
		return "cancelled", nil
	}
	return "cancellation requested (running)", nil
}

// retryOne is bulk retry's action on one task.
func retryOne(attempts int) func(context.Context, *leasehold.Client, string) (string, error) {
	return func(ctx context.Context, c *leasehold.Client, id string) (string, error) {
		_, err := c.Retry(ctx, id, leasehold.ExtraAttempts(attempts))
		switch {
		case errors.Is(err, leasehold.ErrNotRetryable):
			return "no longer retryable", nil
		case err != nil:
			return "failed", err
		}
		return "retried", nil
	}
}
