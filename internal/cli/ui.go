package cli

import (
	"fmt"
	"net"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/internal/cli/ui"
)

func init() {
	register((*app).uiCommand)
}

func (a *app) uiCommand() *cobra.Command {
	var (
		addr string
		scan int
	)
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "Serve the web inspector: tasks, workflows, queues and dead letters",
		Long: `ui serves an inspector in the browser until Ctrl-C: an overview (tasks by
status, kind and queue, queue and dead-letter depths, tasks per minute), the
task list with filters, each task with its attempts and buttons to cancel,
retry or end its callback, workflow trees, the dead-letter queue with
redrive, and pause/resume of queues. Pages refresh themselves every 2 s.

It listens on --addr (default 127.0.0.1:8080; port 0 picks a free one) and
prints the URL to open, which carries a session token drawn at start: the
first visit trades it for a cookie, and every action needs it. See
docs/ui.md for the security model.

It uses the table, work queue and AWS settings of every other command.`,
		Example: `  leasehold ui
  leasehold ui --addr 127.0.0.1:0`,
		Args: posArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if scan < 1 {
				return usageErrorf("--scan must be at least 1")
			}
			ctx := cmd.Context()
			c, err := a.client(ctx)
			if err != nil {
				return err
			}
			adm, err := a.admin(ctx)
			if err != nil {
				return err
			}
			work, err := a.queueURLOf(ctx, adm, "")
			if err != nil {
				return err
			}
			srv, err := ui.New(ui.Config{Tasks: c, Queues: adm, WorkQueueURL: work, Scan: scan})
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return usageErrorf("--addr %s: %v", addr, err)
			}
			u := url.URL{Scheme: "http", Host: ln.Addr().String(), Path: "/", RawQuery: url.Values{"token": {srv.Token()}}.Encode()}
			fmt.Fprintf(a.io.Out, "leasehold ui: open %s\n(Ctrl-C stops it)\n", u.String())
			return srv.Serve(ctx, ln)
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:8080", "address to listen on (host:port; port 0 picks a free one)")
	cmd.Flags().IntVar(&scan, "scan", ui.DefaultScan, "tasks the overview reads from the listing (newest first)")
	return cmd
}
