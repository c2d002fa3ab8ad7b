package rules

import (
	"encoding/json"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
)

// ArchivedRun returns the archived run of t, what ArchiveRun writes:
// SUCCEEDED, its result naming the run that continued it.
func ArchivedRun(t lease.Task, now time.Time) lease.Task {
	a := t
	a.ID, a.Parent, a.Waiters = lease.RunID(t.ID, int(t.Run)), t.ID, nil
	a.Status, a.LeaseOwner, a.LeaseUntil, a.DispatchAt = lease.StatusSucceeded, "", time.Time{}, time.Time{}
	a.Result, _ = json.Marshal(struct {
		ContinuedAs string `json:"continued_as"`
		Run         int    `json:"run"`
	}{t.ID, int(t.Run) + 2}) // a string and an int always encode
	a.Error, a.CancelRequested, a.UpdatedAt, a.FinishedAt = "", false, now, now
	a.Wait, a.WaitFor, a.Ended, a.WaitUntil, a.CallbackHash, a.CallbackStep = "", nil, nil, time.Time{}, "", ""
	a.Then, a.ListedIn = nil, ""
	return a
}
