package query

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
)

// Lister is a store that writes batch listing entries: both stores
// implement it.
type Lister interface {
	// WriteListing writes one entry that lists ids (distinct task ids, at
	// least MinListing and within MaxListingIDs and MaxListingBytes; see
	// SplitListing), all of them tasks of by's kind and queue: the entry
	// stands for them in the listings by kind and by queue too (ListBy).
	// The tasks are then created with NewTask.Listing set to the result. A
	// store whose tasks are unlisted writes nothing and returns the zero
	// Listing.
	WriteListing(ctx context.Context, by ListBy, ids []string) (lease.Listing, error)
	// AppendListing adds ids to the entry l, one write that touches no
	// index; the tasks, of the kind and queue the entry was written for,
	// are then created with NewTask.Listing set to l. An
	// entry that holds MaxListingIDs with them gives ErrListingFull, one
	// that is gone ErrNotFound. The caller keeps the entry's ids within
	// MaxListingBytes: the store counts ids, not bytes.
	AppendListing(ctx context.Context, l lease.Listing, ids []string) error
}

// ErrListingFull: a batch listing entry has no room for the ids.
var ErrListingFull = errors.New("listing entry is full")

const (
	// MinListing is the fewest tasks a batch listing entry is written
	// for: an entry costs three write units (its item and its entries in
	// the listing by time and by kind; four in a named queue, listed by
	// queue too), about what one or two tasks' own index entries cost.
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
		return fmt.Errorf("%w: a listing entry takes %d to %d tasks at once, not %d", lease.ErrInvalid, least, MaxListingIDs, len(ids))
	}
	size := 0
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if err := lease.CheckID(id); err != nil {
			return err
		}
		if seen[id] {
			return fmt.Errorf("%w: a listing entry names %s twice", lease.ErrInvalid, id)
		}
		seen[id] = true
		size += len(id)
	}
	if size > MaxListingBytes {
		return fmt.Errorf("%w: a listing entry's ids are %d bytes, the limit is %d", lease.ErrInvalid, size, MaxListingBytes)
	}
	return nil
}

// CheckAppend validates an append of ids to the entry l.
func CheckAppend(l lease.Listing, ids []string) error {
	if !IsListingID(l.ID) {
		return fmt.Errorf("%w: %q is not a listing entry", lease.ErrInvalid, l.ID)
	}
	return CheckListing(ids, 1)
}
