package settingstable

import (
	"maps"
	"testing"
	"time"

	"github.com/leasehold/leasehold/settings"
)

func TestParseRateLimits(t *testing.T) {
	good := map[string]map[string]settings.RateLimit{
		"leasehold-work=50/s":               {"leasehold-work": {Starts: 50, Per: time.Second}},
		" a=1/m , b = 3/10s ,":              {"a": {Starts: 1, Per: time.Minute}, "b": {Starts: 3, Per: 10 * time.Second}},
		"20/s":                              {"": {Starts: 20, Per: time.Second}},
		"5/h,reports=2/2m":                  {"": {Starts: 5, Per: time.Hour}, "reports": {Starts: 2, Per: 2 * time.Minute}},
		"q.fifo-x_1=7/1s":                   {"q.fifo-x_1": {Starts: 7, Per: time.Second}},
		"reports=1000/s,leasehold-work=1/m": {"reports": {Starts: 1000, Per: time.Second}, "leasehold-work": {Starts: 1, Per: time.Minute}},
	}
	for in, want := range good {
		got, err := ParseRateLimits(in)
		if err != nil || !maps.Equal(got, want) {
			t.Errorf("ParseRateLimits(%q) = %v, %v; want %v", in, got, err, want)
			continue
		}
		if again, err := ParseRateLimits(FormatRateLimits(got)); err != nil || !maps.Equal(again, got) {
			t.Errorf("FormatRateLimits(%v) = %q, which reads back as %v, %v", got, FormatRateLimits(got), again, err)
		}
	}
	for _, in := range []string{"", ",", "=5/s", "a=5", "a=5/", "a=0/s", "a=-1/s", "a=x/s", "a=5/d", "a=5/1500ms",
		"a=5/0s", "a b=5/s", "a/b=5/s", "a=1/s,a=2/s", "1/s,2/m"} {
		if got, err := ParseRateLimits(in); err == nil {
			t.Errorf("ParseRateLimits(%q) = %v, want an error", in, got)
		}
	}
}

func TestParseKindConcurrency(t *testing.T) {
	got, err := ParseKindConcurrency(" resize=3 , report=1,")
	if want := map[string]int{"resize": 3, "report": 1}; err != nil || !maps.Equal(got, want) {
		t.Errorf("ParseKindConcurrency = %v, %v; want %v", got, err, want)
	}
	for _, in := range []string{"", ",", "=3", "resize", "resize=", "resize=0", "resize=101", "resize=x", "a=1,a=2"} {
		if got, err := ParseKindConcurrency(in); err == nil {
			t.Errorf("ParseKindConcurrency(%q) = %v, want an error", in, got)
		}
	}
}
