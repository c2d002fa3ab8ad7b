package demo

import (
	"cmp"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// progress writes event lines and, on a terminal, keeps a progress bar
// redrawn below them. Elsewhere (CI, a pipe) it prints the counts every few
// seconds instead.
type progress struct {
	w        io.Writer
	terminal bool
	barShown bool
	lastBar  time.Time
}

// plainBarEvery is how often the counts are printed when not on a terminal.
const plainBarEvery = 5 * time.Second

func newProgress(w io.Writer, terminal bool) *progress { return &progress{w: w, terminal: terminal} }

func (p *progress) clearBar() {
	if p.terminal && p.barShown {
		fmt.Fprint(p.w, "\r\033[K")
		p.barShown = false
	}
}

func (p *progress) printf(format string, args ...any) {
	p.clearBar()
	fmt.Fprintf(p.w, format, args...)
}

func (p *progress) event(line string) {
	p.clearBar()
	fmt.Fprintln(p.w, line)
}

// bar shows how many messages have settled and the count in each state.
func (p *progress) bar(counts []stateCount, elapsed time.Duration) {
	total, settled := 0, 0
	var parts []string
	for _, c := range counts {
		total += c.n
		if c.state != queued && c.state != "PENDING" && c.state != "RUNNING" {
			settled += c.n
		}
		if c.n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", strings.ToLower(c.state), c.n))
		}
	}
	const width = 20
	filled := 0
	if total > 0 {
		filled = settled * width / total
	}
	line := fmt.Sprintf("[%s%s] %d/%d settled | %s | %.0fs",
		strings.Repeat("#", filled), strings.Repeat(".", width-filled), settled, total, strings.Join(parts, ", "), elapsed.Seconds())
	switch {
	case p.terminal:
		p.clearBar()
		fmt.Fprint(p.w, line)
		p.barShown = true
	case time.Since(p.lastBar) >= plainBarEvery || settled == total:
		fmt.Fprintln(p.w, "        "+line)
		p.lastBar = time.Now()
	}
}

// done ends the progress display.
func (p *progress) done() {
	if p.terminal && p.barShown {
		fmt.Fprintln(p.w)
		p.barShown = false
	}
}

// summary prints one row per message and the totals per state.
func (w *watch) summary(out io.Writer) {
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TASK\tKIND\tSENT TO\tFINAL STATE\tATTEMPTS\tRENEWALS\tENQUEUE->FINISH\tEXPECTED\tCHECK")
	for i, p := range w.plan {
		o := w.seen[i]
		attempts, renewals, took := "-", "-", "-"
		if p.want != deadLettered {
			attempts, renewals = fmt.Sprint(o.attempt), fmt.Sprint(o.renewals)
		}
		if o.settled() && !o.settledAt.IsZero() {
			took = fmt.Sprintf("%.1fs", o.settledAt.Sub(o.enqueuedAt).Seconds())
		}
		check := "ok"
		if ok, why := w.asExpected(i); !ok {
			check = "UNEXPECTED: " + why
		}
		state := o.state
		if p.won != "" && o.settled() {
			state += ", " + cmp.Or(winner(o.result), "nobody") + " won"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.name, p.kind, p.via, state, attempts, renewals, took, p.expectation(), check)
	}
	_ = tw.Flush()

	var parts []string
	for _, c := range w.counts() {
		if c.n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", c.state, c.n))
		}
	}
	bad := 0
	for i := range w.plan {
		if ok, _ := w.asExpected(i); !ok {
			bad++
		}
	}
	fmt.Fprintf(out, "\ntotals: %s (%d messages)\n", strings.Join(parts, ", "), len(w.plan))
	if bad == 0 {
		fmt.Fprintf(out, "every task ended as expected in %.1fs\n", time.Since(w.start).Seconds())
	} else {
		fmt.Fprintf(out, "%d of %d did NOT end as expected\n", bad, len(w.plan))
	}
	for i, p := range w.plan {
		if p.want == deadLettered && w.seen[i].reason != "" {
			fmt.Fprintf(out, "dead-letter reason of %s: %s\n", p.name, w.seen[i].reason)
		}
	}
}
