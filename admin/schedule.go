package admin

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/schedule"
)

// The errors of schedules match the client's sentinels, tested with
// errors.Is as a task's are: leasehold.ErrInvalid for a bad schedule (an
// expression that does not parse or never fires, a bad name, kind,
// payload, queue or catch-up policy, a request EventBridge Scheduler
// rejected as invalid), leasehold.ErrNotFound for a name the group does
// not have, leasehold.ErrConflict for Create of a name it has.

// scheduleErr is err, an error of package schedule, made to match the
// client's sentinel for its kind of failure; its message is unchanged.
func scheduleErr(err error) error {
	switch {
	case errors.Is(err, schedule.ErrInvalid), errors.Is(err, schedule.ErrExpression):
		return matching{err, leasehold.ErrInvalid}
	case errors.Is(err, schedule.ErrNotFound):
		return matching{err, leasehold.ErrNotFound}
	case errors.Is(err, schedule.ErrExists):
		return matching{err, leasehold.ErrConflict}
	}
	return err
}

// ScheduleSpec is a schedule as written: its Parse checks it.
type ScheduleSpec struct {
	// Name names the schedule; each slot's task is sched:NAME:<slot time>,
	// so a slot sent twice runs once.
	Name string
	// Expression is EventBridge's rate(...) or six-field cron(...).
	Expression string
	// Location reads a cron expression's fields (UTC when nil).
	Location *time.Location
	// Kind is the kind of the task each slot starts. Required.
	Kind string
	// Payload is the task's payload: valid JSON, or nil for none.
	Payload json.RawMessage
	// Queue, when set, names the SQS queue the task's tokens go to instead
	// of the work queue.
	Queue string
	// CatchUp is the policy for missed slots: none, latest, all or all:N,
	// optionally followed by ,AGE ("" is latest).
	CatchUp string
}

// Schedule is a checked schedule, from ScheduleSpec.Parse.
type Schedule struct{ spec schedule.Spec }

// Parse checks s: its expression, catch-up policy and other fields,
// and that it fires at all. seconds allows rates in seconds, which only
// Run fires (EventBridge Scheduler's shortest rate is a minute). Its
// errors match leasehold.ErrInvalid.
func (s ScheduleSpec) Parse(seconds bool) (Schedule, error) {
	syntax := schedule.AWS
	if seconds {
		syntax = schedule.Local
	}
	e, err := schedule.Parse(s.Expression, syntax)
	if err != nil {
		return Schedule{}, scheduleErr(err)
	}
	spec := schedule.Spec{Name: s.Name, Expr: e, Location: s.Location, Kind: s.Kind, Payload: s.Payload, Queue: s.Queue}
	if spec.CatchUp, err = schedule.ParseCatchUp(s.CatchUp); err != nil {
		return Schedule{}, scheduleErr(err)
	}
	if err := spec.Validate(); err != nil {
		return Schedule{}, scheduleErr(err)
	}
	if err := spec.CheckFires(time.Now()); err != nil {
		return Schedule{}, scheduleErr(err)
	}
	return Schedule{spec}, nil
}

// Name is the schedule's name.
func (s Schedule) Name() string { return s.spec.Name }

// Expression is the schedule's expression in its canonical form, such as
// rate(5 minutes).
func (s Schedule) Expression() string { return s.spec.Expr.String() }

// Kind is the kind of the task each slot starts.
func (s Schedule) Kind() string { return s.spec.Kind }

// ScheduleTarget is where a stored schedule's slots go and with what
// rights.
type ScheduleTarget struct {
	QueueARN string // the SQS queue each slot's token is sent to (see QueueARN)
	RoleARN  string // the role EventBridge Scheduler assumes to send it
	DLQARN   string // optional: where undeliverable slots go
}

// ListedSchedule is one schedule of a group. Leasehold is false for a
// schedule leasehold did not create: then only Name, Expression, Timezone
// and State are set.
type ListedSchedule struct {
	Name       string
	Expression string
	Timezone   string // "" is UTC
	State      string // ENABLED or DISABLED
	Leasehold  bool
	Kind       string
	Payload    json.RawMessage
	Queue      string
	CatchUp    string // the catch-up policy, as ScheduleSpec.CatchUp
	// Problem says why a schedule that looks like leasehold's cannot be
	// fired.
	Problem string
}

// ScheduleGroup creates, lists and deletes leasehold's schedules in one
// EventBridge Scheduler schedule group.
type ScheduleGroup struct {
	a  *Admin
	eb schedule.EventBridge
}

// ScheduleGroup returns the schedule group called name ("" is the group
// named default).
func (a *Admin) ScheduleGroup(name string) *ScheduleGroup {
	return &ScheduleGroup{a: a, eb: schedule.EventBridge{API: a.scheduler, Group: name, CallTimeout: a.callTimeout}}
}

// Name is the group's name, as given to Admin.ScheduleGroup.
func (g *ScheduleGroup) Name() string { return g.eb.Group }

// Create stores s in the group, sending each slot's token to t. A name the
// group already has fails with an error matching leasehold.ErrConflict.
func (g *ScheduleGroup) Create(ctx context.Context, s Schedule, t ScheduleTarget) error {
	return g.err(g.eb.Create(ctx, s.spec, schedule.Target{QueueARN: t.QueueARN, RoleARN: t.RoleARN, DLQARN: t.DLQARN}))
}

// List returns every schedule of the group, leasehold's and others.
func (g *ScheduleGroup) List(ctx context.Context) ([]ListedSchedule, error) {
	all, err := g.eb.List(ctx)
	if err != nil {
		return nil, g.err(err)
	}
	out := make([]ListedSchedule, 0, len(all))
	for _, l := range all {
		r := ListedSchedule{Name: l.Name, Expression: l.Expression, Timezone: l.Timezone, State: l.State, Problem: l.Problem, Leasehold: l.OK}
		if l.OK {
			r.Kind, r.Payload, r.Queue, r.CatchUp = l.Spec.Kind, l.Spec.Payload, l.Spec.Queue, l.Spec.CatchUp.String()
		}
		out = append(out, r)
	}
	return out, nil
}

// Delete removes the schedule called name; the tasks it started are kept.
// A name the group does not have fails with an error matching
// leasehold.ErrNotFound.
func (g *ScheduleGroup) Delete(ctx context.Context, name string) error {
	return g.err(g.eb.Delete(ctx, name))
}

func (g *ScheduleGroup) err(err error) error {
	if u := g.a.unreachable(err); u != nil {
		return u
	}
	return scheduleErr(err)
}
