package schedule

import (
	"fmt"
	"testing"
	"time"
)

func TestDue(t *testing.T) {
	t.Parallel()
	every10s, err := Parse("rate(10 seconds)", Local)
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	at := func(sec int) time.Time { return base.Add(time.Duration(sec) * time.Second) }
	cases := []struct {
		name      string
		catchUp   string
		last, now time.Time
		want      []int // seconds after base
	}{
		{"on time", "latest", at(5), at(10), []int{10}},
		{"nothing due", "latest", at(10), at(19), nil},
		{"a little late is on time", "none", at(5), at(12), []int{10}},
		{"stall: latest fires the on-time slot only", "latest", at(5), at(42), []int{40}},
		{"stall: all fires the missed ones too", "all", at(5), at(42), []int{10, 20, 30, 40}},
		{"stall: all:2 fires the two latest missed", "all:2", at(5), at(42), []int{20, 30, 40}},
		{"stall: none fires the on-time slot", "none", at(5), at(42), []int{40}},
		{"late: latest fires the most recent missed", "latest", at(5), at(35), []int{30}},
		{"late: none fires nothing", "none", at(5), at(35), nil},
		{"late: all fires every missed", "all", at(5), at(35), []int{10, 20, 30}},
		{"start: latest looks back one max age", "latest,1m", time.Time{}, at(35), []int{30}},
		{"start: all is bounded by max age", "all,25s", time.Time{}, at(35), []int{10, 20, 30}},
		{"start: all older than max age", "all,4s", time.Time{}, at(35), nil},
		{"start: none", "none", time.Time{}, at(35), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := ParseCatchUp(tc.catchUp)
			if err != nil {
				t.Fatal(err)
			}
			s := Spec{Name: "tick", Expr: every10s, Kind: "k", CatchUp: c}
			const tol = 2 * time.Second // so at(35) finds slot 30 late
			var got []int
			for _, d := range s.Due(tc.last, tc.now, tol) {
				got = append(got, int(d.Sub(base)/time.Second))
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("Due(%v, %v) with %s = %v, want %v", tc.last.Sub(base), tc.now.Sub(base), tc.catchUp, got, tc.want)
			}
		})
	}
}

// A fast rate with a long max age keeps the most recent slot: the decision
// does not walk, and stop short in, the slots the max age would allow.
func TestDueFastRateLongMaxAge(t *testing.T) {
	t.Parallel()
	e, err := Parse("rate(1 second)", Local)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 3, 10, 0, 0, 500_000_000, time.UTC)
	for _, c := range []struct {
		catchUp CatchUp
		n       int
	}{
		{CatchUp{Mode: Latest, MaxAge: 400 * time.Hour}, 1},        // the on-time slot
		{CatchUp{Mode: All, Limit: 3, MaxAge: 400 * time.Hour}, 4}, // and the 3 missed before it
	} {
		s := Spec{Name: "fast", Expr: e, Kind: "k", CatchUp: c.catchUp, Anchor: now.Add(-500 * time.Hour).Truncate(time.Second)}
		got := s.Due(time.Time{}, now, time.Second)
		if len(got) != c.n || now.Sub(got[0]) > time.Duration(c.n)*time.Second {
			t.Errorf("%s: Due = %v, want the slots of the last %d seconds before %v", c.catchUp, got, c.n, now)
		}
	}
}

// Deciding again from the same last (after a failed send) gives the same
// slots; deciding from the new last gives none of them again.
func TestDueDecidesEachSlotOnce(t *testing.T) {
	t.Parallel()
	e, _ := Parse("cron(0/15 * * * ? *)", AWS)
	s := Spec{Name: "q", Expr: e, Kind: "k", CatchUp: CatchUp{Mode: All}}
	last := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	seen := map[time.Time]int{}
	end := last.Add(3 * time.Hour)
	for now := last; now.Before(end); now = now.Add(7 * time.Minute) {
		first := s.Due(last, now, time.Minute)
		if again := s.Due(last, now, time.Minute); fmt.Sprint(again) != fmt.Sprint(first) {
			t.Fatalf("Due is not a function of (last, now): %v then %v", first, again)
		}
		for _, d := range first {
			seen[d]++
		}
		last = now
	}
	if len(seen) != 11 { // 10:15 .. 12:45; 13:00 is not reached
		t.Fatalf("%d slots decided, want 11: %v", len(seen), seen)
	}
	for d, n := range seen {
		if n != 1 {
			t.Errorf("slot %s fired %d times", d, n)
		}
	}
}
