package lease_test

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/leasehold/leasehold/internal/lease"
)

func TestCheckID(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, id string
		ok       bool
		problem  string // part of the message when !ok
	}{
		{"ascii", "order-42", true, ""},
		{"space and unicode", "Bestellung Nr. 42 für Zoë 🚀", true, ""},
		{"private use", "\U000f0000", true, ""},
		{"at the limit", strings.Repeat("é", lease.MaxIDBytes/2), true, ""},
		{"empty", "", false, "is empty"},
		{"over the limit", strings.Repeat("i", lease.MaxIDBytes+1), false, "is 257 bytes, the limit is 256"},
		{"NUL", "a\x00b", false, "U+0000"},
		{"newline", "a\nb", false, "U+000A"},
		{"tab", "a\tb", false, "U+0009"},
		{"DEL", "a\x7f", false, "U+007F"},
		{"C1 NEL", "a\u0085", false, "U+0085"},
		{"RLO", "invoice\u202etxt.exe", false, "U+202E (a control, format or separator character) at byte 7"},
		{"RLI", "a\u2067b", false, "U+2067"},
		{"LRM", "a\u200eb", false, "U+200E"},
		{"BOM", "\ufeffa", false, "U+FEFF"},
		{"paragraph separator", "a\u2029", false, "U+2029"},
		{"not UTF-8", "a\xffb", false, "is not UTF-8 (byte 1 is 0xff)"},
		{"replacement character", "a\ufffdb", false, "U+FFFD"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			err := lease.CheckID(c.id)
			if c.ok {
				if err != nil {
					t.Fatalf("CheckID(%q) = %v, want nil", c.id, err)
				}
				return
			}
			if !errors.Is(err, lease.ErrInvalid) || !strings.Contains(err.Error(), c.problem) {
				t.Fatalf("CheckID(%q) = %v, want ErrInvalid saying %q", c.id, err, c.problem)
			}
			if strings.ContainsAny(err.Error(), "\x00\n\t\x7f\u0085\u202e\u2067\u200e\ufeff\u2029") || !utf8.ValidString(err.Error()) {
				t.Fatalf("the error %q prints the offending character", err)
			}
		})
	}
}

func TestDisplayID(t *testing.T) {
	t.Parallel()
	cases := []struct{ id, want string }{
		{"order-42", "order-42"},
		{"für Zoë 🚀", "für Zoë 🚀"},
		{"a b", "a b"},
		{"two\nlines", `"two\nlines"`},
		{"nul\x00", `"nul\x00"`},
		{"esc\x1b[31m", `"esc\x1b[31m"`},
		{"rlo\u202ecba", `"rlo\u202ecba"`},
		{"nbsp\u00a0", `"nbsp\u00a0"`},
		{"bad\xff", `"bad\xff"`},
	}
	for _, c := range cases {
		if got := lease.DisplayID(c.id); got != c.want {
			t.Errorf("DisplayID(%q) = %s, want %s", c.id, got, c.want)
		}
	}
}
