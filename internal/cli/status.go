package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/cli/rules"
)

func init() {
	register((*app).statusCommand)
	register((*app).resultCommand)
}

func (a *app) statusCommand() *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "status ID",
		Short: "Show a task: status, attempts, payload, result, history and inbox",
		Example: `  leasehold status greet-ada
  leasehold status --json greet-ada | jq .status`,
		Args: posArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.showTask(cmd.Context(), jsonOut, func(c *leasehold.Client) (leasehold.TaskInfo, error) {
				info, err := c.Get(cmd.Context(), args[0])
				return info, a.taskErr(args[0], err)
			}, func(c *leasehold.Client, info leasehold.TaskInfo) error {
				if err := writeTask(a.io.Out, info); err != nil {
					return err
				}
				// The inbox's counts: one read of its state item.
				info, err := c.Inbox(cmd.Context(), info, 0)
				if err := writeInbox(a.io.Out, info, err); err != nil {
					return err
				}
				return writeTree(cmd.Context(), c, a.io.Out, info)
			})
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the task as JSON")
	return cmd
}

// treeDepth bounds how deep status follows children and dependencies.
const treeDepth = 4

// writeTree prints the tasks t waits (or waited) for, as a tree: its
// children, or its dependencies, each with its status, and theirs below.
func writeTree(ctx context.Context, c *leasehold.Client, w io.Writer, t leasehold.TaskInfo) error {
	if len(t.WaitFor) == 0 {
		return nil
	}
	label := "children"
	if t.Wait != "children" {
		label = "after"
		if t.Wait == "after_any" {
			label = "after (any outcome)"
		}
	}
	fmt.Fprintf(w, "%s:\n", label)
	var walk func(ids []string, indent string, depth int) error
	walk = func(ids []string, indent string, depth int) error {
		for i, id := range ids {
			branch, next := "├─ ", "│  "
			if i == len(ids)-1 {
				branch, next = "└─ ", "   "
			}
			info, err := c.Get(ctx, id)
			switch {
			case errors.Is(err, leasehold.ErrNotFound):
				fmt.Fprintf(w, "%s%s%s  (not found)\n", indent, branch, rules.DisplayID(id))
				continue
			case err != nil:
				return err
			}
			line := fmt.Sprintf("%s%s%s  %s", indent, branch, rules.DisplayID(id), info.Status)
			if info.Error != "" {
				line += "  " + clip(rules.OneLine(info.Error), 60)
			}
			fmt.Fprintln(w, line)
			if len(info.WaitFor) > 0 && depth < treeDepth {
				if err := walk(info.WaitFor, indent+next, depth+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return walk(t.WaitFor, "  ", 1)
}

func (a *app) resultCommand() *cobra.Command {
	var (
		wait    bool
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "result ID",
		Short: "Print a task's result (JSON) on stdout",
		Long: `Result prints the result of a SUCCEEDED task on stdout. A task that ended
FAILED or CANCELLED prints its error on stderr and exits 5. A task that has not
finished is an error (exit 1), unless --wait waits for it to finish. With
--wait, a task that does not exist yet (a message still on its way to a
worker) is waited for too: up to --timeout, or one minute without one.

` + exitCodesHelp,
		Example: `  leasehold result greet-ada
  leasehold result --wait --timeout 5m greet-ada | jq .`,
		Args: posArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			if timeout < 0 {
				return usageErrorf("--timeout cannot be negative")
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			var info leasehold.TaskInfo
			if wait {
				if timeout > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, timeout)
					defer cancel()
				}
				// On a terminal, say so: without a timeout the command may
				// wait for hours with nothing on the screen. The line is
				// erased when the wait ends.
				if a.io.ErrIsTerminal {
					limit := "no time limit"
					if timeout > 0 {
						limit = "up to " + timeout.String()
					}
					fmt.Fprintf(a.io.Err, "waiting for task %s to finish (%s; Ctrl-C stops)...", rules.DisplayID(id), limit)
				}
				err = a.awaitCreation(ctx, c, id, timeout)
				if err == nil {
					info, err = c.Wait(ctx, id)
				}
				if a.io.ErrIsTerminal {
					fmt.Fprint(a.io.Err, "\r\x1b[K")
				}
				if errors.Is(err, context.DeadlineExceeded) && !errors.As(err, new(*leasehold.UnreachableError)) {
					return fmt.Errorf("task %s did not finish within %s", rules.DisplayID(id), timeout)
				}
			} else {
				info, err = c.Get(ctx, id)
			}
			if err != nil {
				return a.taskErr(id, err)
			}
			switch info.Status {
			case leasehold.StatusSucceeded:
				out := []byte(info.Result)
				if len(out) == 0 {
					out = []byte("null")
				}
				_, err := fmt.Fprintf(a.io.Out, "%s\n", out)
				return err
			case leasehold.StatusFailed, leasehold.StatusCancelled:
				return &leasehold.TaskError{ID: id, Status: info.Status, Message: info.Error}
			}
			return fmt.Errorf("task %s is %s: no result yet (use --wait to wait for it)", rules.DisplayID(id), info.Status)
		},
	}
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until the task finishes")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "with --wait, give up after this long (default: no limit)")
	return cmd
}

// appearWithin bounds how long `result --wait` without --timeout waits for
// a task that does not exist yet: long enough for a message on its way to
// a worker, short enough that a mistyped id does not hang a script.
const appearWithin = time.Minute

// awaitCreation waits until the task exists: a task sent as a plain SQS
// message has no item until a worker takes its message. It waits up to
// timeout, or appearWithin when there is none.
func (a *app) awaitCreation(ctx context.Context, c *leasehold.Client, id string, timeout time.Duration) error {
	limit := timeout
	if limit == 0 {
		limit = appearWithin
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	pause := 100 * time.Millisecond
	for {
		_, err := c.Get(ctx, id)
		if !errors.Is(err, leasehold.ErrNotFound) {
			if err != nil && ctx.Err() != nil {
				break
			}
			return err
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
			pause = min(2*pause, 2*time.Second)
			continue
		}
		break
	}
	if cause := context.Cause(ctx); !errors.Is(cause, context.DeadlineExceeded) {
		return cause
	}
	return &notFoundError{id: id, table: a.table, waited: limit, err: leasehold.ErrNotFound}
}

// taskErr words a failed operation on the task id for the user.
// showTask runs op, which reads or changes a task, with the configured
// client, and prints the task it returns: as JSON with jsonOut, else with
// text.
func (a *app) showTask(ctx context.Context, jsonOut bool, op func(*leasehold.Client) (leasehold.TaskInfo, error), text func(*leasehold.Client, leasehold.TaskInfo) error) error {
	c, err := a.client(ctx)
	if err != nil {
		return err
	}
	info, err := op(c)
	if err != nil {
		return err
	}
	if jsonOut {
		return writeJSON(a.io.Out, info)
	}
	return text(c, info)
}

func (a *app) taskErr(id string, err error) error {
	if errors.As(err, new(*notFoundError)) {
		return err
	}
	if errors.Is(err, leasehold.ErrNotFound) {
		return &notFoundError{id: id, table: a.table, err: err}
	}
	return err
}

// notFoundError words a missing task for the user.
type notFoundError struct {
	id, table string
	waited    time.Duration // how long --wait waited for it to appear
	err       error
}

func (e *notFoundError) Error() string {
	msg := fmt.Sprintf("no task with id %q in table %s", e.id, e.table)
	if e.waited > 0 {
		msg += fmt.Sprintf(" (waited %s for it to appear)", e.waited)
	}
	return msg
}

func (e *notFoundError) Unwrap() error { return e.err }

// writeTask prints a task for people.
func writeTask(w io.Writer, t leasehold.TaskInfo) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s:\t%s\n", k, v)
		}
	}
	row("id", rules.DisplayID(t.ID))
	row("kind", rules.DisplayID(t.Kind))
	queue := t.Queue
	if queue == "" {
		queue = "(the default work queue)"
	}
	row("queue", rules.Escape(queue))
	row("parent", rules.DisplayID(t.Parent))
	if len(t.Metadata) > 0 {
		entries := make([]string, 0, len(t.Metadata))
		for _, k := range slices.Sorted(maps.Keys(t.Metadata)) {
			entries = append(entries, k+"="+rules.Escape(t.Metadata[k]))
		}
		row("metadata", strings.Join(entries, ", "))
	}
	status := string(t.Status)
	if t.CancelRequested && !t.Status.Terminal() {
		status += " (cancel requested)"
	}
	row("status", status)
	row("attempts", fmt.Sprintf("%d of %d", t.Attempt, t.MaxAttempts))
	if t.Run > 1 {
		row("run", fmt.Sprintf("%d (continued as new; the earlier runs are %s to %s)", t.Run, rules.DisplayID(rules.RunID(t.ID, 1)), rules.DisplayID(rules.RunID(t.ID, t.Run-1))))
	}
	if !t.Status.Terminal() {
		row("run at", stamp(t.RunAt))
	}
	if t.Status == leasehold.StatusWaiting {
		wait := fmt.Sprintf("%s: %d of %d ended", rules.Escape(t.Wait), len(t.Ended), len(t.WaitFor))
		switch {
		case t.Wait == "callback":
			wait = "a callback until " + stamp(t.WaitUntil)
		case !t.WaitUntil.IsZero():
			wait += ", at most until " + stamp(t.WaitUntil)
		}
		row("waiting for", wait)
	}
	if t.Status == leasehold.StatusRunning {
		row("lease", fmt.Sprintf("%s until %s", rules.Escape(t.LeaseOwner), stamp(t.LeaseUntil)))
	}
	row("created", stamp(t.CreatedAt))
	row("updated", stamp(t.UpdatedAt))
	row("finished", stamp(t.FinishedAt))
	label := "error"
	if rules.HandedBack(t) { // a snooze, sleep or hold: no error
		label = "waits because"
		if t.Status == leasehold.StatusRunning {
			label = "waited because" // before this attempt
		}
	}
	row(label, rules.OneLine(t.Error))
	if len(t.Steps) > 0 {
		row("steps", rules.Escape(strings.Join(t.Steps, ", ")))
	}
	if len(t.Then) > 0 {
		row("then", rules.Escape(strings.Join(t.Then, ", ")))
	}
	row("payload", rules.Escape(string(t.Payload)))
	row("result", rules.Escape(string(t.Result)))
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(t.History) == 0 {
		return nil
	}
	fmt.Fprintln(w, "history:")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, h := range t.History {
		fmt.Fprintf(tw, "  #%d\t%s\t%s\t%s\n", h.Attempt, h.Status, stamp(h.At), rules.OneLine(h.Error))
	}
	return tw.Flush()
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}
