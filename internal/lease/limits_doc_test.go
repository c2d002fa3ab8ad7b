package lease_test

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/durable"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/inbox"
	"github.com/leasehold/leasehold/internal/metadata"
)

// TestLimitsTableMatchesTheCode: docs/limits.md lists every limit with the
// constant that holds it; the numbers must be the code's, and every limit
// must be listed.
func TestLimitsTableMatchesTheCode(t *testing.T) {
	t.Parallel()
	code := map[string]int{
		"lease.MaxIDBytes":           lease.MaxIDBytes,
		"lease.MaxKindBytes":         lease.MaxKindBytes,
		"lease.MaxPayloadBytes":      lease.MaxPayloadBytes,
		"lease.MaxJSONDepth":         lease.MaxJSONDepth,
		"lease.MaxResultBytes":       lease.MaxResultBytes,
		"lease.MaxErrorBytes":        lease.MaxErrorBytes,
		"lease.MaxHistory":           lease.MaxHistory,
		"lease.MaxHistoryErrorBytes": lease.MaxHistoryErrorBytes,
		"lease.MaxSteps":             lease.MaxSteps,
		"lease.MaxStepNameBytes":     lease.MaxStepNameBytes,
		"lease.MaxStepsBytes":        lease.MaxStepsBytes,
		"lease.MaxOperations":        lease.MaxOperations,
		"lease.MaxStepsPage":         lease.MaxStepsPage,
		"lease.MaxChildren":          lease.MaxChildren,
		"lease.MaxAfter":             lease.MaxAfter,
		"lease.MaxWaiters":           lease.MaxWaiters,
		"lease.MaxAttemptsLimit":     lease.MaxAttemptsLimit,
		"lease.MaxItemBytes":         lease.MaxItemBytes,
		"durable.OutcomesPage":       durable.OutcomesPage,
		"metadata.MaxEntries":        metadata.MaxEntries,
		"metadata.MaxKeyBytes":       metadata.MaxKeyBytes,
		"metadata.MaxValueBytes":     metadata.MaxValueBytes,
		"metadata.MaxTotalBytes":     metadata.MaxTotalBytes,
		"inbox.MaxMessageBytes":      inbox.MaxMessageBytes,
		"inbox.MaxUnread":            inbox.MaxUnread,
		"inbox.MaxTopics":            inbox.MaxTopics,
		"inbox.MaxMessageIDBytes":    inbox.MaxMessageIDBytes,
		"inbox.MaxEventBytes":        inbox.MaxEventBytes,
	}
	doc, err := os.ReadFile("../../docs/limits.md")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for line := range strings.SplitSeq(string(doc), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 5 {
			continue
		}
		if constant := strings.TrimSpace(cells[3]); !strings.HasPrefix(constant, "`lease.") && !strings.HasPrefix(constant, "`metadata.") && !strings.HasPrefix(constant, "`durable.") && !strings.HasPrefix(constant, "`inbox.") {
			continue
		}
		name := strings.Trim(strings.TrimSpace(cells[3]), "`")
		want, ok := code[name]
		if !ok {
			t.Errorf("docs/limits.md lists %s, which this test does not know", name)
			continue
		}
		got, err := strconv.Atoi(strings.TrimSpace(cells[2]))
		if err != nil || got != want {
			t.Errorf("docs/limits.md: %s is %q, the code says %d", name, strings.TrimSpace(cells[2]), want)
		}
		seen[name] = true
	}
	for name := range code {
		if !seen[name] {
			t.Errorf("docs/limits.md does not list %s", name)
		}
	}
}
