package schedule_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	schedtypes "github.com/aws/aws-sdk-go-v2/service/scheduler/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/internal/schedule"
)

// The stack's EventBridge Scheduler (LocalStack) stores what Create writes,
// and List reads back the spec `leasehold run --fire-schedules` fires.
func TestEventBridgeCreateListDeleteOnStack(t *testing.T) {
	t.Parallel()
	cfg := awstest.Config(t)
	if os.Getenv("AWS_ENDPOINT_URL_SCHEDULER") == "" {
		msg := "AWS_ENDPOINT_URL_SCHEDULER unset: this stack's environment predates the scheduler service (eval \"$(scripts/stack.sh env)\" again)"
		if os.Getenv("LEASEHOLD_REQUIRE_STACK") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	api := scheduler.NewFromConfig(cfg)
	qs := awstest.NewQueues(t, cfg)
	group := "lh-test-" + time.Now().UTC().Format("150405.000000")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := api.CreateScheduleGroup(ctx, &scheduler.CreateScheduleGroupInput{Name: aws.String(group)}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := api.DeleteScheduleGroup(ctx, &scheduler.DeleteScheduleGroupInput{Name: aws.String(group)}); err != nil {
			t.Errorf("delete group %s: %v", group, err)
		}
	})
	attrs, err := sqs.NewFromConfig(cfg).GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(qs.Work),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	target := schedule.Target{QueueARN: attrs.Attributes["QueueArn"], RoleARN: "arn:aws:iam::000000000000:role/test"}

	eb := schedule.EventBridge{API: api, Group: group}
	e, _ := schedule.Parse("cron(30 9 ? * MON-FRI *)", schedule.AWS)
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	spec := schedule.Spec{Name: "standup", Expr: e, Location: paris, Kind: "greet", Payload: []byte(`{"name":"team"}`),
		CatchUp: schedule.CatchUp{Mode: schedule.All, Limit: 3, MaxAge: 30 * time.Minute}}
	if err := eb.Create(t.Context(), spec, target); err != nil {
		t.Fatal(err)
	}
	if err := eb.Create(t.Context(), spec, target); !errors.Is(err, schedule.ErrExists) {
		t.Fatalf("second Create = %v, want ErrExists", err)
	}
	specs, err := eb.Specs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 1 {
		t.Fatalf("Specs = %+v, want the one created", specs)
	}
	got := specs[0]
	if got.Name != "standup" || got.Expr.String() != e.String() || got.Location.String() != "Europe/Paris" || got.Kind != "greet" ||
		string(got.Payload) != `{"name":"team"}` || got.CatchUp != spec.CatchUp {
		t.Fatalf("read back %+v, want %+v", got, spec)
	}
	// A disabled schedule is listed but not fired.
	paused := spec
	paused.Name = "paused"
	if err := eb.Create(t.Context(), paused, target); err != nil {
		t.Fatal(err)
	}
	def, err := api.GetSchedule(ctx, &scheduler.GetScheduleInput{Name: aws.String("paused"), GroupName: aws.String(group)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.UpdateSchedule(ctx, &scheduler.UpdateScheduleInput{Name: def.Name, GroupName: def.GroupName,
		ScheduleExpression: def.ScheduleExpression, ScheduleExpressionTimezone: def.ScheduleExpressionTimezone,
		Description: def.Description, FlexibleTimeWindow: def.FlexibleTimeWindow, Target: def.Target,
		State: schedtypes.ScheduleStateDisabled}); err != nil {
		t.Fatal(err)
	}
	listed, err := eb.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if specs, err = eb.Specs(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(listed) != 2 || len(specs) != 1 || specs[0].Name != "standup" {
		t.Fatalf("with one disabled: List = %d schedules, Specs = %+v; want 2 listed and standup only fired", len(listed), specs)
	}
	if err := eb.Delete(t.Context(), "paused"); err != nil {
		t.Fatal(err)
	}
	if err := eb.Delete(t.Context(), "standup"); err != nil {
		t.Fatal(err)
	}
	if err := eb.Delete(t.Context(), "standup"); !errors.Is(err, schedule.ErrNotFound) {
		t.Fatalf("second Delete = %v, want ErrNotFound", err)
	}
	// A rate in seconds is refused before any call.
	sec, _ := schedule.Parse("rate(10 seconds)", schedule.Local)
	if err := eb.Create(t.Context(), schedule.Spec{Name: "fast", Expr: sec, Kind: "k"}, target); !errors.Is(err, schedule.ErrExpression) {
		t.Fatalf("Create of rate(10 seconds) = %v, want ErrExpression", err)
	}
}
