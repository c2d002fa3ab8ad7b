// Package mapstate declares the items of a sliding map (docs/workflows.md,
// "Sliding"): its slot groups, which count each child once and say which
// slots are idle, and its pages, which hold the items the parent produced
// ahead for the children that start the next index. Both live in the
// tasks table under ids that start with a control character, so no task
// can have one; both stores implement Store.
package mapstate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
)

// Sizes of a map's items.
const (
	// SlotsPerGroup is how many slots one group item keeps: 64 keep a
	// group well under 1 KB, so every write to it is one write unit.
	SlotsPerGroup = 64
	// MaxSlots bounds a map's concurrency (MaxConcurrency).
	MaxSlots = 1000
	// MaxFailures is how many failed children's indexes a group keeps.
	MaxFailures = 5
	// PageItems is how many items one page holds.
	PageItems = 16
	// MaxPageBytes bounds the items of one page (under the item's 400 KB).
	MaxPageBytes = 350 << 10
)

// Errors of the map's writes.
var (
	// ErrCounted: the report's child was counted already (a duplicate
	// delivery), or the slot moved on since the caller looked.
	ErrCounted = errors.New("map child counted already")
)

// Store keeps a map's groups and pages: both stores implement it.
type Store interface {
	// CreateGroup writes g, a group as NewGroup made it, unless its id
	// exists: then it returns the stored group and lease.ErrAlreadyExists.
	CreateGroup(ctx context.Context, g Group) (Group, error)
	// GetGroup reads a group (strongly consistent); lease.ErrNotFound if
	// there is none.
	GetGroup(ctx context.Context, id string) (Group, error)
	// Report counts one child's end in its group, exactly once: one
	// conditional write (Group.Apply says what it does). A child counted
	// already gives the stored group and ErrCounted.
	Report(ctx context.Context, r Report) (Group, error)
	// Raise sets the group's Produced to produced unless it is there or
	// beyond already, and returns the group after the write (with its idle
	// slots, which the caller starts).
	Raise(ctx context.Context, id string, produced int) (Group, error)
	// Stop records why the map stopped unless it has stopped already, and
	// returns the group after the write.
	Stop(ctx context.Context, id, reason string) (Group, error)
	// Unpark takes slot, idle, off the group's idle slots once the caller
	// started its next child, only while the slot has counted seq children;
	// otherwise the stored group and ErrCounted.
	Unpark(ctx context.Context, id string, slot, seq int) (Group, error)
	// PutPage writes a page of items (overwriting: a page's items are the
	// same in every run of the parent).
	PutPage(ctx context.Context, id string, items [][]byte, expires time.Time) error
	// GetPage reads a page's items; lease.ErrNotFound if there is none.
	GetPage(ctx context.Context, id string) ([][]byte, error)
}

// idPrefix starts every map item's id; the control character keeps task
// ids out.
const idPrefix = "\x1emap/"

// IsID reports whether id is a map item's (a group or a page), not a
// task's: a scan of the table skips it.
func IsID(id string) bool { return strings.HasPrefix(id, idPrefix) }

// GroupID is the id of group g of the map name of task parent.
func GroupID(parent, name string, g int) string {
	return idPrefix + parent + "/" + name + "/g" + strconv.Itoa(g)
}

// PageID is the id of page p of the map name of task parent: it holds the
// items p*PageItems to (p+1)*PageItems-1.
func PageID(parent, name string, p int) string {
	return idPrefix + parent + "/" + name + "/p" + strconv.Itoa(p)
}

// Ahead is how many items a map of c slots keeps produced ahead of its
// furthest slot: the parent produces when the furthest slot's next child
// comes within Ahead of Produced (the child whose next child is exactly
// Produced - Ahead wakes it), up to twice Ahead past that slot.
func Ahead(c int) int { return max(c, 256) }

// Groups is how many groups a map of c slots has.
func Groups(c int) int { return (c + SlotsPerGroup - 1) / SlotsPerGroup }

// Group is one group item: SlotsPerGroup slots of a map (fewer in its
// last group) and what they counted.
type Group struct {
	ID string
	// Shape is the map's identity ("map N/C ..."), as its parent first
	// ran it.
	Shape string
	// N is the map's children, C its slots; First the first slot of the
	// group. Slot s runs the children s, s+C, s+2C, ...
	N, C, First int
	// Min is the map's MinSuccessful (0: none) and Tolerate the failures
	// it tolerates (the smaller of its count and its percentage of N): a
	// child whose end makes the map's failures exceed Tolerate, or its
	// successes reach Min, stops the map.
	Min, Tolerate int
	// Seq is, for each slot of the group (First+j is Seq[j]'s), how many
	// of its children are counted: its next child is First+j+Seq[j]*C.
	Seq []int
	// OK and Failed count the group's children that ended.
	OK, Failed int
	// Failures are the indexes of the group's first MaxFailures failures.
	Failures []int
	// Produced: the items below it are in pages.
	Produced int
	// Idle are the slots (map-wide numbers) with no child running whose
	// next child is not done: waiting for items, or the map stopped.
	Idle []int
	// Stopped is why the map stopped ("" while it runs).
	Stopped string
	// Version counts the group's writes.
	Version int64
	// Expires is when the table's TTL may delete the group.
	Expires time.Time
}

// NewGroup is group g of a map of n children and c slots (its policy
// unset: every child runs, no failure tolerated).
func NewGroup(id, shape string, n, c, g, produced int, expires time.Time) Group {
	first := g * SlotsPerGroup
	return Group{ID: id, Shape: shape, N: n, C: c, First: first, Seq: make([]int, max(0, min(SlotsPerGroup, c-first))),
		Produced: produced, Expires: time.Unix(expires.Unix(), 0).UTC()}
}

// Check validates a group about to be created.
func (g Group) Check() error {
	switch {
	case g.ID == "" || g.Shape == "":
		return fmt.Errorf("%w: a map group needs an id and a shape", lease.ErrInvalid)
	case g.C < 1 || g.C > MaxSlots || g.N < 1:
		return fmt.Errorf("%w: a map of %d children and %d slots", lease.ErrInvalid, g.N, g.C)
	case g.Min < 0 || g.Min > g.N || g.Tolerate < 0:
		return fmt.Errorf("%w: a map policy of min %d, tolerate %d", lease.ErrInvalid, g.Min, g.Tolerate)
	case g.First < 0 || g.First%SlotsPerGroup != 0 || g.First >= g.C || len(g.Seq) != min(SlotsPerGroup, g.C-g.First):
		return fmt.Errorf("%w: group of slots %d+%d in a map of %d slots", lease.ErrInvalid, g.First, len(g.Seq), g.C)
	case g.Expires.IsZero():
		return fmt.Errorf("%w: a map group needs its expiry", lease.ErrInvalid)
	}
	return nil
}

// Next is the index of slot's next child (slot is map-wide, in g).
func (g Group) Next(slot int) int { return slot + g.Seq[slot-g.First]*g.C }

// IsIdle reports whether slot has no child running.
func (g Group) IsIdle(slot int) bool { return slices.Contains(g.Idle, slot) }

// Done reports whether every slot of g is over: its children all counted,
// or the map stopped and the slot idle.
func (g Group) Done() bool {
	for j := range g.Seq {
		s := g.First + j
		if g.Next(s) < g.N && (g.Stopped == "" || !g.IsIdle(s)) {
			return false
		}
	}
	return true
}

// Report is one child's end, counted in its group.
type Report struct {
	Group string
	// Index is the child's index and C the map's slots: its slot is Index
	// mod C and its rank in the slot Index / C. The report lands only
	// while the slot has counted exactly Rank children.
	Index, C, Slot, Rank int
	// OK: it SUCCEEDED.
	OK bool
	// Started: the child's end started its slot's next child before this
	// report (the token is sent first, so that a crash between the two
	// sends it again): the slot stays busy. Otherwise a slot that has a
	// next child becomes idle, for the parent to start it.
	Started bool
}

// ReportOf is the report of the child index of a map of c slots.
func ReportOf(group string, index, c int, ok, started bool) Report {
	return Report{Group: group, Index: index, C: c, Slot: index % c, Rank: index / c, OK: ok, Started: started}
}

// Check validates r.
func (r Report) Check() error {
	if r.Group == "" || r.Index < 0 || r.C < 1 || r.C > MaxSlots || r.Slot != r.Index%r.C || r.Rank != r.Index/r.C {
		return fmt.Errorf("%w: map report %+v", lease.ErrInvalid, r)
	}
	return nil
}

// Apply is g after r: the slot's count moves on by one and the outcome is
// counted (the first failures kept). The slot becomes idle when it has a
// next child that r did not start. A report for another rank than the
// slot's count gives ErrCounted, and a slot outside g lease.ErrInvalid.
func (g Group) Apply(r Report) (Group, error) {
	j := r.Slot - g.First
	if j < 0 || j >= len(g.Seq) || r.C != g.C {
		return g, fmt.Errorf("%w: child %d is not in slots %d+%d of a map of %d slots", lease.ErrInvalid, r.Index, g.First, len(g.Seq), g.C)
	}
	if g.Seq[j] != r.Rank {
		return g, ErrCounted
	}
	g.Seq = slices.Clone(g.Seq)
	g.Seq[j]++
	if r.OK {
		g.OK++
	} else {
		g.Failed++
		if len(g.Failures) < MaxFailures {
			g.Failures = append(slices.Clone(g.Failures), r.Index)
		}
	}
	if next := r.Index + g.C; next < g.N && !r.Started && !g.IsIdle(r.Slot) {
		g.Idle = append(slices.Clone(g.Idle), r.Slot)
	}
	g.Version++
	return g, nil
}

// CheckPage validates a page about to be written.
func CheckPage(id string, items [][]byte, expires time.Time) error {
	size := 0
	for _, b := range items {
		size += len(b)
	}
	switch {
	case id == "" || expires.IsZero():
		return fmt.Errorf("%w: a map page needs an id and an expiry", lease.ErrInvalid)
	case len(items) == 0 || len(items) > PageItems:
		return fmt.Errorf("%w: a map page of %d items, want 1..%d", lease.ErrInvalid, len(items), PageItems)
	case size > MaxPageBytes:
		return &lease.TooLargeError{What: "map page", Size: size, Limit: MaxPageBytes}
	}
	return nil
}

// Why a map stops (Group.Stopped).
const (
	StoppedMinSuccessful = "min_successful"
	StoppedFailures      = "failures"
)

// Decide is why the map must stop given its counts over all its groups
// (ok successes, failed failures), "" to go on; g gives the policy.
func (g Group) Decide(ok, failed int) string {
	switch {
	case failed > g.Tolerate:
		return StoppedFailures
	case g.Min > 0 && ok >= g.Min:
		return StoppedMinSuccessful
	}
	return ""
}
