package settings

import (
	"maps"
	"testing"
	"time"
)

func TestParseRateLimits(t *testing.T) {
	good := map[string]map[string]RateLimit{
		"leasehold-work=50/s":               {"leasehold-work": {50, time.Second}},
		" a=1/m , b = 3/10s ,":              {"a": {1, time.Minute}, "b": {3, 10 * time.Second}},
		"20/s":                              {"": {20, time.Second}},
		"5/h,reports=2/2m":                  {"": {5, time.Hour}, "reports": {2, 2 * time.Minute}},
		"q.fifo-x_1=7/1s":                   {"q.fifo-x_1": {7, time.Second}},
		"reports=1000/s,leasehold-work=1/m": {"reports": {1000, time.Second}, "leasehold-work": {1, time.Minute}},
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
