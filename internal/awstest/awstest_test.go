package awstest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/leasehold/leasehold/internal/awstest"
)

const callTimeout = 30 * time.Second

func callCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	t.Cleanup(cancel)
	return ctx
}

func TestNewTable(t *testing.T) {
	t.Parallel()
	cfg := awstest.Config(t)
	client := dynamodb.NewFromConfig(cfg)

	var name string
	t.Run("create", func(t *testing.T) {
		name = awstest.NewTable(t, cfg)
		if !strings.HasPrefix(name, "leasehold-tasks-") {
			t.Errorf("table name %q does not derive from leasehold-tasks", name)
		}

		out, err := client.DescribeTable(callCtx(t), &dynamodb.DescribeTableInput{TableName: aws.String(name)})
		if err != nil {
			t.Fatalf("describe table: %v", err)
		}
		tbl := out.Table
		if tbl.TableStatus != ddbtypes.TableStatusActive {
			t.Errorf("table status = %s, want ACTIVE", tbl.TableStatus)
		}
		if got := keys(tbl.KeySchema); got != "id:HASH" {
			t.Errorf("table key = %s, want id:HASH", got)
		}
		if tbl.BillingModeSummary == nil || tbl.BillingModeSummary.BillingMode != ddbtypes.BillingModePayPerRequest {
			t.Errorf("billing mode summary = %+v, want PAY_PER_REQUEST", tbl.BillingModeSummary)
		}

		gsis := map[string]ddbtypes.GlobalSecondaryIndexDescription{}
		for _, g := range tbl.GlobalSecondaryIndexes {
			gsis[aws.ToString(g.IndexName)] = g
		}
		sweep, ok := gsis["sweep"]
		if !ok {
			t.Fatalf("GSI sweep missing; have %v", gsis)
		}
		if got := keys(sweep.KeySchema); got != "sweep_shard:HASH sweep_at:RANGE" {
			t.Errorf("sweep key = %s", got)
		}
		if sweep.Projection == nil || sweep.Projection.ProjectionType != ddbtypes.ProjectionTypeKeysOnly {
			t.Errorf("sweep projection = %+v, want KEYS_ONLY", sweep.Projection)
		}
		// The listings: by time, by kind and by named queue.
		for name, want := range map[string]string{
			"by_created": "list_shard:HASH created_at:RANGE",
			"by_kind":    "list_shard:HASH kind_at:RANGE",
			"by_queue":   "list_shard:HASH queue_at:RANGE",
		} {
			g, ok := gsis[name]
			if !ok {
				t.Fatalf("GSI %s missing; have %v", name, gsis)
			}
			if got := keys(g.KeySchema); got != want {
				t.Errorf("%s key = %s, want %s", name, got, want)
			}
			if p := g.Projection; p == nil || p.ProjectionType != ddbtypes.ProjectionTypeKeysOnly {
				t.Errorf("%s projection = %+v, want KEYS_ONLY", name, p)
			}
		}
		if len(gsis) != 4 {
			t.Errorf("GSIs %v, want sweep, by_created, by_kind and by_queue only", gsis)
		}

		ttl, err := client.DescribeTimeToLive(callCtx(t), &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(name)})
		if err != nil {
			t.Fatalf("describe TTL: %v", err)
		}
		if d := ttl.TimeToLiveDescription; d == nil || aws.ToString(d.AttributeName) != "expires_at" ||
			d.TimeToLiveStatus != ddbtypes.TimeToLiveStatusEnabled {
			t.Errorf("TTL = %+v, want ENABLED on expires_at", d)
		}
	})
	if name == "" {
		t.Fatal("NewTable returned no name")
	}

	// The subtest's cleanup has run: the table must be gone (or going).
	out, err := client.DescribeTable(callCtx(t), &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	var notFound *ddbtypes.ResourceNotFoundException
	switch {
	case errors.As(err, &notFound):
	case err != nil:
		t.Fatalf("describe deleted table: %v", err)
	case out.Table.TableStatus != ddbtypes.TableStatusDeleting:
		t.Errorf("table %s still %s after cleanup", name, out.Table.TableStatus)
	}
}

func TestNewTableUnique(t *testing.T) {
	t.Parallel()
	cfg := awstest.Config(t)
	a, b := awstest.NewTable(t, cfg), awstest.NewTable(t, cfg)
	if a == b {
		t.Fatalf("two NewTable calls returned the same table %q", a)
	}
}

func TestNewQueues(t *testing.T) {
	t.Parallel()
	cfg := awstest.Config(t)
	client := sqs.NewFromConfig(cfg)

	var qs awstest.Queues
	t.Run("create", func(t *testing.T) {
		qs = awstest.NewQueues(t, cfg)
		urls := []string{qs.Work, qs.WorkDLQ, qs.Intake, qs.IntakeDLQ}
		if slices.Contains(urls, "") {
			t.Fatalf("missing queue URL in %+v", qs)
		}
		if len(slices.Compact(slices.Sorted(slices.Values(urls)))) != len(urls) {
			t.Fatalf("queue URLs not distinct: %+v", qs)
		}

		for _, tc := range []struct{ name, queue, dlq, maxReceives string }{
			{"work", qs.Work, qs.WorkDLQ, "10"}, // as in template.yaml
			{"intake", qs.Intake, qs.IntakeDLQ, "5"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				attrs := queueAttrs(t, client, tc.queue)
				if got := attrs["VisibilityTimeout"]; got != "60" {
					t.Errorf("VisibilityTimeout = %q, want 60", got)
				}
				var policy struct {
					Target string          `json:"deadLetterTargetArn"`
					Max    json.RawMessage `json:"maxReceiveCount"`
				}
				if err := json.Unmarshal([]byte(attrs["RedrivePolicy"]), &policy); err != nil {
					t.Fatalf("RedrivePolicy %q: %v", attrs["RedrivePolicy"], err)
				}
				if want := queueAttrs(t, client, tc.dlq)["QueueArn"]; policy.Target != want {
					t.Errorf("redrive target = %q, want this test's DLQ %q", policy.Target, want)
				}
				if got := strings.Trim(string(policy.Max), `"`); got != tc.maxReceives {
					t.Errorf("maxReceiveCount = %s, want %s", policy.Max, tc.maxReceives)
				}
			})
		}
	})
	if qs.Work == "" {
		t.Fatal("NewQueues returned no queues")
	}

	// The subtest's cleanup has run: every queue must be gone.
	for _, url := range []string{qs.Work, qs.WorkDLQ, qs.Intake, qs.IntakeDLQ} {
		_, err := client.GetQueueAttributes(callCtx(t), &sqs.GetQueueAttributesInput{
			QueueUrl:       aws.String(url),
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
		})
		var gone *sqstypes.QueueDoesNotExist
		if !errors.As(err, &gone) {
			t.Errorf("queue %s after cleanup: err = %v, want QueueDoesNotExist", url, err)
		}
	}
}

// TestConfigWithoutStack checks that a missing stack skips by default and
// fails when LEASEHOLD_REQUIRE_STACK=1. It sets environment variables, so it
// cannot run in parallel.
func TestConfigWithoutStack(t *testing.T) {
	for _, tc := range []struct {
		name, require string
		want          string
	}{
		{"skips by default", "", "skip"},
		{"fails when required", "1", "fatal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", "")
			t.Setenv("LEASEHOLD_REQUIRE_STACK", tc.require)
			rec := &recordingTB{TB: t}
			done := make(chan struct{})
			go func() {
				defer close(done)
				awstest.Config(rec)
				rec.got = "returned"
			}()
			<-done
			if rec.got != tc.want {
				t.Errorf("Config ended with %s, want %s", rec.got, tc.want)
			}
			if !strings.Contains(rec.msg, "make test") {
				t.Errorf("message %q does not say how to run the stack", rec.msg)
			}
		})
	}
}

// recordingTB records how Config stops a test instead of stopping the real one.
type recordingTB struct {
	testing.TB
	got, msg string
}

func (r *recordingTB) Helper() {}
func (r *recordingTB) Skip(args ...any) {
	r.got, r.msg = "skip", fmt.Sprint(args...)
	runtime.Goexit()
}
func (r *recordingTB) Fatal(args ...any) {
	r.got, r.msg = "fatal", fmt.Sprint(args...)
	runtime.Goexit()
}

func keys(ks []ddbtypes.KeySchemaElement) string {
	parts := make([]string, 0, len(ks))
	for _, k := range ks {
		parts = append(parts, aws.ToString(k.AttributeName)+":"+string(k.KeyType))
	}
	return strings.Join(parts, " ")
}

func queueAttrs(t *testing.T, client *sqs.Client, url string) map[string]string {
	t.Helper()
	out, err := client.GetQueueAttributes(callCtx(t), &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll},
	})
	if err != nil {
		t.Fatalf("get attributes of %s: %v", url, err)
	}
	return out.Attributes
}
