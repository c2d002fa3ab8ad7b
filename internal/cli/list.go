package cli

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/admin"
	"github.com/leasehold/leasehold/internal/cli/rules"
	"github.com/leasehold/leasehold/settings"
)

type listFlags struct {
	status  string
	limit   int
	cursor  string
	all     bool
	jsonOut bool
	parent  string
	kind    string
	queue   string
	since   string
	prefix  string
	// pageTime bounds the reading of one page (0: none).
	pageTime time.Duration
}

func init() {
	register((*app).listCommand)
}

func (a *app) listCommand() *cobra.Command {
	var f listFlags
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List tasks, by status, a page at a time",
		Long: `List prints tasks newest first within each status (PENDING, RUNNING,
SUCCEEDED, FAILED, CANCELLED, in that order), as a table or, with --json, as
one JSON array. Payloads and results are left out: "leasehold status ID" shows
them.

A task started by another, a child or a chain's later link, is listed under
it (--parent ID) and has a row of its own only once it has failed or been
cancelled.

One page holds up to --limit tasks. When more remain, the cursor of the next
page is printed on stderr as "next-cursor: CURSOR"; pass it to --cursor (with
the same --status and filters) to continue. --all fetches every page.

--kind, --queue, --since and --prefix filter what the listing reads (it
reads by status only): a page then holds up to --limit matching tasks, and
ends short, with a cursor, once it has read 5000 tasks or made 50 calls.

A page reads for at most --page-time (2s): a rare kind, or a rare status
behind many tasks of others, then gives a short page, says on stderr how
many tasks it read, and prints the cursor to go on from (--all goes on by
itself). --page-time 0 reads each page to its end.`,
		Example: `  leasehold list --status failed
  leasehold list --json --limit 500 > page1.json 2> next.txt
  leasehold list --json --limit 500 --cursor "$(sed -n 's/^next-cursor: //p' next.txt)"
  leasehold list --all --json | jq length
  leasehold list --parent report-2026-12
  leasehold list --status failed --kind resize --since 2h`,
		Args: posArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			o := leasehold.ListOptions{Limit: f.limit, Cursor: f.cursor}
			if f.limit < 1 || f.limit > rules.MaxListLimit {
				return usageErrorf("--limit %d is outside 1..%d", f.limit, rules.MaxListLimit)
			}
			if f.status != "" {
				s, err := leasehold.ParseStatus(f.status)
				if err != nil {
					return usageError{err}
				}
				o.Status = s
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			filter, err := f.filter(time.Now())
			if err != nil {
				return err
			}
			if filter.Queue != "" && filter.Queue == a.workQueueName() {
				// The client lists the work queue's tasks as "" whatever
				// name they were recorded with: its name means "-".
				filter.Queue = "-"
			}
			if f.parent != "" {
				if f.status != "" || f.cursor != "" || !filter.IsZero() {
					return usageErrorf("--parent takes no --status, --cursor or filter")
				}
				kids, err := c.Children(cmd.Context(), f.parent)
				if err != nil {
					return a.taskErr(f.parent, err)
				}
				if f.jsonOut {
					return writeJSON(a.io.Out, kids)
				}
				return writeTable(a.io.Out, kids)
			}
			tasks := []leasehold.TaskInfo{} // an empty page prints "[]", not "null"
			partial := ""
			for {
				page, err := f.readPage(cmd.Context(), a.tasksAdmin(c), o, filter)
				if err != nil {
					return err
				}
				tasks = append(tasks, page.Tasks...)
				o.Cursor = page.Next
				if page.Next != "" && len(page.Tasks) < f.limit {
					partial = fmt.Sprintf("partial page: read %d task(s) in --page-time %s, %d matching; the listing goes on from next-cursor", page.Scanned, f.pageTime, len(page.Tasks))
				}
				if !f.all || page.Next == "" {
					break
				}
			}
			if f.jsonOut {
				err = writeJSON(a.io.Out, tasks)
			} else {
				err = writeTable(a.io.Out, tasks)
			}
			if err != nil {
				return err
			}
			if partial != "" {
				fmt.Fprintln(a.io.Err, partial)
			}
			if o.Cursor != "" {
				fmt.Fprintf(a.io.Err, "next-cursor: %s\n", o.Cursor)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.status, "status", "", "only tasks with this status: pending, running, succeeded, failed or cancelled")
	fl.IntVar(&f.limit, "limit", settings.Default().ListLimit, fmt.Sprintf("tasks per page (1..%d)", rules.MaxListLimit))
	fl.StringVar(&f.cursor, "cursor", "", "continue from a previous page's next-cursor")
	fl.BoolVar(&f.all, "all", false, "fetch every page")
	fl.BoolVar(&f.jsonOut, "json", false, "print a JSON array instead of a table")
	fl.StringVar(&f.parent, "parent", "", "only the tasks this task started: its children and its chain's later links (in the order started)")
	fl.StringVar(&f.kind, "kind", "", "only tasks of this kind")
	fl.StringVar(&f.queue, "queue", "", `only tasks of this queue (by name; "-" for the default work queue)`)
	fl.StringVar(&f.since, "since", "", "only tasks created since then: a duration back from now (90m, 2h) or an RFC 3339 time")
	fl.StringVar(&f.prefix, "prefix", "", "only tasks whose id starts with this")
	fl.DurationVar(&f.pageTime, "page-time", defaultPageTime, "how long one page reads before it ends short with a cursor (0: no bound)")
	return cmd
}

// defaultPageTime is --page-time's default: the inspector's page time.
const defaultPageTime = 2 * time.Second

// readPage reads one page of the listing through filter, within
// --page-time (ListOptions.StopBy): the listing makes no call it expects
// to end past it, and ends the page short with a cursor. Its first call
// is always made.
func (f listFlags) readPage(ctx context.Context, adm *admin.Admin, o leasehold.ListOptions, filter admin.Filter) (admin.FilteredPage, error) {
	if f.pageTime > 0 {
		o.StopBy = time.Now().Add(f.pageTime)
	}
	return adm.ListFiltered(ctx, o, filter, f.limit)
}

// filter is the list's filter flags as an admin.Filter.
func (f listFlags) filter(now time.Time) (admin.Filter, error) {
	since, err := rules.ParseSince(f.since, now)
	if err != nil {
		return admin.Filter{}, usageErrorf("--%v", err)
	}
	if f.queue != "" && f.queue != "-" {
		if err := rules.CheckQueueName(f.queue); err != nil {
			return admin.Filter{}, usageErrorf("--queue: %v", err)
		}
	}
	return admin.Filter{Kind: f.kind, Queue: f.queue, Prefix: f.prefix, Since: since}, nil
}

// writeTable prints tasks as an aligned table.
func writeTable(w io.Writer, tasks []leasehold.TaskInfo) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tQUEUE\tSTATUS\tATTEMPTS\tCREATED\tERROR")
	for _, t := range tasks {
		queue := t.Queue
		if queue == "" {
			queue = "-" // the default work queue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d/%d\t%s\t%s\n",
			rules.DisplayID(t.ID), rules.DisplayID(t.Kind), rules.Escape(queue), t.Status, t.Attempt, t.MaxAttempts, stamp(t.CreatedAt), clip(rules.OneLine(t.Error), 60))
	}
	return tw.Flush()
}

// clip cuts s to n runes, marking the cut.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
