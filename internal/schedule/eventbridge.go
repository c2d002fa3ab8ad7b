package schedule

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/scheduler/types"
)

// SchedulerAPI is the part of EventBridge Scheduler's client this package
// calls, with the SDK's signatures.
type SchedulerAPI interface {
	CreateSchedule(ctx context.Context, in *scheduler.CreateScheduleInput, optFns ...func(*scheduler.Options)) (*scheduler.CreateScheduleOutput, error)
	GetSchedule(ctx context.Context, in *scheduler.GetScheduleInput, optFns ...func(*scheduler.Options)) (*scheduler.GetScheduleOutput, error)
	ListSchedules(ctx context.Context, in *scheduler.ListSchedulesInput, optFns ...func(*scheduler.Options)) (*scheduler.ListSchedulesOutput, error)
	DeleteSchedule(ctx context.Context, in *scheduler.DeleteScheduleInput, optFns ...func(*scheduler.Options)) (*scheduler.DeleteScheduleOutput, error)
}

// Errors of the EventBridge calls, beside ErrInvalid (a request the service
// refused as invalid).
var (
	ErrNotFound = errors.New("schedule not found")
	ErrExists   = errors.New("schedule exists")
)

// descriptionPrefix starts the Description of a schedule this package
// creates; the catch-up policy follows, for `leasehold run` to read back.
const descriptionPrefix = "leasehold schedule; catch-up="

// EventBridge creates, lists and deletes leasehold's schedules in one
// schedule group.
type EventBridge struct {
	API   SchedulerAPI
	Group string // "" is the group named default
	// CallTimeout bounds each call (10s when 0).
	CallTimeout time.Duration
}

// Target is where a schedule's slots go and with what rights.
type Target struct {
	QueueARN string // the SQS queue the token is sent to
	RoleARN  string // the role EventBridge Scheduler assumes to send it
	DLQARN   string // optional: where undeliverable slots go
}

// Retry maps a catch-up policy to EventBridge's retry policy. EventBridge
// has no missed slots of its own (it fires every slot); what can be late is
// a delivery to SQS, which it retries for up to MaximumEventAgeInSeconds.
// none: no retry; latest and all: retries for the policy's maximum age,
// between 60 s and a day as EventBridge allows.
func Retry(c CatchUp) *types.RetryPolicy {
	if c.Mode == None {
		return &types.RetryPolicy{MaximumRetryAttempts: aws.Int32(0), MaximumEventAgeInSeconds: aws.Int32(60)}
	}
	age := int32(min(max(c.maxAge()/time.Second, 60), 86400))
	return &types.RetryPolicy{MaximumRetryAttempts: aws.Int32(185), MaximumEventAgeInSeconds: aws.Int32(age)}
}

func (b EventBridge) group() string {
	if b.Group == "" {
		return "default"
	}
	return b.Group
}

func (b EventBridge) call(ctx context.Context) (context.Context, context.CancelFunc) {
	d := b.CallTimeout
	if d <= 0 {
		d = 10 * time.Second
	}
	return context.WithTimeout(ctx, d)
}

// Create creates the schedule s with target t. s.Expr must parse with the
// AWS syntax and have a slot to come (CheckFires).
func (b EventBridge) Create(ctx context.Context, s Spec, t Target) error {
	if err := s.Validate(); err != nil {
		return err
	}
	if _, err := Parse(s.Expr.String(), AWS); err != nil {
		return err
	}
	if err := s.CheckFires(time.Now()); err != nil {
		return err
	}
	input, err := s.Input()
	if err != nil {
		return err
	}
	in := &scheduler.CreateScheduleInput{
		Name:               aws.String(s.Name),
		GroupName:          aws.String(b.group()),
		ScheduleExpression: aws.String(s.Expr.String()),
		FlexibleTimeWindow: &types.FlexibleTimeWindow{Mode: types.FlexibleTimeWindowModeOff},
		Description:        aws.String(descriptionPrefix + s.CatchUp.String()),
		State:              types.ScheduleStateEnabled,
		Target: &types.Target{
			Arn:         aws.String(t.QueueARN),
			RoleArn:     aws.String(t.RoleARN),
			Input:       aws.String(input),
			RetryPolicy: Retry(s.CatchUp),
		},
	}
	if s.Location != nil {
		in.ScheduleExpressionTimezone = aws.String(s.Location.String())
	}
	if t.DLQARN != "" {
		in.Target.DeadLetterConfig = &types.DeadLetterConfig{Arn: aws.String(t.DLQARN)}
	}
	ctx, cancel := b.call(ctx)
	defer cancel()
	if _, err := b.API.CreateSchedule(ctx, in); err != nil {
		return b.translate("create", s.Name, err)
	}
	return nil
}

// Delete deletes the schedule name.
func (b EventBridge) Delete(ctx context.Context, name string) error {
	if err := CheckName(name); err != nil {
		return err
	}
	ctx, cancel := b.call(ctx)
	defer cancel()
	_, err := b.API.DeleteSchedule(ctx, &scheduler.DeleteScheduleInput{Name: aws.String(name), GroupName: aws.String(b.group())})
	if err != nil {
		return b.translate("delete", name, err)
	}
	return nil
}

// Listed is one schedule of the group: a leasehold schedule (OK, with its
// Spec) or another (only Name, Expression and State are set).
type Listed struct {
	Spec       Spec
	OK         bool
	Name       string
	Expression string
	Timezone   string
	State      string
	Problem    string // why a schedule that looks like leasehold's cannot be fired
}

// List returns the group's schedules, each read in full (ListSchedules
// does not return a target's Input).
func (b EventBridge) List(ctx context.Context) ([]Listed, error) {
	return b.list(ctx, false)
}

// list is List; enabledOnly leaves disabled schedules out without reading
// them.
func (b EventBridge) list(ctx context.Context, enabledOnly bool) ([]Listed, error) {
	var out []Listed
	var next *string
	for {
		cctx, cancel := b.call(ctx)
		page, err := b.API.ListSchedules(cctx, &scheduler.ListSchedulesInput{GroupName: aws.String(b.group()), NextToken: next})
		cancel()
		if err != nil {
			return nil, b.translate("list", b.group(), err)
		}
		for _, sum := range page.Schedules {
			if enabledOnly && sum.State == types.ScheduleStateDisabled {
				continue
			}
			name := aws.ToString(sum.Name)
			cctx, cancel := b.call(ctx)
			got, err := b.API.GetSchedule(cctx, &scheduler.GetScheduleInput{Name: sum.Name, GroupName: aws.String(b.group())})
			cancel()
			if errors.As(err, new(*types.ResourceNotFoundException)) {
				continue // deleted since the list
			}
			if err != nil {
				return nil, b.translate("get", name, err)
			}
			out = append(out, read(got))
		}
		if next = page.NextToken; next == nil {
			return out, nil
		}
	}
}

// read turns a GetSchedule answer into a Listed.
func read(g *scheduler.GetScheduleOutput) Listed {
	l := Listed{
		Name: aws.ToString(g.Name), Expression: aws.ToString(g.ScheduleExpression),
		Timezone: aws.ToString(g.ScheduleExpressionTimezone), State: string(g.State),
	}
	if g.Target == nil {
		return l
	}
	s, ok := FromInput(aws.ToString(g.Target.Input))
	if !ok || s.Name != l.Name {
		return l
	}
	fail := func(format string, args ...any) Listed {
		l.Problem = fmt.Sprintf(format, args...)
		return l
	}
	var err error
	if s.Expr, err = Parse(l.Expression, Local); err != nil {
		return fail("%v", err)
	}
	if l.Timezone != "" && l.Timezone != "UTC" {
		if s.Location, err = time.LoadLocation(l.Timezone); err != nil {
			return fail("time zone %q: %v", l.Timezone, err)
		}
	}
	if c, found := strings.CutPrefix(aws.ToString(g.Description), descriptionPrefix); found {
		if s.CatchUp, err = ParseCatchUp(c); err != nil {
			return fail("%v", err)
		}
	}
	// Slot times are whole seconds, as EventBridge writes them.
	switch {
	case g.StartDate != nil:
		s.Anchor = g.StartDate.Truncate(time.Second)
	case g.CreationDate != nil:
		s.Anchor = g.CreationDate.Truncate(time.Second)
	}
	l.Spec, l.OK = s, true
	return l
}

// Specs lists the group's enabled leasehold schedules, for Config.List.
func (b EventBridge) Specs(ctx context.Context) ([]Spec, error) {
	all, err := b.list(ctx, true)
	if err != nil {
		return nil, err
	}
	var out []Spec
	for _, l := range all {
		if l.OK && l.State != string(types.ScheduleStateDisabled) {
			out = append(out, l.Spec)
		}
	}
	return out, nil
}

// translate maps the service's errors to this package's sentinels.
func (b EventBridge) translate(op, name string, err error) error {
	switch {
	case errors.As(err, new(*types.ResourceNotFoundException)):
		return fmt.Errorf("%s schedule %s in group %s: %w: %w", op, name, b.group(), ErrNotFound, err)
	case errors.As(err, new(*types.ConflictException)):
		return fmt.Errorf("%s schedule %s in group %s: %w: %w", op, name, b.group(), ErrExists, err)
	case errors.As(err, new(*types.ValidationException)):
		return fmt.Errorf("%s schedule %s: %w: %w", op, name, ErrInvalid, err)
	}
	return fmt.Errorf("%s schedule %s: %w", op, name, err)
}
