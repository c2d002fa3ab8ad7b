package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

func init() {
	register((*app).heartbeatCommand)
}

func (a *app) heartbeatCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "heartbeat TOKEN",
		Short: "Keep a callback wait with a heartbeat timeout alive",
		Long: `Heartbeat tells the callback wait TOKEN names that the system answering it
still works on it: a wait with a heartbeat timeout (the handler's
workflow.HeartbeatTimeout) goes on for that timeout from now, up to its own
deadline. Without a beat within the heartbeat timeout the wait ends and its
attempt fails ("callback heartbeat timed out after ..."), retried as after
any callback timeout. TOKEN is the callback token the handler took; each
beat is one conditional write.

A beat for a wait that has ended (answered, timed out, its attempt retried)
or is past a deadline, or with a forged token, is rejected with the reason
(exit 1): stop beating then. A wait without a heartbeat timeout refuses a
beat (exit 2). See docs/workflows.md.`,
		Example: `  while still_working; do leasehold heartbeat "$TOKEN" || break; sleep 60; done`,
		Args:    posArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			if err := c.HeartbeatCallback(cmd.Context(), args[0]); err != nil {
				return err
			}
			_, err = fmt.Fprintln(a.io.Out, "heartbeat recorded")
			return err
		},
	}
}
