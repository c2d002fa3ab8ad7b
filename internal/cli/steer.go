package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/admin"
	"github.com/leasehold/leasehold/internal/cli/rules"
)

func init() {
	register((*app).cancelCommand)
	register((*app).retryCommand)
}

func (a *app) cancelCommand() *cobra.Command {
	var (
		jsonOut bool
		sel     selection
	)
	cmd := &cobra.Command{
		Use:   "cancel ID | cancel --status S --kind K --queue Q --since D [--dry-run]",
		Short: "Cancel a task, or every task a filter selects",
		Long: `Cancel ends a PENDING task as CANCELLED at once: it never runs. For a RUNNING
task it requests cancellation: the worker cancels the handler's context at its
next lease renewal and the task ends CANCELLED (unless the handler finished
first). A WAITING task is cancelled with its children. Cancelling a task that
already ended is an error (exit 1).

Without ID, the selection flags pick the tasks from the listing (newest first):
--status (default PENDING, RUNNING, WAITING), --kind, --queue and --since. At
least one is needed. --dry-run prints the selected ids and their count and
changes nothing; otherwise a progress bar (on a terminal) and a summary follow,
and the exit code is 1 if any task could not be cancelled. Tasks created with
the listing off (TaskListing=off) are not listed, so not selected; nor are
running children and chain links, listed under their parent or head
(cancelling that cancels them).`,
		Example: `  leasehold cancel greet-ada
  leasehold cancel --status pending --kind report --since 2h --dry-run
  leasehold cancel --status pending --kind report --since 2h`,
		Args: posArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			bulk, err := sel.many(cmd, args)
			if err != nil {
				return err
			}
			if bulk {
				return a.bulk(cmd, &sel, admin.CancelStatuses, "cancelled", func(adm *admin.Admin) admin.Action { return adm.CancelOne })
			}
			return a.showTask(cmd.Context(), jsonOut, func(c *leasehold.Client) (leasehold.TaskInfo, error) {
				info, err := c.Cancel(cmd.Context(), args[0])
				return info, a.taskErr(args[0], err)
			}, func(_ *leasehold.Client, info leasehold.TaskInfo) (err error) {
				id := rules.DisplayID(info.ID)
				switch {
				case info.Status == leasehold.StatusCancelled:
					_, err = fmt.Fprintf(a.io.Out, "task %s cancelled\n", id)
				case info.Status == leasehold.StatusRunning:
					_, err = fmt.Fprintf(a.io.Out, "task %s is RUNNING: cancellation requested; it stops at its next lease renewal\n", id)
				case !info.Status.Terminal():
					// Other writers kept moving it (docs/states.md, "What a
					// cancel guarantees").
					_, err = fmt.Fprintf(a.io.Out, "task %s is %s: cancellation requested; it is cancelled when a worker next takes it\n", id, info.Status)
				default:
					_, err = fmt.Fprintf(a.io.Out, "task %s ended %s before its worker saw the cancellation\n", id, info.Status)
				}
				return err
			})
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the task as JSON")
	sel.flags(cmd, "PENDING,RUNNING,WAITING")
	return cmd
}

func (a *app) retryCommand() *cobra.Command {
	var (
		attempts int
		jsonOut  bool
		sel      selection
	)
	cmd := &cobra.Command{
		Use:   "retry ID | retry --status S --kind K --queue Q --since D [--dry-run]",
		Short: "Run a FAILED or CANCELLED task again, or every one a filter selects",
		Long: `Retry puts a FAILED or CANCELLED task back to PENDING, due now, with --attempts
more attempts (default 1), and dispatches it. Its attempt count and history
are kept. Retrying a task in any other status is an error (exit 1).

Without ID, the selection flags pick the tasks from the listing, as for
leasehold cancel: --status (default FAILED, CANCELLED), --kind, --queue,
--since and --dry-run.`,
		Example: `  leasehold retry greet-ada
  leasehold retry --attempts 3 greet-ada
  leasehold retry --status failed --kind report --since 24h`,
		Args: posArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if attempts < 1 {
				return usageErrorf("--attempts must be at least 1")
			}
			bulk, err := sel.many(cmd, args)
			if err != nil {
				return err
			}
			if bulk {
				return a.bulk(cmd, &sel, admin.RetryStatuses, "retried", func(adm *admin.Admin) admin.Action { return adm.RetryOne(attempts) })
			}
			return a.showTask(cmd.Context(), jsonOut, func(c *leasehold.Client) (leasehold.TaskInfo, error) {
				info, err := c.Retry(cmd.Context(), args[0], attempts)
				return info, a.taskErr(args[0], err)
			}, func(_ *leasehold.Client, info leasehold.TaskInfo) error {
				_, err := fmt.Fprintf(a.io.Out, "task %s is %s again: %d attempts used, up to %d\n", rules.DisplayID(info.ID), info.Status, info.Attempt, info.MaxAttempts)
				return err
			})
		},
	}
	cmd.Flags().IntVar(&attempts, "attempts", 1, "how many more attempts to allow")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the task as JSON")
	sel.flags(cmd, "FAILED,CANCELLED")
	return cmd
}
