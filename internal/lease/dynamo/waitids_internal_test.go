package dynamo

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
)

// A wave of a task's own children is written as a span and decoded back
// to the same ids; anything else stays a list of whole ids.
func TestWaitForSpanRoundTrips(t *testing.T) {
	t.Parallel()
	const id = "01JQ7ZV3X9M2K8B4N6P0R5T7W9"
	kids := func(name string, from, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("%s/%s/%d", id, name, from+i)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		ids  []string
		span string // "" when it must stay a list
	}{
		{"a wave", kids("resize", 100, 50), "50 100 /resize/"},
		{"from zero", kids("m", 0, 2), "2 0 /m/"},
		{"one id stays a list", kids("m", 0, 1), ""},
		{"not consecutive", []string{id + "/m/0", id + "/m/2"}, ""},
		{"not in order", []string{id + "/m/1", id + "/m/0"}, ""},
		{"leading zero", []string{id + "/m/01", id + "/m/02"}, ""},
		{"another task's children", []string{"other/m/0", "other/m/1"}, ""},
		{"dependencies", []string{"a", "b"}, ""},
		{"two names", []string{id + "/a/0", id + "/b/1"}, ""},
		{"a child's own children", []string{id + "/m/0/x/0", id + "/m/0/x/1"}, "2 0 /m/0/x/"},
		{"the id alone", []string{id + "/", id + "/"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := waitSpan(id, tc.ids); got != tc.span {
				t.Fatalf("waitSpan = %q, want %q", got, tc.span)
			}
			task := lease.Task{ID: id, Kind: "k", Status: lease.StatusWaiting, Wait: lease.WaitChildren, WaitFor: tc.ids, MaxAttempts: 1}
			got, err := TaskFromItem(itemOf(task))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.WaitFor, task.WaitFor) && len(task.WaitFor)+len(got.WaitFor) > 0 {
				t.Fatalf("WaitFor round trip: %v, want %v", got.WaitFor, task.WaitFor)
			}
		})
	}
	if _, ok := spanIDs(id, "2 0 m/"); ok {
		t.Fatal("a span whose ids would not be the task's children decoded")
	}
	if _, ok := spanIDs(id, fmt.Sprintf("%d 0 /m/", lease.MaxChildren+1)); ok {
		t.Fatal("a span over MaxChildren decoded")
	}
}

// Ended children are kept relative to the waiter's id, dependencies
// whole; both decode to whole ids, sorted, and an item with both forms of
// one id (written across an upgrade) decodes it once.
func TestEndedIDsRoundTrip(t *testing.T) {
	t.Parallel()
	const id = "parent"
	ended := []string{"dep-a", id + "/m/0", id + "/m/10", "parentless", id + "x/0"}
	item := itemOf(lease.Task{ID: id, Kind: "k", Status: lease.StatusWaiting, Ended: ended, MaxAttempts: 1})
	if attr, elem := endedEntry(id, id+"/m/10"); attr != attrEndedSub || elem != "/m/10" {
		t.Fatalf("endedEntry = %s %q", attr, elem)
	}
	if attr, _ := endedEntry(id, id+"x/0"); attr != attrEnded {
		t.Fatal("an id that only shares the waiter's id as a prefix went relative")
	}
	got, err := TaskFromItem(item)
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Sorted(slices.Values(ended))
	if !slices.Equal(got.Ended, want) {
		t.Fatalf("Ended = %v, want %v", got.Ended, want)
	}
	if got := endedIDs(id, []string{id + "/m/0"}, []string{"/m/0", "/m/1"}); !slices.Equal(got, []string{id + "/m/0", id + "/m/1"}) {
		t.Fatalf("both forms: %v", got)
	}
}

// The point of the compact forms: a task waiting for a wave of 50 of its
// children, all ended, with ids as long as the bench's, fits in 1 KB
// beside its own attributes and its history, so each child's notify is
// one write unit.
func TestAWaveOfFiftyFitsInOneWriteUnit(t *testing.T) {
	t.Parallel()
	id := "bench-map-1000-01JQ7ZV3X9M2K8B4N6P0R5T7W9"
	task := lease.Task{ID: id, Kind: "mapper", Status: lease.StatusWaiting, Wait: lease.WaitChildren, MaxAttempts: 3, Attempt: 1, Fence: 41,
		Payload: []byte(`{"n":1000}`), CreatedAt: time.Now(), UpdatedAt: time.Now(), RunAt: time.Now(), WaitUntil: time.Now(),
		WaitNote: `{"map":"echo","waves":19,"ok":950,"failed":0}`,
		// The attempt's one WAITING entry: each wave's suspension
		// replaces the last (AppendHistory).
		History: []lease.Attempt{{Attempt: 1, Fence: 40, Status: lease.StatusWaiting, At: time.Now()}}}
	for i := range 50 {
		task.WaitFor = append(task.WaitFor, fmt.Sprintf("%s/echo/%d", id, 950+i))
	}
	task.Ended = slices.Clone(task.WaitFor)
	compact, whole := itemSize(itemOf(task)), len(attrWaitFor)+3
	for _, e := range task.WaitFor {
		whole += 1 + len(e) + len(e) // as a list, and again in the ended set
	}
	t.Logf("a wave of 50, all ended: %d bytes compact; the ids alone were %d bytes whole", compact, whole)
	if compact > 1024 {
		t.Fatalf("the waiting task is %d bytes: a notify costs %d write units, not 1", compact, (compact+1023)/1024)
	}
}
