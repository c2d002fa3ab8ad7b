package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/admin"
)

func init() {
	register((*app).pauseCommand)
	register((*app).resumeCommand)
}

func (a *app) pauseCommand() *cobra.Command { return a.pauseOrResume(true) }

func (a *app) resumeCommand() *cobra.Command { return a.pauseOrResume(false) }

func (a *app) pauseOrResume(pause bool) *cobra.Command {
	var lambda bool
	cmd := &cobra.Command{
		Use:   "pause [QUEUE]",
		Short: "Pause a queue: workers stop taking its tasks, which stay queued",
		Long: `Pause tags the queue (QUEUE by name; default the work queue, --queue-url)
with leasehold-paused. Workers under leasehold run (Worker.Run) read the tag
before each receive, at most 2 s old, and receive nothing while it is there:
the queue's messages stay queued and nothing is lost; tasks already running
finish. A message a worker had received before the pause may still run.

With --lambda it also disables every Lambda event source mapping on the
queue, so deployed workers stop receiving too (it needs
lambda:ListEventSourceMappings and lambda:UpdateEventSourceMapping).

leasehold resume QUEUE undoes both.`,
		Example: `  leasehold pause
  leasehold pause reports --lambda
  leasehold resume reports --lambda`,
		Args: posArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := ""
			if len(args) == 1 {
				if err := admin.CheckQueueName(args[0]); err != nil {
					return usageErrorf("QUEUE: %v", err)
				}
				name = args[0]
			}
			ctx := cmd.Context()
			adm, err := a.admin(ctx)
			if err != nil {
				return err
			}
			url, err := a.queueURLOf(ctx, adm, name)
			if err != nil {
				return err
			}
			r, err := adm.Pause(ctx, url, pause, lambda)
			if len(r.Mappings) > 0 {
				verb := "disabled"
				if !pause {
					verb = "enabled"
				}
				fmt.Fprintf(a.io.Out, "%s %d event source mapping(s): %s\n", verb, len(r.Mappings), strings.Join(r.Mappings, ", "))
			}
			if err != nil {
				return err
			}
			if r.Paused {
				_, err = fmt.Fprintf(a.io.Out, "queue %s paused since %s: workers start nothing from it; its messages stay queued\n", url, r.Since.Format(time.RFC3339))
			} else {
				_, err = fmt.Fprintf(a.io.Out, "queue %s is not paused: workers receive from it\n", url)
			}
			return err
		},
	}
	if !pause {
		cmd.Use = "resume [QUEUE]"
		cmd.Short = "Resume a paused queue"
		cmd.Long = `Resume removes the queue's leasehold-paused tag (leasehold pause): workers
under leasehold run receive from it again within 2 s. With --lambda it
enables the queue's Lambda event source mappings again.`
		cmd.Example = `  leasehold resume
  leasehold resume reports --lambda`
	}
	cmd.Flags().BoolVar(&lambda, "lambda", false, "also disable (pause) or enable (resume) the Lambda event source mappings on the queue")
	return cmd
}
