package cli

import (
	"fmt"
	"net"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/internal/cli/ui"
)

func init() {
	register((*app).uiCommand)
}

// flagAllowNonLoopback lets `leasehold ui` serve an address other than a
// loopback one.
const flagAllowNonLoopback = "allow-non-loopback"

func (a *app) uiCommand() *cobra.Command {
	var (
		addr             string
		scan             int
		idle, lifetime   time.Duration
		allowNonLoopback bool
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
prints the URL to open. The URL works once: its first visit opens the
session (a cookie) and any later visit is refused. The session ends after
--session-idle without a request (default 30m) or --session-max after it
opened (default 12h); then restart ui for a new URL. An address other than
a loopback one (127.0.0.0/8, ::1, localhost) is refused unless
--allow-non-loopback is given, and then served with a warning: anyone who
can reach it and has the URL can open the session. See docs/ui.md for the
security model.

It uses the table, work queue and AWS settings of every other command.`,
		Example: `  leasehold ui
  leasehold ui --addr 127.0.0.1:0
  leasehold ui --addr 0.0.0.0:8080 --allow-non-loopback`,
		Args: posArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if scan < 1 {
				return usageErrorf("--scan must be at least 1")
			}
			if idle <= 0 || lifetime <= 0 {
				return usageErrorf("--session-idle and --session-max must be positive")
			}
			// Listen first: a refused address needs no AWS.
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return usageErrorf("--addr %s: %v", addr, err)
			}
			defer ln.Close() // Serve closes it too; this is for the returns before
			warn := exposure(ln.Addr())
			if warn != "" && !allowNonLoopback {
				return usageErrorf("--addr %s: refused to listen on %s; pass --%s to serve it anyway", addr, warn, flagAllowNonLoopback)
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
			srv, err := ui.New(ui.Config{Tasks: c, Queues: adm, WorkQueueURL: work, Scan: scan, SessionIdle: idle, SessionLifetime: lifetime})
			if err != nil {
				return err
			}
			if warn != "" {
				fmt.Fprintf(a.io.Err, "leasehold ui: warning: listening on %s\n", warn)
			}
			fmt.Fprintf(a.io.Out, "leasehold ui: open %s\n(it opens one session, once; Ctrl-C stops it)\n", srv.StartURL(ln.Addr().String()))
			return srv.Serve(ctx, ln)
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:8080", "address to listen on (host:port; port 0 picks a free one)")
	cmd.Flags().IntVar(&scan, "scan", ui.DefaultScan, "tasks the overview reads when loaded: the newest scan/6 of each status")
	cmd.Flags().DurationVar(&idle, "session-idle", ui.DefaultSessionIdle, "end the session after this long without a request (live refreshes do not count)")
	cmd.Flags().DurationVar(&lifetime, "session-max", ui.DefaultSessionLifetime, "end the session this long after it opened")
	cmd.Flags().BoolVar(&allowNonLoopback, flagAllowNonLoopback, false, "serve an --addr that is not a loopback address (0.0.0.0, an interface's address), with a warning")
	return cmd
}

// exposure says what is wrong with serving the inspector on addr (after
// "listening on"): empty for a loopback address.
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
		return "every interface (" + addr.String() + "): anyone who can reach this machine and has the URL can open the session, and the Host check (against DNS rebinding) is off"
	}
	return addr.String() + ", not a loopback address: anyone who can reach it and has the URL can open the session"
}
