package rules_test

import (
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/rules"
)

// TestAppendHistory: the entry is appended with its error cut, the newest
// MaxHistory entries are kept, the drop is counted, and the result never
// shares the input's array.
func TestAppendHistory(t *testing.T) {
	var h []lease.Attempt
	for i := 1; i <= lease.MaxHistory+3; i++ {
		prev := h
		var dropped int
		h, dropped = rules.AppendHistory(h, lease.Attempt{Attempt: i, Error: strings.Repeat("e", lease.MaxHistoryErrorBytes+10)})
		wantDropped := 0
		if i > lease.MaxHistory {
			wantDropped = 1
		}
		if dropped != wantDropped || len(h) != min(i, lease.MaxHistory) {
			t.Fatalf("entry %d: len %d, dropped %d; want %d, %d", i, len(h), dropped, min(i, lease.MaxHistory), wantDropped)
		}
		if first, last := h[0].Attempt, h[len(h)-1]; first != i-len(h)+1 || last.Attempt != i || len(last.Error) > lease.MaxHistoryErrorBytes {
			t.Fatalf("entry %d: first %d, last %+v", i, first, last.Attempt)
		}
		if len(prev) > 0 {
			h[0].Error = "changed"
			if prev[len(prev)-1].Error == "changed" || prev[0].Error == "changed" {
				t.Fatalf("entry %d: the result shares the input's array", i)
			}
			h[0].Error = ""
		}
	}
}
