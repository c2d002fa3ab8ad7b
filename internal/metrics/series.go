package metrics

import (
	"math"
	"strconv"
	"time"
)

// series is one Kind value's figures since its last document: a counter
// per outcome and the distribution of each duration.
type series struct {
	attempts int
	counts   [len(outcomes)]int
	handler  dist // HandlerDuration
	enqueue  dist // EnqueueToClaim
	due      dist // DueToClaim
	// kindNames are the first kinds a shared series (UnknownKind,
	// OtherKind) counted, at most sharedKindNames.
	kindNames []string
}

// full reports whether an attempt with these durations could find one of
// them with no room left: a new value in a distribution at MaxValues.
func (s *series) full(hasEnqueue, hasDue bool) bool {
	return len(s.handler.values) >= MaxValues ||
		(hasEnqueue && len(s.enqueue.values) >= MaxValues) ||
		(hasDue && len(s.due.values) >= MaxValues)
}

// add counts one attempt of outcome outcomes[oi].
func (s *series) add(oi int, handler, enqueue time.Duration, hasEnqueue bool, due time.Duration, hasDue bool) {
	s.attempts++
	s.counts[oi]++
	s.handler.add(handler)
	if hasEnqueue {
		s.enqueue.add(enqueue)
	}
	if hasDue {
		s.due.add(due)
	}
}

// addKindName keeps kind among the names a shared series lists.
func (s *series) addKindName(kind string) {
	if len(s.kindNames) >= sharedKindNames {
		return
	}
	for _, k := range s.kindNames {
		if k == kind {
			return
		}
	}
	s.kindNames = append(s.kindNames, kind)
}

// reset empties s, keeping its slices' room.
func (s *series) reset() {
	s.attempts = 0
	s.counts = [len(outcomes)]int{}
	s.handler.reset()
	s.enqueue.reset()
	s.due.reset()
	s.kindNames = s.kindNames[:0]
}

// dist is a distribution of durations in milliseconds, rounded: each
// distinct value once, with how many times it came.
type dist struct {
	values []float64
	counts []int
	n      int
}

// add counts d, rounded to two significant digits. A linear search is
// enough: there are at most MaxValues values.
func (d *dist) add(v time.Duration) {
	ms := roundMillis(v)
	d.n++
	for i, x := range d.values {
		if x == ms {
			d.counts[i]++
			return
		}
	}
	d.values = append(d.values, ms)
	d.counts = append(d.counts, 1)
}

func (d *dist) reset() {
	d.values, d.counts, d.n = d.values[:0], d.counts[:0], 0
}

// roundMillis is v in milliseconds, rounded to two significant digits and
// to 0.1 ms (at most 5% off, or 50 µs for the shortest): so the durations of
// a batch's tasks repeat and print short, which keeps a document small.
// What is finer than that says nothing about a task.
func roundMillis(v time.Duration) float64 {
	v = v.Round(resolution)
	if v <= 0 {
		return 0
	}
	ms := float64(v) / float64(time.Millisecond)
	// The decimal rounding, not a power-of-ten product, so that the value
	// prints back as at most two digits (0.21, not 0.21000000000000002).
	var buf [32]byte
	b := strconv.AppendFloat(buf[:0], ms, 'e', 1, 64)
	r, err := strconv.ParseFloat(string(b), 64)
	if err != nil || math.IsInf(r, 0) {
		return ms
	}
	return r
}

// resolution is the finest step of a duration in a document.
const resolution = 100 * time.Microsecond
