package ui

import (
	"strconv"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/cli/rules"
)

// Relative times and durations. Every one of a page is computed from the
// page's one now (view.Now, from Config.Now), so that a page agrees with
// itself and a test with an injected clock reads fixed text. They come
// from the times the task's record already holds: no read of their own.

// ago is t relative to now, in its largest whole unit: "3m ago", "in 2h",
// "now" within a second; "" for the zero time.
func ago(t, now time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := now.Sub(t)
	if d > -time.Second && d < time.Second {
		return "now"
	}
	if d < 0 {
		return "in " + unit(-d)
	}
	return unit(d) + " ago"
}

// unit is d in its largest whole unit: 45s, 3m, 2h, 5d.
func unit(d time.Duration) string {
	switch {
	case d < time.Minute:
		return strconv.Itoa(int(d/time.Second)) + "s"
	case d < time.Hour:
		return strconv.Itoa(int(d/time.Minute)) + "m"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d/time.Hour)) + "h"
	default:
		return strconv.Itoa(int(d/(24*time.Hour))) + "d"
	}
}

// duration is d in whole seconds (to the millisecond under a second; cut,
// not rounded, as ago cuts), spelt as the docs spell durations: "2m5s",
// "1h", "350ms".
func duration(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return rules.FormatDuration(d.Truncate(time.Second))
}

// timing is how long t took or has been in its state, at now: a finished
// task "took" its creation to its end; a running one has run since its
// claim (its last update); a pending one waits since it was due, or is
// due in a while; a waiting one waits since its last update.
func timing(t leasehold.TaskInfo, now time.Time) string {
	switch {
	case !t.FinishedAt.IsZero():
		return "took " + duration(t.FinishedAt.Sub(t.CreatedAt))
	case t.Status == leasehold.StatusRunning && !t.UpdatedAt.IsZero():
		return "running " + duration(now.Sub(t.UpdatedAt))
	case t.Status == leasehold.StatusPending && t.RunAt.After(now):
		return "due in " + duration(t.RunAt.Sub(now))
	case t.Status == leasehold.StatusPending:
		return "waiting " + duration(now.Sub(later(t.RunAt, t.CreatedAt)))
	case !t.UpdatedAt.IsZero():
		return "waiting " + duration(now.Sub(t.UpdatedAt))
	}
	return ""
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// chart is a per-minute bar chart of the last hour with its axes: the
// count from 0 to Max on the left, the minutes ago along the bottom.
type chart struct {
	Class, Title string
	Max          int
	Bars         []bar
	Ticks        []tick
}

// tick is a label of the time axis at X.
type tick struct {
	X     int
	Label string
}

// Geometry of a chart's SVG (its viewBox is 0 0 660 112): the bars stand
// on baseY, chartX to the right of the count axis.
const (
	chartX = 50
	baseY  = 84
	barMax = 80
)

// newChart draws series (series[59] is the minute ending now) against
// peak.
func newChart(series [60]int, peak int, now time.Time, class, title string) chart {
	c := chart{Class: class, Title: title, Max: peak}
	for i, n := range series {
		h := n * barMax / peak
		if n > 0 {
			h = max(h, 1)
		}
		at := now.Add(time.Duration(i-59) * time.Minute).UTC().Format("15:04")
		c.Bars = append(c.Bars, bar{X: chartX + i*10, Y: baseY - h, H: h, Label: at + ": " + strconv.Itoa(n) + " " + class})
	}
	for _, m := range []int{59, 45, 30, 15, 0} {
		label := strconv.Itoa(m)
		if m == 0 {
			label = "now"
		}
		c.Ticks = append(c.Ticks, tick{X: chartX + (59-m)*10 + 4, Label: label})
	}
	return c
}
