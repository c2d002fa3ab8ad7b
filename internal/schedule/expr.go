package schedule

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"time"
)

// Expr is a parsed schedule expression: EventBridge's rate(...) or its
// six-field cron(...).
type Expr struct {
	text string
	// rate: every period, counted from the anchor the caller gives Next.
	period time.Duration
	// cron: the allowed values of each field, as bit sets.
	cron *cronFields
}

// String returns the expression as it was written.
func (e Expr) String() string { return e.text }

// Period returns the period of a rate expression, 0 for cron.
func (e Expr) Period() time.Duration { return e.period }

// Syntax says which expressions a parse accepts.
type Syntax int

const (
	// AWS accepts what EventBridge Scheduler accepts: rates of at least one
	// minute, in minutes, hours or days.
	AWS Syntax = iota
	// Local also accepts rates in seconds, for `leasehold run` on a laptop.
	Local
)

// Parse parses a rate(...) or cron(...) expression. cron's L, W and # are
// refused, as are one-time at(...) schedules.
func Parse(s string, syntax Syntax) (Expr, error) {
	t := strings.TrimSpace(s)
	switch {
	case strings.HasPrefix(t, "rate(") && strings.HasSuffix(t, ")"):
		d, err := parseRate(t[len("rate("):len(t)-1], syntax)
		if err != nil {
			return Expr{}, fmt.Errorf("%w: %s: %v", ErrExpression, t, err)
		}
		return Expr{text: t, period: d}, nil
	case strings.HasPrefix(t, "cron(") && strings.HasSuffix(t, ")"):
		c, err := parseCron(t[len("cron(") : len(t)-1])
		if err != nil {
			return Expr{}, fmt.Errorf("%w: %s: %v", ErrExpression, t, err)
		}
		return Expr{text: t, cron: c}, nil
	case strings.HasPrefix(t, "at("):
		return Expr{}, fmt.Errorf("%w: %s: one-time at(...) schedules are not supported; enqueue with --at instead", ErrExpression, t)
	}
	return Expr{}, fmt.Errorf("%w: %q: want rate(N unit) or cron(min hour day-of-month month day-of-week year)", ErrExpression, s)
}

func parseRate(s string, syntax Syntax) (time.Duration, error) {
	f := strings.Fields(s)
	if len(f) != 2 {
		return 0, fmt.Errorf("want a number and a unit, such as rate(5 minutes)")
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q is not a positive whole number", f[0])
	}
	unit := f[1]
	// EventBridge wants the singular for 1 and the plural otherwise.
	if (n == 1) == strings.HasSuffix(unit, "s") {
		if n == 1 {
			return 0, fmt.Errorf("write rate(1 %s)", strings.TrimSuffix(unit, "s"))
		}
		return 0, fmt.Errorf("write rate(%d %ss)", n, unit)
	}
	var per time.Duration
	switch strings.TrimSuffix(unit, "s") {
	case "second":
		if syntax != Local {
			return 0, fmt.Errorf("EventBridge Scheduler's smallest rate is rate(1 minute); rates in seconds work only with leasehold run --schedule")
		}
		per = time.Second
	case "minute":
		per = time.Minute
	case "hour":
		per = time.Hour
	case "day":
		per = 24 * time.Hour
	default:
		return 0, fmt.Errorf("unit %q: want minute(s), hour(s) or day(s)", unit)
	}
	const most = 10 * 366 * 24 * time.Hour // ten years: far beyond any useful rate, far below overflow
	if int64(n) > int64(most/per) {
		return 0, fmt.Errorf("%d %s is too long", n, unit)
	}
	return time.Duration(n) * per, nil
}

// cronFields holds the values each field allows. Years are offsets from
// minYear.
type cronFields struct {
	minute, hour, dom, month, dow uint64
	year                          [4]uint64 // minYear .. minYear+255
	anyDOM, anyDOW                bool      // "?"
}

const (
	minYear = 1970
	maxYear = 2199
)

type fieldSpec struct {
	name     string
	lo, hi   int
	names    map[string]int
	question bool // "?" allowed
}

var (
	monthNames = map[string]int{"JAN": 1, "FEB": 2, "MAR": 3, "APR": 4, "MAY": 5, "JUN": 6, "JUL": 7, "AUG": 8, "SEP": 9, "OCT": 10, "NOV": 11, "DEC": 12}
	dowNames   = map[string]int{"SUN": 1, "MON": 2, "TUE": 3, "WED": 4, "THU": 5, "FRI": 6, "SAT": 7}
	specs      = [6]fieldSpec{
		{name: "minutes", lo: 0, hi: 59},
		{name: "hours", lo: 0, hi: 23},
		{name: "day-of-month", lo: 1, hi: 31, question: true},
		{name: "month", lo: 1, hi: 12, names: monthNames},
		{name: "day-of-week", lo: 1, hi: 7, names: dowNames, question: true},
		{name: "year", lo: minYear, hi: maxYear},
	}
)

func parseCron(s string) (*cronFields, error) {
	f := strings.Fields(s)
	if len(f) != 6 {
		return nil, fmt.Errorf("%d fields; want 6: minutes hours day-of-month month day-of-week year", len(f))
	}
	var c cronFields
	var sets [6][]int
	for i, spec := range specs {
		if f[i] == "?" {
			if !spec.question {
				return nil, fmt.Errorf("%s: ? is allowed only in day-of-month and day-of-week", spec.name)
			}
			if i == 2 {
				c.anyDOM = true
			} else {
				c.anyDOW = true
			}
			continue
		}
		vals, err := parseField(f[i], spec)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", spec.name, err)
		}
		sets[i] = vals
	}
	if c.anyDOM == c.anyDOW {
		return nil, fmt.Errorf("exactly one of day-of-month and day-of-week must be ?")
	}
	bitsOf := func(vals []int) uint64 {
		var b uint64
		for _, v := range vals {
			b |= 1 << uint(v)
		}
		return b
	}
	c.minute, c.hour, c.dom, c.month, c.dow = bitsOf(sets[0]), bitsOf(sets[1]), bitsOf(sets[2]), bitsOf(sets[3]), bitsOf(sets[4])
	for _, y := range sets[5] {
		o := y - minYear
		c.year[o/64] |= 1 << uint(o%64)
	}
	if !c.ever() {
		return nil, fmt.Errorf("never fires: no day-of-month %s in month %s of year %s", f[2], f[3], f[5])
	}
	return &c, nil
}

// ever reports whether some allowed day exists: an allowed day-of-month
// that an allowed month of an allowed year has (30 February never
// occurs), or any allowed month of an allowed year when the days are
// weekdays (every month has every weekday). Minutes and hours are never
// empty.
func (c *cronFields) ever() bool {
	for y := minYear; y <= maxYear; y++ {
		if !c.hasYear(y) {
			continue
		}
		for m := time.January; m <= time.December; m++ {
			if c.month&(1<<uint(m)) == 0 {
				continue
			}
			if c.anyDOM {
				return true
			}
			days := time.Date(y, m+1, 0, 0, 0, 0, 0, time.UTC).Day()
			if c.dom&(1<<uint(days+1)-1) != 0 {
				return true
			}
		}
	}
	return false
}

// parseField parses a comma-separated list of *, values, ranges a-b and
// steps x/n.
func parseField(s string, spec fieldSpec) ([]int, error) {
	if strings.ContainsAny(s, "LW#") && !onlyNames(s, spec) {
		return nil, fmt.Errorf("%q: L, W and # are not supported", s)
	}
	var out []int
	for part := range strings.SplitSeq(s, ",") {
		if part == "" {
			return nil, fmt.Errorf("%q: empty list item", s)
		}
		rng, stepText, hasStep := strings.Cut(part, "/")
		step := 1
		if hasStep {
			n, err := strconv.Atoi(stepText)
			if err != nil || n <= 0 {
				return nil, fmt.Errorf("%q: step %q is not a positive number", part, stepText)
			}
			step = n
		}
		lo, hi := spec.lo, spec.hi
		switch {
		case rng == "*":
		case strings.Contains(rng, "-"):
			a, b, _ := strings.Cut(rng, "-")
			var err error
			if lo, err = value(a, spec); err != nil {
				return nil, err
			}
			if hi, err = value(b, spec); err != nil {
				return nil, err
			}
			if hi < lo {
				return nil, fmt.Errorf("%q: range runs backwards", part)
			}
		default:
			v, err := value(rng, spec)
			if err != nil {
				return nil, err
			}
			lo = v
			if !hasStep {
				hi = v
			}
		}
		for v := lo; v <= hi; v += step {
			out = append(out, v)
		}
	}
	return out, nil
}

// onlyNames reports whether the letters L, W and # in s all belong to
// month or weekday names (JUL, WED...), which are not the special syntax.
func onlyNames(s string, spec fieldSpec) bool {
	if spec.names == nil || strings.Contains(s, "#") {
		return false
	}
	for tok := range strings.FieldsFuncSeq(s, func(r rune) bool { return r == ',' || r == '-' || r == '/' }) {
		if _, ok := spec.names[strings.ToUpper(tok)]; !ok && strings.ContainsAny(tok, "LW") {
			return false
		}
	}
	return true
}

func value(s string, spec fieldSpec) (int, error) {
	if v, ok := spec.names[strings.ToUpper(s)]; ok {
		return v, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	if v < spec.lo || v > spec.hi {
		return 0, fmt.Errorf("%d is outside %d-%d", v, spec.lo, spec.hi)
	}
	return v, nil
}

func (c *cronFields) hasYear(y int) bool {
	o := y - minYear
	return o >= 0 && y <= maxYear && c.year[o/64]&(1<<uint(o%64)) != 0
}

func (c *cronFields) dayMatches(t time.Time) bool {
	if c.anyDOM {
		return c.dow&(1<<uint(t.Weekday()+1)) != 0
	}
	return c.dom&(1<<uint(t.Day())) != 0
}

// next returns the first minute strictly after t (in t's location) that
// the fields allow, or false when there is none before maxYear ends.
func (c *cronFields) next(t time.Time) (time.Time, bool) {
	loc := t.Location()
	// Start at the next whole minute of wall-clock time.
	t = t.Truncate(time.Minute).Add(time.Minute)
	for range 100000 { // each step moves to the next candidate year, month, day, hour or minute
		y := t.Year()
		if y > maxYear {
			return time.Time{}, false
		}
		switch {
		case !c.hasYear(y):
			t = time.Date(y+1, 1, 1, 0, 0, 0, 0, loc)
		case c.month&(1<<uint(t.Month())) == 0:
			t = time.Date(y, t.Month()+1, 1, 0, 0, 0, 0, loc)
		case !c.dayMatches(t):
			t = time.Date(y, t.Month(), t.Day()+1, 0, 0, 0, 0, loc)
		case c.hour&(1<<uint(t.Hour())) == 0:
			// The next hour in absolute time, so that a DST change
			// neither loops nor skips.
			t = t.Add(time.Hour - time.Duration(t.Minute())*time.Minute)
		case c.minute&(1<<uint(t.Minute())) == 0:
			// Jump to the next allowed minute of this hour, if any.
			rest := c.minute >> uint(t.Minute()+1)
			if rest == 0 {
				t = t.Add(time.Duration(60-t.Minute()) * time.Minute)
			} else {
				t = t.Add(time.Duration(bits.TrailingZeros64(rest)+1) * time.Minute)
			}
		default:
			return t, true
		}
	}
	return time.Time{}, false
}

// Next returns the first slot of e strictly after t. A cron expression is
// read in loc (UTC when nil); a rate counts whole periods from anchor (the
// Unix epoch when zero). false when the expression has no further slot.
func (e Expr) Next(t, anchor time.Time, loc *time.Location) (time.Time, bool) {
	if e.period > 0 {
		if anchor.IsZero() {
			anchor = time.Unix(0, 0)
		}
		if t.Before(anchor) {
			return anchor, true
		}
		n := t.Sub(anchor)/e.period + 1
		return anchor.Add(n * e.period), true
	}
	if e.cron == nil {
		return time.Time{}, false
	}
	if loc == nil {
		loc = time.UTC
	}
	return e.cron.next(t.In(loc))
}
