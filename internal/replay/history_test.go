package replay

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/claimcheck"
	"github.com/leasehold/leasehold/internal/lease"
)

// A history file holds what a replay needs of its task, results that are
// not JSON included, and reads back as the same task.
func TestHistoryRoundTrip(t *testing.T) {
	task := lease.Task{
		ID: "order-1", Kind: "order", Status: lease.StatusWaiting, Attempt: 2, Fence: 7,
		Payload:  []byte(`{"items":[1,2]}`),
		Metadata: map[string]string{"tenant": "a"},
		Steps: []lease.Step{
			{Name: "count", Op: "step int", Result: []byte(`2`)},
			{Name: "raw", Result: []byte{0xff, 0x00, 'x'}},
			{Name: "empty", Op: "step"},
		},
		Wait: lease.WaitCallback, CallbackStep: "callback:approval", WaitNote: "n",
	}
	b, err := Of(task, time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)).Encode()
	if err != nil {
		t.Fatal(err)
	}
	h, err := Decode(b)
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	got := h.task()
	want := lease.Task{
		ID: task.ID, Kind: task.Kind, Status: task.Status, Attempt: task.Attempt, Fence: task.Fence,
		Payload: task.Payload, Metadata: task.Metadata, Steps: task.Steps,
		Wait: task.Wait, CallbackStep: task.CallbackStep, WaitNote: task.WaitNote,
	}
	got.Steps[2].Result = nil // no result is no result, whichever nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, want)
	}
}

func TestInFlight(t *testing.T) {
	for _, c := range []struct {
		t    lease.Task
		want bool
	}{
		{lease.Task{Status: lease.StatusPending}, false},
		{lease.Task{Status: lease.StatusPending, Steps: []lease.Step{{Name: "a"}}}, true},
		{lease.Task{Status: lease.StatusWaiting, Wait: lease.WaitCallback}, true},
		{lease.Task{Status: lease.StatusRunning, Steps: []lease.Step{{Name: "a"}}}, true},
		{lease.Task{Status: lease.StatusSucceeded, Steps: []lease.Step{{Name: "a"}}}, false},
		{lease.Task{Status: lease.StatusFailed, Wait: lease.WaitChildren}, false},
	} {
		if got := InFlight(c.t); got != c.want {
			t.Errorf("InFlight(%s, %d steps, wait %q) = %t", c.t.Status, len(c.t.Steps), c.t.Wait, got)
		}
	}
}

// The operation a waiting task waits in, which the replay's first call
// beyond the history must be.
func TestAwaiting(t *testing.T) {
	for _, c := range []struct {
		name     string
		t        lease.Task
		op, with string
	}{
		{"all", lease.Task{ID: "p", Wait: lease.WaitChildren, WaitFor: []string{"p/kids/0", "p/kids/1"}}, "children:kids", "all 2"},
		{"map wave", lease.Task{ID: "p", Wait: lease.WaitChildren, WaitFor: []string{"p/items/10"}, WaitNote: `{"map":"items","shape":"map 50/10","waves":1}`}, "map:items", "map 50/10"},
		{"all recorded", lease.Task{ID: "p", Wait: lease.WaitChildren, WaitFor: []string{"p/kids/0"}, Steps: []lease.Step{{Name: "children:kids"}}}, "", ""},
		{"unnamed children", lease.Task{ID: "p", Wait: lease.WaitChildren, WaitFor: []string{"p/0"}}, "", ""},
		{"callback", lease.Task{ID: "p", Status: lease.StatusWaiting, Wait: lease.WaitCallback, CallbackStep: "callback:ok"}, "callback:ok", "callback"},
		{"callback answered", lease.Task{ID: "p", Status: lease.StatusPending, Wait: lease.WaitCallback, CallbackStep: "callback:ok"}, "", ""},
		{"dependencies", lease.Task{ID: "p", Wait: lease.WaitAfter, WaitFor: []string{"q"}}, "", ""},
	} {
		op, with := awaiting(c.t)
		if op != c.op || with != c.with {
			t.Errorf("%s: awaiting = %q %q, want %q %q", c.name, op, with, c.op, c.with)
		}
	}
}

// Resolve reads every value the history refers to in the payload bucket
// (a 100 KB step result, and a child's result inside recorded outcomes)
// into the file, once each, reading only; the file carries them byte for
// byte. Without a bucket it reads nothing.
func TestHistoryResolvesTheBucketsValues(t *testing.T) {
	ctx := t.Context()
	mem := claimcheck.NewMemory()
	c := &claimcheck.Checker{Blobs: mem}
	step := []byte(`"` + strings.Repeat("s", 100<<10) + `"`)
	child := []byte(`{"n":"` + strings.Repeat("c", 70<<10) + `"}`)
	stepRef, err := c.Stow(ctx, "p", claimcheck.WhatStep(0), step, 0)
	if err != nil {
		t.Fatal(err)
	}
	childRef, err := c.Stow(ctx, "p/kids/0", claimcheck.WhatResult, child, 0)
	if err != nil {
		t.Fatal(err)
	}
	outcomes := []byte(`[{"id":"p/kids/0","status":"SUCCEEDED","result":` + string(childRef) + `}]`)
	task := lease.Task{ID: "p", Kind: "k", Status: lease.StatusWaiting, Steps: []lease.Step{
		{Name: "big", Op: "step string", Result: stepRef},
		{Name: "children:kids", Op: "all 1", Result: outcomes},
		{Name: "again", Op: "step string", Result: stepRef},
	}}
	h := Of(task, time.Now())
	if err := h.Resolve(ctx, nil); err != nil || h.Blobs != nil {
		t.Fatalf("Resolve without a bucket: %v, %d values", err, len(h.Blobs))
	}
	puts := mem.Puts.Load()
	if err := h.Resolve(ctx, c); err != nil {
		t.Fatal(err)
	}
	if n := mem.Gets.Load(); n != 2 || mem.Puts.Load() != puts {
		t.Errorf("%d reads and %d writes of the bucket, want 2 reads and none", n, mem.Puts.Load()-puts)
	}
	b, err := h.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	file := &claimcheck.Checker{Blobs: fileBlobs(back.Blobs)}
	for ref, want := range map[string][]byte{string(stepRef): step, string(childRef): child} {
		if got, err := file.Fetch(ctx, []byte(ref)); err != nil || !bytes.Equal(got, want) {
			t.Errorf("the file's value for %.60s: %d bytes, %v; want %d", ref, len(got), err, len(want))
		}
	}
}
