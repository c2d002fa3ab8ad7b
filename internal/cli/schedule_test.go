package cli

import (
	"strings"
	"testing"

	"github.com/leasehold/leasehold/admin"
)

func TestParseScheduleFlag(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, in string
		check    func(t *testing.T, s admin.Schedule)
		err      string
	}{
		{"rate in seconds", `tick=rate(10 seconds);kind=greet;payload={"name":"a;b"}`, func(t *testing.T, s admin.Schedule) {
			if s.Name() != "tick" || s.Expression() != "rate(10 seconds)" || s.Kind() != "greet" {
				t.Fatalf("got %+v", s)
			}
		}, ""},
		{"cron with everything", `rep=cron(0 2 * * ? *);kind=report;catch-up=all:2,30m;timezone=Europe/Paris;queue=leasehold-reports`, func(t *testing.T, s admin.Schedule) {
			// admin's tests check the parsed fields.
			if s.Name() != "rep" || s.Expression() != "cron(0 2 * * ? *)" || s.Kind() != "report" {
				t.Fatalf("got %+v", s)
			}
		}, ""},
		{"no expression", `tick;kind=greet`, nil, "want NAME=EXPR"},
		{"not an expression", `tick=every 10s;kind=greet`, nil, "neither rate"},
		{"no kind", `tick=rate(1 minute)`, nil, "--kind is required"},
		{"unknown key", `tick=rate(1 minute);kind=k;colour=red`, nil, `unknown key "colour"`},
		{"bad name", `a b=rate(1 minute);kind=k`, nil, "schedule name"},
		{"bad payload", `tick=rate(1 minute);kind=k;payload={`, nil, "not valid JSON"},
		{"deep payload", `tick=rate(1 minute);kind=k;payload=` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001), nil, "deeper than 10000 levels"},
		{"bad zone", `tick=cron(0 2 * * ? *);kind=k;timezone=Mars/Base`, nil, "--timezone"},
		{"L", `tick=cron(0 2 L * ? *);kind=k`, nil, "L, W and #"},
		{"past years", `tick=cron(0 2 * * ? 2001-2020);kind=k`, nil, "never fire"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := parseScheduleFlag(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || exitCode(err) != ExitUsage {
					t.Fatalf("err = %v (exit %d), want a usage error containing %q", err, exitCode(err), tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, s)
		})
	}
}

func TestScheduleCreateRefusesWhatEventBridgeWould(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"schedule", "create", "x", "--rate", "10 seconds", "--kind", "k"}, "smallest rate is rate(1 minute)"},
		{[]string{"schedule", "create", "x", "--rate", "1 minute", "--cron", "0 * * * ? *", "--kind", "k"}, "exactly one of --cron and --rate"},
		{[]string{"schedule", "create", "x", "--cron", "0 12 ? * 6#3 *", "--kind", "k"}, "L, W and #"},
		{[]string{"schedule", "create", "x", "--rate", "1 minute"}, "--kind is required"},
		{[]string{"schedule", "create", "x", "--rate", "1 minute", "--kind", "k", "--catch-up", "some"}, "catch-up"},
		{[]string{"schedule", "create", "x", "--cron", "0 0 30 2 ? *", "--kind", "k"}, "never fires: no day-of-month 30 in month 2"},
		{[]string{"schedule", "create", "x", "--cron", "0 12 * * ? 2020", "--kind", "k"}, "has no slot after"},
	}
	for _, tc := range cases {
		var out, errOut strings.Builder
		code := Main(t.Context(), tc.args, Streams{In: strings.NewReader(""), Out: &out, Err: &errOut})
		if code != ExitUsage || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", tc.args, code, errOut.String(), ExitUsage, tc.want)
		}
	}
}
