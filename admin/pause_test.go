package admin

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/internal/iam"
	"github.com/leasehold/leasehold/internal/queues"
)

// fakeMappings is Lambda's event source mappings: two on the queue, one on
// another, listed a page at a time.
type fakeMappings struct {
	mu      sync.Mutex
	arns    map[string]string // UUID: source ARN
	enabled map[string]bool
	calls   []string // the IAM action of each call
}

func (f *fakeMappings) ListEventSourceMappings(_ context.Context, in *lambda.ListEventSourceMappingsInput, _ ...func(*lambda.Options)) (*lambda.ListEventSourceMappingsOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "lambda:ListEventSourceMappings")
	var ids []string
	for id, arn := range f.arns {
		if arn == aws.ToString(in.EventSourceArn) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	out := &lambda.ListEventSourceMappingsOutput{}
	start := 0
	if in.Marker != nil {
		start = slices.Index(ids, *in.Marker)
	}
	for i := start; i < len(ids) && i < start+1; i++ { // one a page
		out.EventSourceMappings = append(out.EventSourceMappings, types.EventSourceMappingConfiguration{UUID: aws.String(ids[i])})
		if i+1 < len(ids) {
			out.NextMarker = aws.String(ids[i+1])
		}
	}
	return out, nil
}

func (f *fakeMappings) UpdateEventSourceMapping(_ context.Context, in *lambda.UpdateEventSourceMappingInput, _ ...func(*lambda.Options)) (*lambda.UpdateEventSourceMappingOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "lambda:UpdateEventSourceMapping")
	f.enabled[aws.ToString(in.UUID)] = aws.ToBool(in.Enabled)
	return &lambda.UpdateEventSourceMappingOutput{}, nil
}

// Pause tags the queue and, with lambda, disables the mappings on it (and
// only those); resume undoes both.
func TestPauseTagsTheQueueAndTogglesItsMappings(t *testing.T) {
	t.Parallel()
	cfg := awstest.Config(t)
	qs := awstest.NewQueues(t, cfg)
	a := New(Config{AWS: cfg})
	arn, err := a.QueueARN(t.Context(), qs.Work)
	if err != nil {
		t.Fatal(err)
	}
	fake := &fakeMappings{arns: map[string]string{"m1": arn, "m2": arn, "other": "arn:aws:sqs:us-east-1:000000000000:other"},
		enabled: map[string]bool{"m1": true, "m2": true, "other": true}}
	a.mappings = fake
	if p, _ := a.Paused(t.Context(), qs.Work); p {
		t.Fatal("a new queue reads as paused")
	}
	r, err := a.Pause(t.Context(), qs.Work, true, true)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Paused || r.Since.IsZero() || !slices.Equal(r.Mappings, []string{"m1", "m2"}) || fake.enabled["m1"] || fake.enabled["m2"] || !fake.enabled["other"] {
		t.Fatalf("paused: %+v, mappings enabled %v", r, fake.enabled)
	}
	r, err = a.Pause(t.Context(), qs.Work, false, true)
	if err != nil {
		t.Fatal(err)
	}
	if r.Paused || !fake.enabled["m1"] || !fake.enabled["m2"] {
		t.Fatalf("resumed: %+v, mappings enabled %v", r, fake.enabled)
	}
}

// Pausing and resuming a queue by name, with --lambda, makes exactly the
// calls of the template's PauseQueuesPolicy (internal/iam): each is granted
// there (iam.Enforce fails any other before it is sent), and the policy
// grants nothing the command does not call.
func TestPauseCallsExactlyThePauseQueuesPolicy(t *testing.T) {
	t.Parallel()
	cfg := awstest.Config(t)
	qs := awstest.NewQueues(t, cfg)
	var mu sync.Mutex
	used := map[string]bool{}
	cfg.APIOptions = append(cfg.APIOptions, iam.Enforce(iam.PauseQueues.Calls), iam.Record(func(c iam.Call) {
		mu.Lock()
		used[c.Action] = true
		mu.Unlock()
	}))
	a := New(Config{AWS: cfg})
	fake := &fakeMappings{arns: map[string]string{}, enabled: map[string]bool{}}
	a.mappings = fake
	url, err := a.QueueURL(t.Context(), queues.NameFromURL(qs.Work))
	if err != nil {
		t.Fatal(err)
	}
	arn, err := a.QueueARN(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	fake.arns["m1"], fake.enabled["m1"] = arn, true
	for _, paused := range []bool{true, false} {
		if _, err := a.Pause(t.Context(), url, paused, true); err != nil {
			t.Fatalf("pause=%t: %v", paused, err)
		}
	}
	for _, c := range fake.calls {
		used[c] = true
	}
	granted := map[string]bool{}
	for _, g := range iam.PauseQueues.Calls {
		granted[g.Action] = true
		if !used[g.Action] {
			t.Errorf("PauseQueuesPolicy grants %s on %s, which pause and resume never call", g.Action, g.Resource)
		}
	}
	for action := range used {
		if !granted[action] {
			t.Errorf("pause or resume calls %s, which PauseQueuesPolicy does not grant", action)
		}
	}
}
