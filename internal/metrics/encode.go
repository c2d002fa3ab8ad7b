package metrics

import (
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/leasehold/leasehold/internal/lifecycle"
)

// The documents are built by hand, in the order EMF documents show: about
// half the allocations and none of the reflection of encoding/json, for a
// shape that never changes.

// header opens every document, up to its list of metric definitions.
const header = `,"CloudWatchMetrics":[{"Namespace":"` + Namespace + `","Dimensions":[["` + DimensionKind + `"],[]],"Metrics":[`

// writeSeries writes kind's document and empties s. Under mu.
func (e *EMF) writeSeries(kind string, s *series) {
	b := append(e.buf[:0], `{"_aws":{"Timestamp":`...)
	b = strconv.AppendInt(b, e.clock.Now().UnixMilli(), 10)
	b = append(b, header...)
	first := true
	define := func(name, unit string) {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, `{"Name":"`...)
		b = append(b, name...)
		b = append(b, `","Unit":"`...)
		b = append(b, unit...)
		b = append(b, `"}`...)
	}
	for i, c := range s.counts {
		if c > 0 {
			define(counters[i], UnitCount)
		}
	}
	dists := [...]struct {
		name string
		d    *dist
	}{{HandlerDuration, &s.handler}, {EnqueueToClaim, &s.enqueue}, {DueToClaim, &s.due}}
	for _, x := range dists {
		if x.d.n > 0 {
			define(x.name, UnitMilliseconds)
		}
	}
	b = append(b, `]}]},"`+DimensionKind+`":`...)
	b = appendString(b, kind)
	if len(s.kindNames) > 0 {
		b = append(b, `,"kinds":[`...)
		for i, k := range s.kindNames {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
		}
		b = append(b, ']')
	}
	for i, c := range s.counts {
		if c > 0 {
			b = append(b, ',', '"')
			b = append(b, counters[i]...)
			b = append(b, '"', ':')
			b = strconv.AppendInt(b, int64(c), 10)
		}
	}
	for _, x := range dists {
		if x.d.n > 0 {
			b = append(b, ',', '"')
			b = append(b, x.name...)
			b = append(b, '"', ':')
			b = appendDist(b, x.d)
		}
	}
	b = append(b, '}', '\n')
	_, _ = e.w.Write(b) // metrics are best effort; a task never fails for them
	e.buf = b
	s.reset()
}

// appendDist appends d as the shortest of the forms EMF reads: a number
// (one value), an array with each value as many times as it came, or
// {"Values":[...],"Counts":[...]}.
func appendDist(b []byte, d *dist) []byte {
	if d.n == 1 {
		return appendFloat(b, d.values[0])
	}
	var scratch [32]byte
	arrayLen, pairLen := 1+d.n, len(`{"Values":[],"Counts":[]}`)+2*(len(d.values)-1)
	for i, v := range d.values {
		l := len(appendFloat(scratch[:0], v))
		arrayLen += d.counts[i] * l
		pairLen += l + len(strconv.AppendInt(scratch[:0], int64(d.counts[i]), 10))
	}
	if d.n <= MaxValues && arrayLen <= pairLen {
		b = append(b, '[')
		for i, v := range d.values {
			for j := range d.counts[i] {
				if i > 0 || j > 0 {
					b = append(b, ',')
				}
				b = appendFloat(b, v)
			}
		}
		return append(b, ']')
	}
	b = append(b, `{"Values":[`...)
	for i, v := range d.values {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendFloat(b, v)
	}
	b = append(b, `],"Counts":[`...)
	for i, c := range d.counts {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(c), 10)
	}
	return append(b, ']', '}')
}

func appendFloat(b []byte, v float64) []byte { return strconv.AppendFloat(b, v, 'f', -1, 64) }

// linePool holds the buffers of attempt lines (AttemptWriter).
var linePool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// writeAttempt writes the attempt line of an AttemptWriter: the metadata,
// the Kind dimension, the task's id, attempt and outcome, and the values,
// durations unrounded.
func (e *EMF) writeAttempt(a lifecycle.Ended, oi int, enqueue time.Duration, hasEnqueue bool, due time.Duration, hasDue bool) {
	type value struct {
		name string
		unit string
		v    float64
	}
	var vbuf [4]value
	vals := append(vbuf[:0], value{counters[oi], UnitCount, 1}, value{HandlerDuration, UnitMilliseconds, millis(a.HandlerTime)})
	if hasEnqueue {
		vals = append(vals, value{EnqueueToClaim, UnitMilliseconds, millis(enqueue)})
	}
	if hasDue {
		vals = append(vals, value{DueToClaim, UnitMilliseconds, millis(due)})
	}
	bp := linePool.Get().(*[]byte)
	b := (*bp)[:0]
	b = append(b, `{"_aws":{"Timestamp":`...)
	b = strconv.AppendInt(b, e.clock.Now().UnixMilli(), 10)
	b = append(b, header...)
	for i, v := range vals {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"Name":"`...)
		b = append(b, v.name...)
		b = append(b, `","Unit":"`...)
		b = append(b, v.unit...)
		b = append(b, `"}`...)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	kind, shared := e.dimension(a.Task, a.Outcome)
	b = append(b, `]}]},"`+DimensionKind+`":`...)
	b = appendString(b, kind)
	if shared {
		b = append(b, `,"kind":`...)
		b = appendString(b, a.Task.Kind)
	}
	b = append(b, `,"task_id":`...)
	b = appendString(b, a.Task.ID)
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(a.Task.Attempt), 10)
	b = append(b, `,"outcome":`...)
	b = appendString(b, string(a.Outcome))
	for _, v := range vals {
		b = append(b, ',', '"')
		b = append(b, v.name...)
		b = append(b, '"', ':')
		b = appendFloat(b, v.v)
	}
	b = append(b, '}', '\n')
	_, _ = e.w.Write(b)
	*bp = b
	linePool.Put(bp)
}

// millis is d in milliseconds, to the microsecond.
func millis(d time.Duration) float64 {
	return float64(d.Round(time.Microsecond)) / float64(time.Millisecond)
}

// appendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD, as
// encoding/json writes it.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}
