package metadata

import (
	"strings"
	"testing"
)

func TestProblem(t *testing.T) {
	t.Parallel()
	many := map[string]string{}
	for i := range MaxEntries + 1 {
		many[strings.Repeat("k", i+1)] = "v"
	}
	big := map[string]string{}
	for i := range 5 {
		big[strings.Repeat("k", i+1)] = strings.Repeat("v", MaxValueBytes)
	}
	for _, c := range []struct {
		md   map[string]string
		want string // "" for none
	}{
		{nil, ""},
		{map[string]string{}, ""},
		{map[string]string{"tenant": "acme", "trace.parent-1:x_y": "émoji ✓"}, ""},
		{map[string]string{"k": strings.Repeat("v", MaxValueBytes)}, ""},
		{many, "entries"},
		{map[string]string{"": "v"}, "key of 0 bytes"},
		{map[string]string{strings.Repeat("k", MaxKeyBytes+1): "v"}, "key of 65 bytes"},
		{map[string]string{"a b": "v"}, "ASCII letters"},
		{map[string]string{"ключ": "v"}, "ASCII letters"},
		{map[string]string{"k": strings.Repeat("v", MaxValueBytes+1)}, "bytes, the limit is 512"},
		{map[string]string{"k": "a\nb"}, "control characters"},
		{map[string]string{"k": "a\u0085b"}, "control characters"},
		{map[string]string{"k": "a\xffb"}, "UTF-8"},
		{big, "keys and values"},
	} {
		got := Problem(c.md)
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("Problem(%.60q) = %q, want %q", c.md, got, c.want)
		}
	}
}

// With never writes the map it is given.
func TestWithCopies(t *testing.T) {
	t.Parallel()
	mine := map[string]string{"a": "1"}
	got := With(mine, "b", "2")
	if len(mine) != 1 || got["a"] != "1" || got["b"] != "2" {
		t.Fatalf("With: mine %v, got %v", mine, got)
	}
	if got := With(mine, "a", "1"); len(got) != 1 {
		t.Errorf("With of the same value: %v", got)
	}
	if got := With(mine, "a", ""); len(got) != 0 || len(mine) != 1 {
		t.Errorf("With removing: got %v, mine %v", got, mine)
	}
	if got := With(nil, "a", ""); got != nil {
		t.Errorf("With(nil, a, \"\") = %v", got)
	}
}
