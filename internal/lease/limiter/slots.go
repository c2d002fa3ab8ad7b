package limiter

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/settings"
)

// A slot set bounds how many attempts of one kind run at once across every
// worker of the table (docs/worker.md, "Flow control"). It is one item of
// the tasks table, its id starting with a control character like a rate
// window's, holding a map of its holders (an attempt's task id and fence)
// to the time each holds its slot until. An attempt takes a slot after its
// claim and gives it back when it ends; a holder that never gives it back
// (its worker died) loses it once its time has passed, plus the store's
// skew.

// slotsPrefix starts every slot set's id.
const slotsPrefix = "\x1eslots/"

// MaxSlots bounds a slot set: each holder is an entry of one item, whose
// every write costs a write unit per KB.
const MaxSlots = settings.MaxKindConcurrency

// AttrHolders is a slot set's map of holders to their times (unix ms).
const AttrHolders = "holders"

// SlotLimiter is a store that keeps slot sets: both stores implement it.
type SlotLimiter interface {
	// AcquireSlot takes one of the max slots of key (a kind) for holder
	// until until, and reports whether it got one. A holder that holds
	// one already gets it again, with the new time. Holders whose time
	// has passed by more than the store's skew are dropped to make room.
	AcquireSlot(ctx context.Context, key, holder string, max int, until time.Time) (bool, error)
	// ReleaseSlot gives holder's slot of key back; one not held is no
	// error.
	ReleaseSlot(ctx context.Context, key, holder string) error
	// FreeLostSlots reads key's set and, for at most checks of its holders,
	// those with the earliest times, reads the holder's task, and gives
	// back the slot of each whose attempt is over or lost (SlotLost): its
	// worker died or lost the lease, and the slot would otherwise stay
	// taken until its time. It returns how many it gave back. A worker
	// calls it when it finds the set full.
	FreeLostSlots(ctx context.Context, key string, checks int) (int, error)
}

// ParseSlotHolder splits a SlotHolder into its task id and fence.
func ParseSlotHolder(h string) (id string, fence int64, ok bool) {
	i := strings.LastIndexByte(h, '@')
	if i <= 0 {
		return "", 0, false
	}
	fence, err := strconv.ParseInt(h[i+1:], 10, 64)
	if err != nil || fence < 1 {
		return "", 0, false
	}
	return h[:i], fence, true
}

// SlotLost reports whether the attempt fence of a task no longer runs
// under its lease, given the task as read (found false: there is no such
// task): the task is gone, was claimed again (a newer fence), is not
// RUNNING, or its lease ended more than skew before now. Such an attempt
// cannot finish the task; its handler, if it still runs somewhere, has
// been or will be cancelled when its renewal fails.
func SlotLost(t lease.Task, found bool, fence int64, now time.Time, skew time.Duration) bool {
	return !found || t.Fence != fence || t.Status != lease.StatusRunning || t.LeaseUntil.Add(skew).Before(now)
}

// OldestHolders returns at most n holders of a set, earliest time first
// (then by name): the ones FreeLostSlots checks.
func OldestHolders(set map[string]time.Time, n int) []string {
	hs := make([]string, 0, len(set))
	for h := range set {
		hs = append(hs, h)
	}
	slices.SortFunc(hs, func(a, b string) int {
		return cmp.Or(set[a].Compare(set[b]), strings.Compare(a, b))
	})
	return hs[:min(n, len(hs))]
}

// SlotsID is the id of key's slot set.
func SlotsID(key string) string { return slotsPrefix + key }

// IsSlotsID reports whether id names a slot set.
func IsSlotsID(id string) bool { return strings.HasPrefix(id, slotsPrefix) }

// SlotHolder names an attempt as a slot's holder: its task and fence.
func SlotHolder(taskID string, fence int64) string {
	return taskID + "@" + strconv.FormatInt(fence, 10)
}

// CheckAcquireSlot validates AcquireSlot's arguments.
func CheckAcquireSlot(key, holder string, max int, until time.Time) error {
	switch {
	case key == "" || holder == "":
		return fmt.Errorf("%w: a slot needs a key and a holder", lease.ErrInvalid)
	case max < 1 || max > MaxSlots:
		return fmt.Errorf("%w: %d slots is outside 1..%d", lease.ErrInvalid, max, MaxSlots)
	case until.IsZero():
		return fmt.Errorf("%w: a slot needs the time it is held until", lease.ErrInvalid)
	}
	return nil
}
