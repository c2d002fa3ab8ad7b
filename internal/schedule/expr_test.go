package schedule

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestParseRejects(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, expr string
		syntax     Syntax
		want       string
	}{
		{"empty", "", AWS, "want rate"},
		{"seconds on AWS", "rate(10 seconds)", AWS, "smallest rate is rate(1 minute)"},
		{"singular needed", "rate(1 minutes)", AWS, "write rate(1 minute)"},
		{"plural needed", "rate(5 minute)", AWS, "write rate(5 minutes)"},
		{"zero", "rate(0 minutes)", AWS, "positive"},
		{"unit", "rate(2 weeks)", AWS, "unit"},
		{"too long", "rate(99999 days)", AWS, "too long"},
		{"five fields", "cron(0 12 * * ?)", AWS, "5 fields"},
		{"both days", "cron(0 12 * * * *)", AWS, "exactly one"},
		{"no ?", "cron(0 12 1 * 2 *)", AWS, "exactly one"},
		{"? in minutes", "cron(? 12 * * ? *)", AWS, "? is allowed only"},
		{"L", "cron(0 12 L * ? *)", AWS, "L, W and #"},
		{"W", "cron(0 12 15W * ? *)", AWS, "L, W and #"},
		{"#", "cron(0 12 ? * 6#3 *)", AWS, "L, W and #"},
		{"out of range", "cron(60 12 * * ? *)", AWS, "outside 0-59"},
		{"backwards", "cron(0 12 ? * FRI-MON *)", AWS, "backwards"},
		{"bad step", "cron(0/0 12 * * ? *)", AWS, "step"},
		{"year", "cron(0 12 * * ? 1969)", AWS, "outside 1970-2199"},
		{"at", "at(2030-01-01T00:00:00)", AWS, "one-time"},
		{"30 February", "cron(0 0 30 2 ? *)", AWS, "never fires: no day-of-month 30 in month 2"},
		{"31st of short months", "cron(0 12 31 APR,JUN,SEP,NOV ? *)", AWS, "never fires"},
		{"29 February of common years", "cron(0 12 29 2 ? 2027/4)", AWS, "never fires"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse(tc.expr, tc.syntax)
			if !errors.Is(err, ErrExpression) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse(%q) = %v, want ErrExpression containing %q", tc.expr, err, tc.want)
			}
		})
	}
}

func TestNext(t *testing.T) {
	t.Parallel()
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	epoch := time.Unix(0, 0)
	cases := []struct {
		name, expr string
		syntax     Syntax
		loc        *time.Location
		after      string
		want       []string // the next slots, in order
	}{
		{"rate seconds", "rate(10 seconds)", Local, nil, "2026-12-03T10:00:03Z",
			[]string{"2026-12-03T10:00:10Z", "2026-12-03T10:00:20Z"}},
		{"rate on a slot", "rate(10 seconds)", Local, nil, "2026-12-03T10:00:10Z",
			[]string{"2026-12-03T10:00:20Z"}},
		{"rate minute", "rate(1 minute)", AWS, nil, "2026-12-03T10:00:59Z",
			[]string{"2026-12-03T10:01:00Z", "2026-12-03T10:02:00Z"}},
		{"every 15 minutes", "cron(0/15 * * * ? *)", AWS, nil, "2026-12-03T10:07:00Z",
			[]string{"2026-12-03T10:15:00Z", "2026-12-03T10:30:00Z", "2026-12-03T10:45:00Z", "2026-12-03T11:00:00Z"}},
		{"weekdays at 9:30", "cron(30 9 ? * MON-FRI *)", AWS, nil, "2026-12-04T10:00:00Z", // a Friday
			[]string{"2026-12-07T09:30:00Z", "2026-12-08T09:30:00Z"}},
		{"numeric weekday 1 is Sunday", "cron(0 0 ? * 1 *)", AWS, nil, "2026-12-03T00:00:00Z",
			[]string{"2026-12-06T00:00:00Z", "2026-12-13T00:00:00Z"}},
		{"list and range", "cron(0 8,12-13 * * ? *)", AWS, nil, "2026-12-03T09:00:00Z",
			[]string{"2026-12-03T12:00:00Z", "2026-12-03T13:00:00Z", "2026-12-04T08:00:00Z"}},
		{"first of month", "cron(0 0 1 * ? *)", AWS, nil, "2026-12-03T00:00:00Z",
			[]string{"2027-01-01T00:00:00Z", "2027-02-01T00:00:00Z"}},
		{"31st skips short months", "cron(0 0 31 * ? *)", AWS, nil, "2027-01-31T00:00:00Z",
			[]string{"2027-03-31T00:00:00Z", "2027-05-31T00:00:00Z"}},
		{"month names", "cron(0 0 1 JAN,JUL ? *)", AWS, nil, "2026-12-03T00:00:00Z",
			[]string{"2027-01-01T00:00:00Z", "2027-07-01T00:00:00Z"}},
		{"year", "cron(0 0 1 1 ? 2030-2031)", AWS, nil, "2026-12-03T00:00:00Z",
			[]string{"2030-01-01T00:00:00Z", "2031-01-01T00:00:00Z"}},
		{"leap day", "cron(0 12 29 2 ? *)", AWS, nil, "2026-12-03T00:00:00Z",
			[]string{"2028-02-29T12:00:00Z", "2032-02-29T12:00:00Z"}},
		{"time zone", "cron(0 9 * * ? *)", AWS, ny, "2026-12-03T00:00:00Z",
			[]string{"2026-12-03T14:00:00Z", "2026-12-04T14:00:00Z"}},
		{"across spring forward", "cron(30 2 * * ? *)", AWS, ny, "2027-03-13T12:00:00Z", // 2:30 does not exist on 14 March
			[]string{"2027-03-15T06:30:00Z"}},
		{"hourly across spring forward", "cron(0 * * * ? *)", AWS, ny, "2027-03-14T06:30:00Z",
			[]string{"2027-03-14T07:00:00Z", "2027-03-14T08:00:00Z"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e, err := Parse(tc.expr, tc.syntax)
			if err != nil {
				t.Fatal(err)
			}
			at := mustTime(t, tc.after)
			for _, w := range tc.want {
				got, ok := e.Next(at, epoch, tc.loc)
				if !ok || !got.Equal(mustTime(t, w)) {
					t.Fatalf("%s after %s = %s, %v; want %s", tc.expr, at.UTC().Format(time.RFC3339), got.UTC().Format(time.RFC3339), ok, w)
				}
				at = got
			}
		})
	}
}

// TestCheckFires: a schedule whose slots are all past is refused when it is
// created, with the reason; one with a slot to come is accepted.
func TestCheckFires(t *testing.T) {
	t.Parallel()
	now := mustTime(t, "2026-12-03T10:00:00Z")
	for _, tc := range []struct {
		expr string
		want string // "" when accepted
	}{
		{"cron(0 12 * * ? 2020)", "has no slot after 2026-12-03T10:00:00Z"},
		{"cron(0 9 1 1 ? 1999-2025)", "has no slot after"},
		{"cron(0 9 3 12 ? 2026)", "has no slot after"}, // 09:00 today was the last one
		{"cron(0 11 3 12 ? 2026)", ""},
		{"cron(0 0 1 1 ? 2199)", ""},
		{"rate(5 minutes)", ""},
	} {
		e, err := Parse(tc.expr, AWS)
		if err != nil {
			t.Fatal(err)
		}
		err = Spec{Name: "s", Expr: e, Kind: "k"}.CheckFires(now)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v, want accepted", tc.expr, err)
			}
			continue
		}
		if !errors.Is(err, ErrExpression) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrExpression containing %q", tc.expr, err, tc.want)
		}
	}
}

func TestNextEnds(t *testing.T) {
	t.Parallel()
	e, err := Parse("cron(0 0 1 1 ? 2027)", AWS)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := e.Next(mustTime(t, "2027-01-01T00:00:00Z"), time.Time{}, nil); ok {
		t.Fatalf("Next after the last slot = %s, want none", got)
	}
}

// FuzzParse: no input panics Parse or Next, and a slot is always after the
// time asked about and allowed by the expression (the next slot of the
// minute before it is itself).
func FuzzParse(f *testing.F) {
	for _, s := range []string{"rate(5 minutes)", "rate(1 second)", "cron(0/15 * * * ? *)", "cron(30 9 ? * MON-FRI *)",
		"cron(0 0 29 2 ? 2028-2100/4)", "cron(* * ? * 1-7/2 *)", "cron(0 0 31 4 ? *)"} {
		f.Add(s, int64(1796292519))
	}
	f.Fuzz(func(t *testing.T, s string, unix int64) {
		e, err := Parse(s, Local)
		if err != nil {
			return
		}
		at := time.Unix(unix%(1<<33), 0).UTC()
		got, ok := e.Next(at, time.Unix(0, 0), time.UTC)
		if e.cron != nil {
			// Parse accepts only a cron that fires at some time.
			if _, ever := e.Next(time.Date(minYear, 1, 1, 0, 0, 0, 0, time.UTC).Add(-time.Minute), time.Time{}, time.UTC); !ever {
				t.Fatalf("%s: accepted, and it never fires", s)
			}
		}
		if !ok {
			return
		}
		if !got.After(at) {
			t.Fatalf("%s: Next(%s) = %s, not after it", s, at, got)
		}
		if e.cron != nil {
			again, ok := e.Next(got.Add(-time.Minute), time.Unix(0, 0), time.UTC)
			if !ok || !again.Equal(got) {
				t.Fatalf("%s: Next(%s - 1m) = %s, want %s", s, got, again, got)
			}
		}
	})
}
