package lease

import (
	"time"
)

// A batch listing entry lists the tasks one batch of inline tokens creates,
// so that the listing index takes one write per batch instead of one per
// task (docs/performance.md, "Listing").
//
// The rule that keeps List complete and free of repeats:
//   - the entry is written before the creates it names, and each of those
//     creates records the entry's id in the task (Task.ListedIn) and no
//     listing key of its own; a create that finds its id taken records
//     nothing, so a task is listed by the one entry whose create landed;
//   - an entry that names a task that was never created (the worker
//     stopped between the two writes, or the id was taken) lists nothing
//     for it;
//   - a task listed by an entry gets a listing key of its own at its first
//     write that leaves it neither running nor succeeded (a retry, a
//     snooze, a wait, a failure, a cancel), so that the entry, which
//     expires ListingSlack after the store's retention, never has to
//     outlive a task that waits.
//
// A batch's first run is bounded by the invocation's budget (15 minutes at
// most), so a task listed by an entry is finished, or listed on its own,
// long before the entry expires, unless its message stays unclaimed for
// longer than ListingSlack after its holder died (a queue paused that
// long); docs/performance.md says so.

// Listing names a batch listing entry: its id and when it was opened, its
// place in the listing index. List orders the tasks an entry lists by that
// time (a task's own listing is at its creation), so they are listed in
// the order of their batches, at most ListingWindow early.
type Listing struct {
	ID string
	At time.Time
}
