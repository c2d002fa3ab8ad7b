package cli

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// FuzzParseLine feeds the JSON Lines parser of `enqueue --file` arbitrary
// lines: it never panics, its messages are UTF-8 text, and a line it
// accepts is exactly one JSON object with a kind.
func FuzzParseLine(f *testing.F) {
	for _, s := range []string{
		`{"kind":"greet","payload":{"name":"Ada"},"id":"greet-ada","max_attempts":3,"delay_seconds":60}`,
		`{"v":1,"kind":"upper","run_at":"2031-03-14T15:09:26Z"}`,
		`{"kind":"k"} {"kind":"k"}`, `{"kind":"k"}}`, `{"kind":""}`, `[]`, `{`, "\xff",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		s, err := parseLine(line)
		if err != nil {
			if !utf8.ValidString(err.Error()) {
				t.Fatalf("parseLine(%q): message is not UTF-8: %q", line, err)
			}
			return
		}
		if s.Kind == "" {
			t.Fatalf("parseLine(%q) accepted a line without kind", line)
		}
		if !json.Valid(line) {
			t.Fatalf("parseLine(%q) accepted a line that is not one JSON value", line)
		}
		if raw, ok := s.Payload.(json.RawMessage); ok && !json.Valid(raw) {
			t.Fatalf("parseLine(%q): payload %q is not JSON", line, raw)
		}
	})
}
