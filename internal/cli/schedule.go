package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/admin"
	"github.com/leasehold/leasehold/internal/cli/rules"
	"github.com/leasehold/leasehold/settings"
)

// Environment variables of `leasehold schedule` (and `leasehold run
// --fire-schedules`).
const (
	EnvScheduleGroup   = settings.EnvScheduleGroup    // template output ScheduleGroupName
	EnvSchedulerRole   = settings.EnvSchedulerRoleARN // template output SchedulerRoleArn
	EnvScheduleDLQARN  = settings.EnvScheduleDLQARN   // template output ScheduleDeadLetterQueueArn
	EnvFireSchedules   = settings.EnvFireSchedules
	DefaultGroup       = "default"
	localSchedulerRole = "arn:aws:iam::000000000000:role/leasehold-scheduler"
)

type scheduleFlags struct {
	group, roleARN, dlqARN string
}

func init() { register((*app).scheduleCommand) }

func (a *app) scheduleCommand() *cobra.Command {
	var f scheduleFlags
	cmd := &cobra.Command{
		Use:   "schedule",
		Short: "Create, list and delete schedules (EventBridge Scheduler) that start tasks",
		Long: `schedule manages EventBridge Scheduler schedules that start a task of a kind on
a cron or rate expression. Each slot sends an inline token to the work queue
whose id is sched:NAME:<the slot's time>, so a slot delivered twice starts one
task (docs/workflows-schedules.md).

The schedule group comes from --group (` + EnvScheduleGroup + `; default
"default"), the role EventBridge assumes to send from --role-arn
(` + EnvSchedulerRole + `) and the dead-letter queue of undeliverable slots
from --dlq-arn (` + EnvScheduleDLQARN + `): the template's outputs
ScheduleGroupName, SchedulerRoleArn and ScheduleDeadLetterQueueArn. On a local
stack (LocalStack stores schedules but never fires them) the role may be
left out, and ` + "`leasehold run --fire-schedules`" + ` fires them.`,
		Example: `  leasehold schedule create nightly --cron '0 2 * * ? *' --kind report --payload '{"scope":"all"}'
  leasehold schedule create tick --rate '5 minutes' --kind greet --payload '{"name":"tick"}'
  leasehold schedule list
  leasehold schedule delete nightly`,
		Args: posArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.group, "group", "", "schedule group (env "+EnvScheduleGroup+"; default "+DefaultGroup+")")
	pf.StringVar(&f.roleARN, "role-arn", "", "role EventBridge Scheduler assumes to send to the queue (env "+EnvSchedulerRole+")")
	pf.StringVar(&f.dlqARN, "dlq-arn", "", "SQS queue for slots EventBridge could not deliver (env "+EnvScheduleDLQARN+")")
	cmd.AddCommand(a.scheduleCreateCommand(&f), a.scheduleListCommand(&f), a.scheduleDeleteCommand(&f))
	return cmd
}

type createFlags struct {
	cron, rate, kind, payload, queue, timezone, catchUp string
}

func (a *app) scheduleCreateCommand(sf *scheduleFlags) *cobra.Command {
	var f createFlags
	cmd := &cobra.Command{
		Use:   "create NAME (--cron EXPR | --rate 'N unit') --kind KIND",
		Short: "Create a schedule that starts a task of KIND at each slot",
		Long: `create makes an EventBridge Scheduler schedule NAME (1 to 64 letters, digits,
'-', '_' or '.') whose target is the work queue (or --queue): each slot sends
the inline token {"v":1,"id":"sched:NAME:<slot time>","kind":KIND,"payload":...}.

--cron takes EventBridge's six fields, minutes hours day-of-month month
day-of-week year, with exactly one of the two day fields '?' (L, W and # are
not supported); --rate takes 'N minutes', 'N hours' or 'N days' (at least one
minute: rates in seconds exist only locally, with leasehold run --schedule).
--timezone reads the cron fields in an IANA zone (default UTC).

--catch-up (none, latest, all or all:N, optionally ",AGE", default latest)
is what ` + "`leasehold run`" + ` does with slots it missed; on AWS it sets the
target's retry policy: none retries no failed delivery, the others retry for
AGE (default 1h, at least 60s, at most 24h).`,
		Example: `  leasehold schedule create nightly --cron '0 2 * * ? *' --kind report
  leasehold schedule create standup --cron '30 9 ? * MON-FRI *' --timezone Europe/Paris --kind greet --payload '{"name":"team"}'
  leasehold schedule create tick --rate '5 minutes' --kind greet --catch-up all:3,30m`,
		Args: posArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error { return a.scheduleCreate(cmd.Context(), sf, f, args[0]) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.cron, "cron", "", "cron fields, e.g. '0 2 * * ? *' (or 'cron(...)')")
	fl.StringVar(&f.rate, "rate", "", "rate, e.g. '5 minutes' (or 'rate(...)')")
	fl.StringVar(&f.kind, "kind", "", "task kind to start (required)")
	fl.StringVar(&f.payload, "payload", "", "task payload, JSON")
	fl.StringVar(&f.queue, "queue", "", "send to the SQS queue of this NAME instead of the work queue")
	fl.StringVar(&f.timezone, "timezone", "", "IANA time zone of the cron fields (default UTC)")
	fl.StringVar(&f.catchUp, "catch-up", "", "none, latest, all or all:N, optionally ,AGE (default latest)")
	return cmd
}

// specFromFlags builds and checks a schedule; seconds allows rates in
// seconds (admin.ScheduleSpec.Parse).
func specFromFlags(name string, f createFlags, seconds bool) (admin.Schedule, error) {
	if (f.cron == "") == (f.rate == "") {
		return admin.Schedule{}, usageErrorf("give exactly one of --cron and --rate")
	}
	if f.kind == "" {
		return admin.Schedule{}, usageErrorf("--kind is required")
	}
	expr := f.cron
	if expr != "" && !strings.HasPrefix(expr, "cron(") {
		expr = "cron(" + expr + ")"
	}
	if f.rate != "" {
		expr = f.rate
		if !strings.HasPrefix(expr, "rate(") {
			expr = "rate(" + expr + ")"
		}
	}
	spec := admin.ScheduleSpec{Name: name, Expression: expr, Kind: f.kind, Queue: f.queue, CatchUp: f.catchUp}
	if f.payload != "" {
		if p, _ := rules.JSONProblem([]byte(f.payload)); p != "" {
			return admin.Schedule{}, usageErrorf("--payload %s", p)
		}
		spec.Payload = json.RawMessage(f.payload)
	}
	if f.timezone != "" {
		var err error
		if spec.Location, err = time.LoadLocation(f.timezone); err != nil {
			return admin.Schedule{}, usageErrorf("--timezone %q: %v", f.timezone, err)
		}
	}
	s, err := spec.Parse(seconds)
	if err != nil {
		return admin.Schedule{}, usageError{err}
	}
	return s, nil
}

func (a *app) scheduleCreate(ctx context.Context, sf *scheduleFlags, f createFlags, name string) error {
	s, err := specFromFlags(name, f, false)
	if err != nil {
		return err
	}
	eb, adm, err := a.eventBridge(ctx, sf)
	if err != nil {
		return err
	}
	role := sf.roleARN
	if role == "" {
		role = a.io.Getenv(EnvSchedulerRole)
	}
	if role == "" {
		if !a.schedulerIsLocal() {
			return usageErrorf("--role-arn (or %s) is required: the role EventBridge Scheduler assumes to send to the queue (template output SchedulerRoleArn)", EnvSchedulerRole)
		}
		role = localSchedulerRole // a local stack checks no role
	}
	dlq := sf.dlqARN
	if dlq == "" {
		dlq = a.io.Getenv(EnvScheduleDLQARN)
	}
	url, err := a.queueURLOf(ctx, adm, f.queue)
	if err != nil {
		return err
	}
	arn, err := adm.QueueARN(ctx, url)
	if err != nil {
		return err
	}
	if err := eb.Create(ctx, s, admin.ScheduleTarget{QueueARN: arn, RoleARN: role, DLQARN: dlq}); err != nil {
		return a.scheduleErr(err)
	}
	_, err = fmt.Fprintf(a.io.Out, "schedule %s created in group %s: %s, kind %s; tasks sched:%s:<slot time>\n", s.Name(), eb.Name(), s.Expression(), s.Kind(), s.Name())
	return err
}

func (a *app) scheduleListCommand(sf *scheduleFlags) *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the schedules of the group",
		Long: `list prints the group's schedules: name, expression, time zone, state, kind and
catch-up policy. Schedules that leasehold did not create are listed with kind
"-"; leasehold run --fire-schedules leaves them alone.`,
		Example: `  leasehold schedule list
  leasehold schedule list --json | jq -r '.[].name'`,
		Args: posArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			eb, _, err := a.eventBridge(cmd.Context(), sf)
			if err != nil {
				return err
			}
			all, err := eb.List(cmd.Context())
			if err != nil {
				return a.scheduleErr(err)
			}
			return writeSchedules(a.io.Out, all, jsonOut)
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print a JSON array instead of a table")
	return cmd
}

type scheduleRow struct {
	Name       string          `json:"name"`
	Expression string          `json:"expression"`
	Timezone   string          `json:"timezone,omitempty"`
	State      string          `json:"state"`
	Kind       string          `json:"kind,omitempty"`
	Payload    json.RawMessage `json:"payload,omitempty"`
	Queue      string          `json:"queue,omitempty"`
	CatchUp    string          `json:"catch_up,omitempty"`
	Problem    string          `json:"problem,omitempty"`
}

func writeSchedules(w io.Writer, all []admin.ListedSchedule, jsonOut bool) error {
	rows := make([]scheduleRow, 0, len(all))
	for _, l := range all {
		rows = append(rows, scheduleRow{
			Name: l.Name, Expression: l.Expression, Timezone: l.Timezone, State: l.State, Problem: l.Problem,
			Kind: l.Kind, Payload: l.Payload, Queue: l.Queue, CatchUp: l.CatchUp,
		})
	}
	if jsonOut {
		return writeJSON(w, rows)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tEXPRESSION\tTIMEZONE\tSTATE\tKIND\tCATCH-UP")
	for _, r := range rows {
		kind, tz, cu := r.Kind, r.Timezone, r.CatchUp
		if kind == "" {
			kind = "-"
		}
		if tz == "" {
			tz = "UTC"
		}
		if cu == "" {
			cu = "-"
		}
		if r.Problem != "" {
			cu += " (" + r.Problem + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, r.Expression, tz, r.State, kind, cu)
	}
	return tw.Flush()
}

func (a *app) scheduleDeleteCommand(sf *scheduleFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a schedule",
		Long: `delete removes the schedule NAME from the group. Tasks it already started are
kept. A schedule that does not exist exits 3.`,
		Example: `  leasehold schedule delete nightly`,
		Args:    posArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			eb, _, err := a.eventBridge(cmd.Context(), sf)
			if err != nil {
				return err
			}
			if err := eb.Delete(cmd.Context(), args[0]); err != nil {
				return a.scheduleErr(err)
			}
			_, err = fmt.Fprintf(a.io.Out, "schedule %s deleted from group %s\n", args[0], eb.Name())
			return err
		},
	}
}

// eventBridge returns the schedule group and the admin client it was got
// from.
func (a *app) eventBridge(ctx context.Context, sf *scheduleFlags) (*admin.ScheduleGroup, *admin.Admin, error) {
	adm, err := a.admin(ctx)
	if err != nil {
		return nil, nil, err
	}
	group := sf.group
	if group == "" {
		group = a.env(EnvScheduleGroup, DefaultGroup)
	}
	return adm.ScheduleGroup(group), adm, nil
}

// admin returns an admin client built with the global settings.
func (a *app) admin(ctx context.Context) (*admin.Admin, error) {
	if a.callTimeout <= 0 {
		return nil, usageErrorf("--call-timeout must be positive")
	}
	cfg, err := a.awsConfig(ctx)
	if err != nil {
		return nil, err
	}
	return admin.New(admin.Config{AWS: cfg, Endpoint: a.endpoint, CallTimeout: a.callTimeout}), nil
}

// queueURLOf returns the URL of the queue called name, or for "" the work
// queue's: --queue-url, else the queue called DefaultWorkQueueName.
func (a *app) queueURLOf(ctx context.Context, adm *admin.Admin, name string) (string, error) {
	switch {
	case name != "":
		return adm.QueueURL(ctx, name)
	case a.queueURL != "":
		return a.queueURL, nil
	}
	return adm.QueueURL(ctx, DefaultWorkQueueName)
}

// schedulerIsLocal reports whether scheduler calls go to a local stack.
func (a *app) schedulerIsLocal() bool {
	for _, e := range []string{a.endpoint, a.io.Getenv("AWS_ENDPOINT_URL_SCHEDULER"), a.io.Getenv("AWS_ENDPOINT_URL")} {
		if e != "" {
			return isLocal(e)
		}
	}
	return false
}

// scheduleErr maps the schedule package's errors to the exit codes.
func (a *app) scheduleErr(err error) error {
	switch {
	case errors.Is(err, leasehold.ErrNotFound):
		return exitAs{err, leasehold.ErrNotFound}
	case errors.Is(err, leasehold.ErrConflict):
		return exitAs{fmt.Errorf("%w; delete it first to change it", err), leasehold.ErrConflict}
	case errors.Is(err, leasehold.ErrInvalid):
		return usageError{err}
	}
	return err
}

// exitAs is err, printed as itself, with the exit code of code.
type exitAs struct{ err, code error }

func (e exitAs) Error() string   { return e.err.Error() }
func (e exitAs) Unwrap() []error { return []error{e.err, e.code} }

// parseScheduleFlag reads one `leasehold run --schedule` value:
// NAME=EXPR;kind=KIND[;catch-up=P][;timezone=TZ][;queue=Q][;payload=JSON].
// EXPR is rate(...) or cron(...), rates in seconds allowed; payload comes
// last and runs to the end, so its JSON may hold ';'.
func parseScheduleFlag(v string) (admin.Schedule, error) {
	bad := func(format string, args ...any) (admin.Schedule, error) {
		return admin.Schedule{}, usageErrorf("--schedule %q: "+format, append([]any{v}, args...)...)
	}
	head, rest, _ := strings.Cut(v, ";")
	name, expr, ok := strings.Cut(head, "=")
	if !ok {
		return bad("want NAME=EXPR;kind=KIND[;catch-up=P][;timezone=TZ][;queue=Q][;payload=JSON]")
	}
	f := createFlags{}
	switch expr = strings.TrimSpace(expr); {
	case strings.HasPrefix(expr, "rate("):
		f.rate = expr
	case strings.HasPrefix(expr, "cron("):
		f.cron = expr
	default:
		return bad("%q is neither rate(...) nor cron(...)", expr)
	}
	for rest != "" {
		var item string
		if strings.HasPrefix(rest, "payload=") {
			item, rest = rest, ""
		} else {
			item, rest, _ = strings.Cut(rest, ";")
		}
		key, val, ok := strings.Cut(item, "=")
		if !ok {
			return bad("%q is not KEY=VALUE", item)
		}
		switch key {
		case "kind":
			f.kind = val
		case "catch-up":
			f.catchUp = val
		case "timezone":
			f.timezone = val
		case "queue":
			f.queue = val
		case "payload":
			f.payload = val
		default:
			return bad("unknown key %q (want kind, catch-up, timezone, queue or payload)", key)
		}
	}
	s, err := specFromFlags(strings.TrimSpace(name), f, true)
	if err != nil {
		return bad("%v", err)
	}
	return s, nil
}
