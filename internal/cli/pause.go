package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/internal/cli/rules"
)

func init() {
	register((*app).pauseCommand)
	register((*app).resumeCommand)
}

func (a *app) pauseCommand() *cobra.Command { return a.pauseOrResume(true) }

func (a *app) resumeCommand() *cobra.Command { return a.pauseOrResume(false) }

func (a *app) pauseOrResume(pause bool) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pause [QUEUE]",
		Short: "Pause a queue: workers stop taking its tasks, which stay queued",
		Long: `Pause tags the queue (QUEUE by name; default the work queue, --queue-url)
with leasehold-paused. Every worker reads the tag, at most 2 s old: under
leasehold run (Worker.Run) it receives nothing from the queue, and on
Lambda it hands the queue's messages back unrun, each hidden for a while
that grows with its receives (from 10 s to at most 15 minutes), so they
come back later. The queue's messages stay queued and nothing is lost;
tasks already running finish. A message a worker had received before the
pause may still run.

It needs only sqs:TagQueue, sqs:UntagQueue and sqs:ListQueueTags on the
queue (the template's PauseQueuesPolicy). leasehold resume QUEUE undoes it.`,
		Example: `  leasehold pause
  leasehold pause reports
  leasehold resume reports`,
		Args: posArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := ""
			if len(args) == 1 {
				if err := rules.CheckQueueName(args[0]); err != nil {
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
			r, err := adm.Pause(ctx, url, pause)
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
under leasehold run receive from it again within 2 s; on Lambda each held
message runs when it comes back, at most its hold (15 minutes) later.`
		cmd.Example = `  leasehold resume
  leasehold resume reports`
	}
	return cmd
}
