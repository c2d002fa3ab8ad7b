package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/admin"
)

func init() {
	register((*app).completeCommand)
	register((*app).failCommand)
}

func (a *app) completeCommand() *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "complete TOKEN [RESULT]",
		Short: "Complete a task waiting for a callback",
		Long: `Complete ends the waiting attempt that the callback TOKEN names: the task
SUCCEEDS with RESULT, a JSON document (none when left out). The handler
that took the token with workflow.CallbackToken and returned
workflow.AwaitCallback does not run again. A token handed out by
workflow.WaitForCallback is answered instead: RESULT is recorded for the
handler, which runs again to read it (the task is PENDING until then).

A token is accepted once, and only while its attempt waits. A forged,
stale or used token is rejected with the reason (exit 1). See
docs/workflows.md.`,
		Example: `  leasehold complete "$TOKEN" '{"approved":true}'`,
		Args:    posArgs(cobra.RangeArgs(1, 2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			var result any
			if len(args) == 2 {
				if p, tooDeep := admin.JSONProblem([]byte(args[1])); p != "" {
					if !tooDeep {
						p = "is not a JSON document"
					}
					return usageErrorf("RESULT %s", p)
				}
				result = json.RawMessage(args[1])
			}
			return a.endWait(cmd, jsonOut, func(c *leasehold.Client) (leasehold.TaskInfo, error) {
				return c.CompleteCallback(cmd.Context(), args[0], result)
			})
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the task as JSON")
	return cmd
}

func (a *app) failCommand() *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "fail TOKEN REASON",
		Short: "Fail a task waiting for a callback",
		Long: `Fail ends the waiting attempt that the callback TOKEN names: the task FAILS
for good with REASON (leasehold retry runs it again). For a token handed
out by workflow.WaitForCallback, the handler runs again and reads REASON
as a refusal instead. A token is accepted once; a forged, stale or used
token is rejected with the reason (exit 1).`,
		Example: `  leasehold fail "$TOKEN" 'rejected by the reviewer'`,
		Args:    posArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.endWait(cmd, jsonOut, func(c *leasehold.Client) (leasehold.TaskInfo, error) {
				return c.FailCallback(cmd.Context(), args[0], args[1])
			})
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the task as JSON")
	return cmd
}

// endWait runs a callback's end with the client and prints the task it
// left: its id and status, or, with jsonOut, the whole task.
func (a *app) endWait(cmd *cobra.Command, jsonOut bool, end func(*leasehold.Client) (leasehold.TaskInfo, error)) error {
	return a.showTask(cmd.Context(), jsonOut, end, func(_ *leasehold.Client, info leasehold.TaskInfo) error {
		if info.Status == leasehold.StatusPending {
			_, err := fmt.Fprintf(a.io.Out, "task %s PENDING: answer recorded; its handler runs again to read it\n", admin.DisplayID(info.ID))
			return err
		}
		_, err := fmt.Fprintf(a.io.Out, "task %s %s\n", admin.DisplayID(info.ID), info.Status)
		return err
	})
}

func init() { register((*app).callbackTokenCommand) }

func (a *app) callbackTokenCommand() *cobra.Command {
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "callback-token ID",
		Short: "Print the callback token of a task waiting for a callback",
		Long: `Callback-token prints the token of task ID's waiting attempt, for an operator
who answers the wait by hand with leasehold complete or leasehold fail.
With --wait it waits up to that long for the task to start waiting.`,
		Example: `  TOKEN=$(leasehold callback-token --wait 30s order-7-approval)
  leasehold complete "$TOKEN" '{"approved":true}'`,
		Args: posArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			deadline := time.Now().Add(wait)
			for {
				tok, err := c.CallbackTokenOf(cmd.Context(), args[0])
				switch {
				case err == nil:
					_, err = fmt.Fprintln(a.io.Out, tok)
					return err
				case errors.Is(err, leasehold.ErrNotWaiting) && time.Now().Before(deadline):
				default:
					return a.taskErr(args[0], err)
				}
				select {
				case <-cmd.Context().Done():
					return cmd.Context().Err()
				case <-time.After(200 * time.Millisecond):
				}
			}
		},
	}
	cmd.Flags().DurationVar(&wait, "wait", 0, "wait up to this long for the task to wait for a callback")
	return cmd
}
