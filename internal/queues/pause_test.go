package queues

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// fakeTags is the tags of some queues, with the ListQueueTags calls made
// per queue URL.
type fakeTags struct {
	mu     sync.Mutex
	paused map[string]bool
	failed map[string]bool
	calls  map[string]int
}

func (f *fakeTags) ListQueueTags(ctx context.Context, in *sqs.ListQueueTagsInput, _ ...func(*sqs.Options)) (*sqs.ListQueueTagsOutput, error) {
	if _, ok := ctx.Deadline(); !ok {
		return nil, errors.New("call without a deadline")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	u := aws.ToString(in.QueueUrl)
	f.calls[u]++
	if f.failed[u] {
		return nil, errors.New("AccessDenied")
	}
	out := &sqs.ListQueueTagsOutput{Tags: map[string]string{}}
	if f.paused[u] {
		out.Tags[PausedTag] = "2026-12-01T12:00:00Z"
	}
	return out, nil
}

func (f *fakeTags) callsTo(u string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[u]
}

// Each queue has its own cached answer, read once per period however often
// it is asked; a failed read is not paused and is reported once; and the
// set keeps at most MaxPauseChecks queues, dropping the one asked about
// least recently.
func TestPauseChecksArePerQueueAndBounded(t *testing.T) {
	t.Parallel()
	f := &fakeTags{paused: map[string]bool{"http://q/1/a": true}, failed: map[string]bool{"http://q/1/bad": true}, calls: map[string]int{}}
	var mu sync.Mutex
	var errs []string
	s := &PauseChecks{Client: f, Every: time.Hour, CallTimeout: time.Second, OnError: func(u string, err error) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, u)
	}}
	ctx := t.Context()
	for range 3 {
		if !s.Paused(ctx, "http://q/1/a") || s.Paused(ctx, "http://q/1/b") || s.Paused(ctx, "http://q/1/bad") {
			t.Fatal("a is paused, b is not, and a queue whose tags cannot be read counts as not paused")
		}
	}
	for _, u := range []string{"http://q/1/a", "http://q/1/b", "http://q/1/bad"} {
		if n := f.callsTo(u); n != 1 {
			t.Errorf("%s: %d reads in one period, want 1", u, n)
		}
	}
	if fmt.Sprint(errs) != "[http://q/1/bad]" {
		t.Errorf("failed reads reported for %v, want bad's once", errs)
	}

	// More queues than the bound: a is asked about again and again, so it
	// stays; b, asked about least recently, is dropped first.
	for i := range MaxPauseChecks {
		s.Paused(ctx, "http://q/1/a")
		s.Paused(ctx, fmt.Sprintf("http://q/1/other-%d", i))
	}
	s.mu.Lock()
	kept := len(s.checks)
	_, keptA := s.checks["http://q/1/a"]
	_, keptB := s.checks["http://q/1/b"]
	s.mu.Unlock()
	if kept != MaxPauseChecks || !keptA || keptB {
		t.Fatalf("kept %d queues (a: %t, b: %t); want %d, a kept and b dropped", kept, keptA, keptB, MaxPauseChecks)
	}
	if n := f.callsTo("http://q/1/a"); n != 1 {
		t.Errorf("a read %d times; want its cached answer throughout", n)
	}
	s.Paused(ctx, "http://q/1/b")
	if n := f.callsTo("http://q/1/b"); n != 2 {
		t.Errorf("b read %d times; a dropped queue asked about again is read again", n)
	}
}
