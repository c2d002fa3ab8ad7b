package cli

import (
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/admin"
	"github.com/leasehold/leasehold/internal/cli/rules"
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
func (s *selection) check(allowed []leasehold.Status) (admin.Selection, error) {
	if s.concurrency < 1 || s.concurrency > 64 {
		return admin.Selection{}, usageErrorf("--concurrency must be 1..64")
	}
	sel := admin.Selection{Kind: s.kind, Queue: s.queue, Since: s.since}
	for _, raw := range s.statuses {
		st, err := leasehold.ParseStatus(raw)
		if err != nil || !slices.Contains(allowed, st) {
			return sel, usageErrorf("--status %s: want one of %s", raw, rules.StatusNames(allowed))
		}
		sel.Statuses = append(sel.Statuses, st)
	}
	sel, err := sel.Check(allowed)
	if err != nil {
		return sel, usageErrorf("--since cannot be negative")
	}
	return sel, nil
}

// bulk runs the action act picks from the Admin on every task the
// selection picks, concurrency at a time, with a progress bar, and prints a
// summary (Admin.Select, Admin.Bulk).
func (a *app) bulk(cmd *cobra.Command, s *selection, allowed []leasehold.Status, verb string, act func(*admin.Admin) admin.Action) error {
	sel, err := s.check(allowed)
	if err != nil {
		return err
	}
	if sel.Queue != "" && sel.Queue == a.workQueueName() {
		// As for list: the work queue's tasks are listed as "" whatever
		// name they were recorded with, and it has no listing by queue.
		sel.Queue = "-"
	}
	ctx := cmd.Context()
	c, err := a.client(ctx)
	if err != nil {
		return err
	}
	adm := a.tasksAdmin(c)
	ids, _, err := adm.Select(ctx, sel, time.Now(), 0)
	if err != nil {
		return err
	}
	if s.dryRun {
		for _, id := range ids {
			fmt.Fprintln(a.io.Out, rules.DisplayID(id))
		}
		fmt.Fprintf(a.io.Err, "dry run: %d tasks would be %s (statuses %s); nothing changed\n", len(ids), verb, rules.StatusNames(sel.Statuses))
		return nil
	}
	bar := a.newBar(len(ids), verb)
	r := adm.Bulk(ctx, ids, s.concurrency, act(adm), bar.set)
	bar.finish()
	for i, e := range r.Errors {
		if i == maxReportedLines {
			break
		}
		fmt.Fprintf(a.io.Err, "leasehold: %s\n", e)
	}
	fmt.Fprintf(a.io.Out, "%d tasks selected: %s\n", len(ids), r.Summary())
	if n := r.Failed(); n > 0 {
		return fmt.Errorf("%d of %d tasks could not be %s", n, len(ids), verb)
	}
	return ctx.Err()
}
