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
status, kind and queue among the newest of each status, queue and
dead-letter depths, tasks per minute), the task list with filters, each task
with its attempts and buttons to cancel, retry or end its callback, workflow
trees, the dead-letter queue with redrive, and pause/resume of queues.
Pages refresh their live part while their tab is visible: a task every 2 s,
the queues every 5 s, the task list and workflows every 10 s; the
overview's task counts only when it is loaded.

It listens on --addr (default 127.0.0.1:8080; port 0 picks a free one) and
prints the URL to open, which carries a session token drawn at start: the
first visit trades it for a cookie, and every action needs it. An address
other than a loopback one gets a warning: anyone who can reach it and has
the URL has the session, and on 0.0.0.0 or :: the Host check is off. See
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
			if warn := exposure(ln.Addr()); warn != "" {
				fmt.Fprintf(a.io.Err, "leasehold ui: warning: %s\n", warn)
			}
			fmt.Fprintf(a.io.Out, "leasehold ui: open %s\n(Ctrl-C stops it)\n", u.String())
			return srv.Serve(ctx, ln)
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:8080", "address to listen on (host:port; port 0 picks a free one)")
	cmd.Flags().IntVar(&scan, "scan", ui.DefaultScan, "tasks the overview reads when loaded: the newest scan/6 of each status")
	return cmd
}

// exposure says what is wrong with serving the inspector on addr: empty
// for a loopback address.
func exposure(addr net.Addr) string {
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return ""
	}
	ip := net.ParseIP(host)
	switch {
	case ip == nil || ip.IsLoopback():
		return ""
	case ip.IsUnspecified():
		return "listening on every interface (" + addr.String() + "): anyone who can reach this machine and has the URL has the session, and the Host check (against DNS rebinding) is off"
	}
	return "listening on " + addr.String() + ", not a loopback address: anyone who can reach it and has the URL has the session"
}
