package admin_test

import (
	"testing"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/admin"
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
		if got := admin.HandedBack(c.t); got != c.want {
			t.Errorf("%s: HandedBack = %v, want %v", c.name, got, c.want)
		}
	}
}
