package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/admin"
)

func init() {
	register((*app).cancelCommand)
	register((*app).retryCommand)
}

func (a *app) cancelCommand() *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a task",
		Long: `Cancel ends a PENDING task as CANCELLED at once: it never runs. For a RUNNING
task it requests cancellation: the worker cancels the handler's context at its
next lease renewal and the task ends CANCELLED (unless the handler finished
first). Cancelling a task that already ended is an error (exit 1).`,
		Example: `  leasehold cancel greet-ada`,
		Args:    posArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.showTask(cmd.Context(), jsonOut, func(c *leasehold.Client) (leasehold.TaskInfo, error) {
				info, err := c.Cancel(cmd.Context(), args[0])
				return info, a.taskErr(args[0], err)
			}, func(_ *leasehold.Client, info leasehold.TaskInfo) (err error) {
				if info.Status == leasehold.StatusCancelled {
					_, err = fmt.Fprintf(a.io.Out, "task %s cancelled\n", admin.DisplayID(info.ID))
				} else {
					_, err = fmt.Fprintf(a.io.Out, "task %s is %s: cancellation requested; it stops at its next lease renewal\n", admin.DisplayID(info.ID), info.Status)
				}
				return err
			})
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the task as JSON")
	return cmd
}

func (a *app) retryCommand() *cobra.Command {
	var (
		attempts int
		jsonOut  bool
	)
	cmd := &cobra.Command{
		Use:   "retry ID",
		Short: "Run a FAILED or CANCELLED task again",
		Long: `Retry puts a FAILED or CANCELLED task back to PENDING, due now, with --attempts
more attempts (default 1), and dispatches it. Its attempt count and history
are kept. Retrying a task in any other status is an error (exit 1).`,
		Example: `  leasehold retry greet-ada
  leasehold retry --attempts 3 greet-ada`,
		Args: posArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if attempts < 1 {
				return usageErrorf("--attempts must be at least 1")
			}
			return a.showTask(cmd.Context(), jsonOut, func(c *leasehold.Client) (leasehold.TaskInfo, error) {
				info, err := c.Retry(cmd.Context(), args[0], leasehold.ExtraAttempts(attempts))
				return info, a.taskErr(args[0], err)
			}, func(_ *leasehold.Client, info leasehold.TaskInfo) error {
				_, err := fmt.Fprintf(a.io.Out, "task %s is %s again: %d attempts used, up to %d\n", admin.DisplayID(info.ID), info.Status, info.Attempt, info.MaxAttempts)
				return err
			})
		},
	}
	cmd.Flags().IntVar(&attempts, "attempts", 1, "how many more attempts to allow")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the task as JSON")
	return cmd
}
