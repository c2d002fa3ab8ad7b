package awstest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/leasehold/leasehold/internal/awsenv"
)

// Environment variables read by Config.
const (
	envEndpointDynamoDB = "AWS_ENDPOINT_URL_DYNAMODB"
	envEndpointSQS      = "AWS_ENDPOINT_URL_SQS"
	envRequireStack     = "LEASEHOLD_REQUIRE_STACK"
)

const (
	// callTimeout bounds every single SDK call made by this package.
	callTimeout = 30 * time.Second
	// httpTimeout bounds one HTTP round trip of the returned config's clients.
	httpTimeout = 30 * time.Second
	// tableActiveTimeout bounds the wait for a new table to become ACTIVE.
	tableActiveTimeout = 2 * time.Minute

	defaultRegion = "us-east-1"
)

// Queues holds the URLs of one test's queue set.
type Queues struct {
	Work, WorkDLQ, Intake, IntakeDLQ string
}

// queueFields maps the queue names of resources.json to the Queues field
// that receives the URL of the per-test copy.
func (q *Queues) fields() map[string]*string {
	return map[string]*string{
		"leasehold-work":       &q.Work,
		"leasehold-work-dlq":   &q.WorkDLQ,
		"leasehold-intake":     &q.Intake,
		"leasehold-intake-dlq": &q.IntakeDLQ,
	}
}

// Config returns an AWS config for the local stack. Endpoints come only from
// AWS_ENDPOINT_URL_DYNAMODB and AWS_ENDPOINT_URL_SQS; when either is unset
// the test is skipped, or fails when LEASEHOLD_REQUIRE_STACK=1 (as under
// `make test`), so a missing stack never passes silently in CI. The region
// defaults to us-east-1 and the credentials to test/test when the
// environment sets none.
func Config(t testing.TB) aws.Config {
	t.Helper()
	if os.Getenv(envEndpointDynamoDB) == "" || os.Getenv(envEndpointSQS) == "" {
		msg := "local AWS stack not configured (" + envEndpointDynamoDB + "/SQS unset): run `make test`, which starts it"
		if os.Getenv(envRequireStack) == "1" {
			t.Fatal(msg + " [" + envRequireStack + "=1]")
		}
		t.Skip(msg)
	}

	opts := []func(*config.LoadOptions) error{
		config.WithHTTPClient(awshttp.NewBuildableClient().WithTimeout(httpTimeout)),
	}
	if os.Getenv("AWS_REGION") == "" {
		opts = append(opts, config.WithRegion(defaultRegion))
	}
	if os.Getenv("AWS_ACCESS_KEY_ID") == "" || os.Getenv("AWS_SECRET_ACCESS_KEY") == "" {
		// Never fall back to a shared profile's real credentials.
		opts = append(opts, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider("test", "test", "")))
	}

	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		t.Fatalf("awstest: load AWS config: %v", err)
	}
	// The SDK cannot lose an answer by closing a request body early.
	cfg.HTTPClient = awsenv.GuardHTTP(cfg.HTTPClient)
	return cfg
}

// NewTable creates a uniquely named tasks table from localstack/resources.json,
// waits until it is ACTIVE, enables its TTL and deletes it when the test ends.
// It returns the table name.
func NewTable(t testing.TB, cfg aws.Config) string {
	t.Helper()
	def := loadResources(t).Table
	client := dynamodb.NewFromConfig(cfg)

	in := def.CreateTable
	name := aws.ToString(in.TableName) + "-" + uniqueSuffix(t)
	in.TableName = aws.String(name)

	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	_, err := client.CreateTable(ctx, &in)
	cancel()
	// The name is unique to this test, so a table that already exists is
	// this call's own: the SDK retried a create that the emulator had
	// completed but answered too late.
	var inUse *ddbtypes.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		t.Fatalf("awstest: create table %s: %v", name, err)
	}
	t.Cleanup(func() {
		// t.Context() is already cancelled when cleanups run.
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		// A not-found answer is a retried delete meeting its own landing
		// (the name is unique to this test).
		var gone *ddbtypes.ResourceNotFoundException
		if _, err := client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)}); err != nil && !errors.As(err, &gone) {
			t.Errorf("awstest: delete table %s: %v", name, err)
		}
	})

	waiter := dynamodb.NewTableExistsWaiter(client, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay = 100 * time.Millisecond
		o.MaxDelay = 2 * time.Second
	})
	ctx, cancel = context.WithTimeout(t.Context(), tableActiveTimeout)
	err = waiter.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, tableActiveTimeout)
	cancel()
	if err != nil {
		t.Fatalf("awstest: wait for table %s to become ACTIVE: %v", name, err)
	}

	if ttl := def.TimeToLiveSpecification; ttl != nil {
		ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
		_, err := client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
			TableName:               aws.String(name),
			TimeToLiveSpecification: ttl,
		})
		cancel()
		if err != nil {
			t.Fatalf("awstest: enable TTL on table %s: %v", name, err)
		}
	}
	return name
}

// NewQueues creates a uniquely named copy of every queue in
// localstack/resources.json, with each redrive policy pointing at this
// test's own dead-letter queue, and deletes them when the test ends.
func NewQueues(t testing.TB, cfg aws.Config) Queues {
	t.Helper()
	defs := loadResources(t).Queues
	client := sqs.NewFromConfig(cfg)
	suffix := uniqueSuffix(t)

	var qs Queues
	fields := qs.fields()
	if len(defs) != len(fields) {
		t.Fatalf("awstest: resources.json defines %d queues, awstest.Queues has %d fields", len(defs), len(fields))
	}

	arns := make(map[string]string, len(defs)) // base name -> ARN of this test's copy
	for _, def := range defs {
		base := aws.ToString(def.CreateQueue.QueueName)
		field, ok := fields[base]
		if !ok {
			t.Fatalf("awstest: resources.json queue %q has no field in awstest.Queues", base)
		}

		in := def.CreateQueue
		in.QueueName = aws.String(base + "-" + suffix)
		in.Attributes = make(map[string]string, len(def.CreateQueue.Attributes)+1)
		for k, v := range def.CreateQueue.Attributes {
			in.Attributes[k] = v
		}
		if rp := def.RedrivePolicy; rp != nil {
			// resources.json lists a dead-letter queue before the queues
			// that redrive to it.
			target, ok := arns[rp.DeadLetterTargetQueueName]
			if !ok {
				t.Fatalf("awstest: queue %q redrives to %q, which is not defined before it", base, rp.DeadLetterTargetQueueName)
			}
			policy, err := json.Marshal(map[string]any{
				"deadLetterTargetArn": target,
				"maxReceiveCount":     rp.MaxReceiveCount,
			})
			if err != nil {
				t.Fatalf("awstest: encode redrive policy of %q: %v", base, err)
			}
			in.Attributes[string(sqstypes.QueueAttributeNameRedrivePolicy)] = string(policy)
		}

		url := createQueue(t, client, &in)
		*field = url
		arns[base] = queueARN(t, client, url)
	}
	return qs
}

func createQueue(t testing.TB, client *sqs.Client, in *sqs.CreateQueueInput) string {
	t.Helper()
	name := aws.ToString(in.QueueName)
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	out, err := client.CreateQueue(ctx, in)
	cancel()
	if err != nil {
		t.Fatalf("awstest: create queue %s: %v", name, err)
	}
	url := aws.ToString(out.QueueUrl)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		var gone *sqstypes.QueueDoesNotExist
		if _, err := client.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(url)}); err != nil && !errors.As(err, &gone) {
			t.Errorf("awstest: delete queue %s: %v", name, err)
		}
	})
	return url
}

func queueARN(t testing.TB, client *sqs.Client, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	out, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
	})
	if err != nil {
		t.Fatalf("awstest: get ARN of queue %s: %v", url, err)
	}
	arn := out.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]
	if arn == "" {
		t.Fatalf("awstest: queue %s has no QueueArn attribute", url)
	}
	return arn
}

// resources mirrors localstack/resources.json. The inner objects have the
// shapes of the AWS API inputs, so the SDK's input structs decode them.
type resources struct {
	Table struct {
		CreateTable             dynamodb.CreateTableInput
		TimeToLiveSpecification *ddbtypes.TimeToLiveSpecification
	}
	Queues []struct {
		CreateQueue sqs.CreateQueueInput
		// RedrivePolicy names its dead-letter queue symbolically; the code
		// that creates the queues resolves the name to an ARN.
		RedrivePolicy *struct {
			DeadLetterTargetQueueName string `json:"deadLetterTargetQueueName"`
			MaxReceiveCount           int    `json:"maxReceiveCount"`
		}
	}
}

// resourcesPath locates localstack/resources.json relative to this source
// file, so tests find it whatever their working directory.
func resourcesPath() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("cannot locate the awstest source file")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "localstack", "resources.json"), nil
}

func loadResources(t testing.TB) resources {
	t.Helper()
	path, err := resourcesPath()
	if err != nil {
		t.Fatalf("awstest: %v", err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("awstest: read resource definitions: %v", err)
	}
	var r resources
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("awstest: decode %s: %v", path, err)
	}
	if aws.ToString(r.Table.CreateTable.TableName) == "" {
		t.Fatalf("awstest: %s defines no table", path)
	}
	return r
}

// uniqueSuffix returns a short random name suffix, so parallel tests and
// repeated runs never share a resource.
func uniqueSuffix(t testing.TB) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("awstest: random name: %v", err)
	}
	return "t" + hex.EncodeToString(b[:])
}

// EnvTimeScale names the one factor by which integration tests stretch the
// bounds they wait within (LEASEHOLD_TEST_TIMESCALE, default 1; `make test`
// sets 3). A bound only decides when a test gives up waiting for a
// condition; it is never what a test checks. On a loaded machine the
// emulators answer slower, and the factor keeps a slow run from reading as a
// failed one.
const EnvTimeScale = "LEASEHOLD_TEST_TIMESCALE"

// Scale returns d stretched by LEASEHOLD_TEST_TIMESCALE. An unset, invalid
// or smaller-than-1 factor counts as 1.
func Scale(d time.Duration) time.Duration {
	f, err := strconv.ParseFloat(os.Getenv(EnvTimeScale), 64)
	if err != nil || f < 1 {
		return d
	}
	return time.Duration(float64(d) * f)
}
