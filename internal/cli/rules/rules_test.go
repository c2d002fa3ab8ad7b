package rules_test

import (
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/cli/rules"
)

func TestHandedBack(t *testing.T) {
	t.Parallel()
	h := func(n int) []leasehold.AttemptInfo {
		return []leasehold.AttemptInfo{{Attempt: n, Status: leasehold.StatusPending}}
	}
	for _, c := range []struct {
		name string
		t    leasehold.TaskInfo
		want bool
	}{
		{"snoozed first attempt", leasehold.TaskInfo{Status: leasehold.StatusPending, Attempt: 0, History: h(1)}, true},
		{"snoozed third attempt", leasehold.TaskInfo{Status: leasehold.StatusPending, Attempt: 2, History: h(3)}, true},
		{"retrying after a failure", leasehold.TaskInfo{Status: leasehold.StatusPending, Attempt: 1, History: h(1)}, false},
		{"never run", leasehold.TaskInfo{Status: leasehold.StatusPending}, false},
		{"running after a hold", leasehold.TaskInfo{Status: leasehold.StatusRunning, Attempt: 1, History: h(1)}, true},
		{"running after a failure", leasehold.TaskInfo{Status: leasehold.StatusRunning, Attempt: 2, History: h(1)}, false},
		{"running, first attempt", leasehold.TaskInfo{Status: leasehold.StatusRunning, Attempt: 1}, false},
		{"failed", leasehold.TaskInfo{Status: leasehold.StatusFailed, Attempt: 0, History: h(1)}, false},
	} {
		if got := rules.HandedBack(c.t); got != c.want {
			t.Errorf("%s: HandedBack = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestParseSince(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"":                     {},
		"90m":                  now.Add(-90 * time.Minute),
		"2h":                   now.Add(-2 * time.Hour),
		"2026-12-01T08:00:00Z": time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC),
	} {
		if got, err := rules.ParseSince(in, now); err != nil || !got.Equal(want) {
			t.Errorf("ParseSince(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"yesterday", "-2h", "0s", "2026-12-01"} {
		if _, err := rules.ParseSince(bad, now); !errors.Is(err, rules.ErrSince) {
			t.Errorf("ParseSince(%q): %v, want ErrSince", bad, err)
		}
	}
}
