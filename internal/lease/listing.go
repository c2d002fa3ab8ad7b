package lease

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
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

// Lister is a store that writes batch listing entries: both stores
// implement it.
type Lister interface {
	// WriteListing writes one entry that lists ids (distinct task ids, at
	// least MinListing and within MaxListingIDs and MaxListingBytes; see
	// SplitListing). The tasks are then created with NewTask.Listing set to
	// the result. A store whose tasks are unlisted writes nothing and
	// returns the zero Listing.
	WriteListing(ctx context.Context, ids []string) (Listing, error)
	// AppendListing adds ids to the entry l, one write that touches no
	// index; the tasks are then created with NewTask.Listing set to l. An
	// entry that holds MaxListingIDs with them gives ErrListingFull, one
	// that is gone ErrNotFound. The caller keeps the entry's ids within
	// MaxListingBytes: the store counts ids, not bytes.
	AppendListing(ctx context.Context, l Listing, ids []string) error
}

// ErrListingFull: a batch listing entry has no room for the ids.
var ErrListingFull = errors.New("listing entry is full")

const (
	// MinListing is the fewest tasks a batch listing entry is written
	// for: an entry costs two write units (its item and its index entry),
	// the same as two tasks' own index entries.
	MinListing = 3
	// MaxListingIDs bounds the ids of one entry.
	MaxListingIDs = 32
	// MaxListingBytes bounds the bytes of one entry's ids, so that the
	// entry's item stays within one write unit (1 KB).
	MaxListingBytes = 800
	// ListingSlack is how much longer than the store's retention a batch
	// listing entry is kept after its creation.
	ListingSlack = 7 * 24 * time.Hour
	// ListingWindow is how long after it is opened a batch listing entry
	// takes later batches' tasks (AppendListing): an entry's tasks are
	// listed at its time, so at most this much earlier than their
	// creation.
	ListingWindow = 5 * time.Second
)

// listingPrefix starts every batch listing entry's id. Its first byte is a
// control character, which CheckID refuses in a task id, so no task can
// share an id with an entry.
const listingPrefix = "\x1elisting/"

// IsListingID reports whether id names a batch listing entry.
func IsListingID(id string) bool { return strings.HasPrefix(id, listingPrefix) }

// NewListingID returns a fresh entry id.
func NewListingID() string { return listingPrefix + rand.Text() }

// SplitListing cuts ids into groups that each fit one entry, in order. A
// group shorter than MinListing is better listed task by task.
func SplitListing(ids []string) [][]string {
	var groups [][]string
	start, size := 0, 0
	for i, id := range ids {
		if i > start && (i-start == MaxListingIDs || size+len(id) > MaxListingBytes) {
			groups = append(groups, ids[start:i])
			start, size = i, 0
		}
		size += len(id)
	}
	if start < len(ids) {
		groups = append(groups, ids[start:])
	}
	return groups
}

// CheckListing validates the ids of a new entry (least MinListing) or of
// an append to one (least 1).
func CheckListing(ids []string, least int) error {
	if len(ids) < least || len(ids) > MaxListingIDs {
		return fmt.Errorf("%w: a listing entry takes %d to %d tasks at once, not %d", ErrInvalid, least, MaxListingIDs, len(ids))
	}
	size := 0
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if err := CheckID(id); err != nil {
			return err
		}
		if seen[id] {
			return fmt.Errorf("%w: a listing entry names %s twice", ErrInvalid, id)
		}
		seen[id] = true
		size += len(id)
	}
	if size > MaxListingBytes {
		return fmt.Errorf("%w: a listing entry's ids are %d bytes, the limit is %d", ErrInvalid, size, MaxListingBytes)
	}
	return nil
}

// CheckAppend validates an append of ids to the entry l.
func CheckAppend(l Listing, ids []string) error {
	if !IsListingID(l.ID) {
		return fmt.Errorf("%w: %q is not a listing entry", ErrInvalid, l.ID)
	}
	return CheckListing(ids, 1)
}
