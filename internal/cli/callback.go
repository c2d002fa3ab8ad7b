package cli

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/internal/lease"
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
that took the token with leasehold.CallbackToken and returned
leasehold.AwaitCallback does not run again.

A token is accepted once, and only while its attempt waits. A forged,
stale or used token is rejected with the reason (exit 1). See
docs/workflows.md.`,
		Example: `  leasehold complete "$TOKEN" '{"approved":true}'`,
		Args:    posArgs(cobra.RangeArgs(1, 2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			var result any
			if len(args) == 2 {
				if !json.Valid([]byte(args[1])) {
					return usageErrorf("RESULT is not a JSON document")
				}
				result = json.RawMessage(args[1])
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			info, err := c.CompleteCallback(cmd.Context(), args[0], result)
			if err != nil {
				return err
			}
			if jsonOut {
				return writeJSON(a.io.Out, info)
			}
			_, err = fmt.Fprintf(a.io.Out, "task %s %s\n", lease.DisplayID(info.ID), info.Status)
			return err
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
for good with REASON (leasehold retry runs it again). A token is accepted
once; a forged, stale or used token is rejected with the reason (exit 1).`,
		Example: `  leasehold fail "$TOKEN" 'rejected by the reviewer'`,
		Args:    posArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			info, err := c.FailCallback(cmd.Context(), args[0], args[1])
			if err != nil {
				return err
			}
			if jsonOut {
				return writeJSON(a.io.Out, info)
			}
			_, err = fmt.Fprintf(a.io.Out, "task %s %s\n", lease.DisplayID(info.ID), info.Status)
			return err
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the task as JSON")
	return cmd
}
