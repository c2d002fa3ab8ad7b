package schedule

import "time"

// DefaultTolerance is how late a slot may be found and still count as on
// time rather than missed.
const DefaultTolerance = time.Minute

// maxSlots bounds the slots one decision looks at (a rate of one second
// over a day of catch-up is 86,400).
const maxSlots = 1_000_000

// Due decides which slots to fire at now, oldest first. last is the time of
// the previous decision (zero before the first): every slot up to it was
// decided then. Slots in (last, now] are due. The most recent due slot is on
// time when now is at most tolerance after it, and is always fired; every
// other due slot was missed, and the catch-up policy decides: none fires
// none of them, latest the most recent one (only when no slot is on time),
// all the most recent Limit of them. A missed slot older than MaxAge is
// never fired. Firing a slot twice is harmless (TaskID), so a caller that
// failed to send may decide again from the same last.
func (s Spec) Due(last, now time.Time, tolerance time.Duration) []time.Time {
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	maxAge := s.CatchUp.maxAge()
	from := now.Add(-maxAge - tolerance)
	if last.After(from) {
		from = last
	}
	keep := 1 // none and latest need only the most recent due slot
	if s.CatchUp.Mode == All {
		keep = s.CatchUp.limit() + 1
	}
	// A rate's slots are a period apart, so only its last keep+1 periods
	// can hold a slot that is kept: start there, not at the oldest slot
	// the max age allows, which maxSlots might not get past.
	if p := s.Expr.Period(); p > 0 {
		if w := p * time.Duration(keep+1); w/p == time.Duration(keep+1) && now.Add(-w).After(from) {
			from = now.Add(-w)
		}
	}
	var due []time.Time // the most recent keep slots, oldest first
	t := from
	for range maxSlots {
		next, ok := s.Expr.Next(t, s.Anchor, s.Location)
		if !ok || next.After(now) {
			break
		}
		due = append(due, next)
		if len(due) > keep {
			due = due[1:]
		}
		t = next
	}
	if len(due) == 0 {
		return nil
	}
	m := due[len(due)-1]
	onTime := now.Sub(m) <= tolerance
	missed := due
	if onTime {
		missed = due[:len(due)-1]
	}
	// Missed slots older than MaxAge are never fired.
	for len(missed) > 0 && now.Sub(missed[0]) > maxAge {
		missed = missed[1:]
	}
	var fire []time.Time
	switch s.CatchUp.Mode {
	case All:
		if n := s.CatchUp.limit(); len(missed) > n {
			missed = missed[len(missed)-n:]
		}
		fire = append(fire, missed...)
	case Latest:
		if !onTime && len(missed) > 0 {
			fire = append(fire, missed[len(missed)-1])
		}
	}
	if onTime {
		fire = append(fire, m)
	}
	return fire
}
