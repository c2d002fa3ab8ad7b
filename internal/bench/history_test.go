package bench

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/lease"
)

// TestHistoryCost measures a history past the task's item (issue 36,
// point 1; docs/performance.md, "History beyond the item"): one "history"
// task of 300 steps, then a sleep whose second run replays them. The
// inline steps cost what they did; each operation past them is one write
// of its own item, 1 write unit per KB of it, and the task's item is not
// written for it; the replay reads the tail in pages of 100.
func TestHistoryCost(t *testing.T) {
	h := newHarness(t, 0)
	const n = 300
	for _, bytes := range []int{3, 3000} {
		name := fmt.Sprintf("%d steps of %d bytes", n, bytes)
		r := h.runWorkflows(shape{name: name, perRound: 1, start: func(h *harness, id string) []string {
			h.enqueue(leasehold.Submission{Kind: "history", Payload: echo{N: n, Bytes: bytes}, ID: id})
			return []string{id}
		}}, 1)
		c := r.counts
		head := n
		if bytes*lease.MaxSteps > lease.MaxStepsBytes {
			head = lease.MaxStepsBytes / bytes
		}
		head = min(head, lease.MaxSteps)
		tail := n + 1 - head // and the sleep
		items, spills, checkpoints := c.ByWrite[kindStepItem], c.ByWrite[kindSpill], c.ByWrite["checkpoint"]
		if len(items) != tail || len(spills) != 1 || len(checkpoints) != head {
			t.Fatalf("%s: %d step items, %d spills, %d checkpoints; want %d, 1, %d", name, len(items), len(spills), len(checkpoints), tail, head)
		}
		// Each item is its name, op and result, its key and TTL: within
		// one KB of its result.
		perItem := math.Ceil(float64(bytes+200) / 1024)
		if slices.Max(items) > perItem {
			t.Errorf("%s: a step item cost %.0f write units, want at most %.0f", name, slices.Max(items), perItem)
		}
		batches := c.Calls["DynamoDB BatchGetItem"]
		if want := tail/lease.MaxStepsPage + 1; batches != want {
			t.Errorf("%s: %d BatchGetItem calls, want %d: the replay reads the tail in pages of %d", name, batches, want, lease.MaxStepsPage)
		}
		t.Logf("%s: head %d, tail %d; checkpoints %.2f WU each (mean), spill %.0f WU, step items %.2f WU each (mean); total %.0f WU; replay %d BatchGetItem, %.1f RU",
			name, head, tail, mean(checkpoints), spills[0], mean(items), c.WU, batches, c.RU)
	}
}
