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
)

// fakeMappings is Lambda's event source mappings: two on the queue, one on
// another, listed a page at a time.
type fakeMappings struct {
	mu      sync.Mutex
	arns    map[string]string // UUID: source ARN
	enabled map[string]bool
}

func (f *fakeMappings) ListEventSourceMappings(_ context.Context, in *lambda.ListEventSourceMappingsInput, _ ...func(*lambda.Options)) (*lambda.ListEventSourceMappingsOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
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
