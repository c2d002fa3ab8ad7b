package queues

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

func TestCheckName(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		ok   bool
	}{
		{"leasehold-work", true},
		{"a", true},
		{"Under_score-9", true},
		{strings.Repeat("q", 80), true},
		{"", false},
		{strings.Repeat("q", 81), false},
		{"jobs.fifo", false},
		{"has space", false},
		{"dot.ted", false},
		{"ünï", false},
	}
	for _, c := range cases {
		err := CheckName(c.name)
		if (err == nil) != c.ok {
			t.Errorf("CheckName(%q) = %v, want ok=%v", c.name, err, c.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidName) {
			t.Errorf("CheckName(%q) = %v, want ErrInvalidName", c.name, err)
		}
	}
}

func TestNames(t *testing.T) {
	t.Parallel()
	if got := NameFromURL("http://127.0.0.1:4566/000000000000/leasehold-work"); got != "leasehold-work" {
		t.Errorf("NameFromURL = %q", got)
	}
	if got := NameFromURL("http://host"); got != "" {
		t.Errorf("NameFromURL without path = %q", got)
	}
	name, account := NameFromARN("arn:aws:sqs:us-east-1:123456789012:images")
	if name != "images" || account != "123456789012" {
		t.Errorf("NameFromARN = %q, %q", name, account)
	}
	if name, _ := NameFromARN("arn:aws:sns:us-east-1:1:x"); name != "" {
		t.Errorf("NameFromARN of an SNS ARN = %q", name)
	}
}

type fakeSQS struct {
	calls atomic.Int32
	urls  map[string]string
}

func (f *fakeSQS) GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, _ ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	f.calls.Add(1)
	if _, ok := ctx.Deadline(); !ok {
		return nil, errors.New("call without a deadline")
	}
	u, ok := f.urls[aws.ToString(in.QueueName)]
	if !ok {
		return nil, &types.QueueDoesNotExist{Message: aws.String("no such queue")}
	}
	return &sqs.GetQueueUrlOutput{QueueUrl: aws.String(u)}, nil
}

func TestResolver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := &fakeSQS{urls: map[string]string{"images": "http://q/1/images"}}
	r := NewResolver(f, "http://q/1/work", 0, "http://q/1/served")

	for _, c := range []struct{ name, want string }{
		{"", "http://q/1/work"}, {"work", "http://q/1/work"}, {"served", "http://q/1/served"},
	} {
		if got, err := r.URL(ctx, c.name); err != nil || got != c.want {
			t.Errorf("URL(%q) = %q, %v; want %q", c.name, got, err, c.want)
		}
	}
	if n := f.calls.Load(); n != 0 {
		t.Fatalf("known queues made %d lookups", n)
	}
	for range 3 {
		if got, err := r.URL(ctx, "images"); err != nil || got != "http://q/1/images" {
			t.Fatalf("URL(images) = %q, %v", got, err)
		}
	}
	if n := f.calls.Load(); n != 1 {
		t.Errorf("three resolutions of one name made %d lookups, want 1 (cached)", n)
	}
	if _, err := r.URL(ctx, "gone"); !errors.Is(err, ErrNotFound) {
		t.Errorf("URL(gone) = %v, want ErrNotFound", err)
	}
	if _, err := r.URL(ctx, "bad.fifo"); !errors.Is(err, ErrInvalidName) {
		t.Errorf("URL(bad.fifo) = %v, want ErrInvalidName", err)
	}
	if got, err := r.URLOf(ctx, "arn:aws:sqs:us-east-1:1:images"); err != nil || got != "http://q/1/images" {
		t.Errorf("URLOf = %q, %v", got, err)
	}
}
