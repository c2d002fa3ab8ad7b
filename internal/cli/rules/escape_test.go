package rules

import "testing"

// A multi-line text keeps its line breaks; every other control is escaped
// as Escape escapes it, and OneLine makes white space one space.
func TestEscapeLinesAndOneLine(t *testing.T) {
	in := "a\x1b[1m\r\n\tb\x00"
	if got, want := EscapeLines(in), `a\x1b[1m\r`+"\n"+`\tb\x00`; got != want {
		t.Errorf("EscapeLines(%q) = %q, want %q", in, got, want)
	}
	if got, want := OneLine(in), `a\x1b[1m b\x00`; got != want {
		t.Errorf("OneLine(%q) = %q, want %q", in, got, want)
	}
	if got := EscapeLines(EscapeLines(in)); got != EscapeLines(in) {
		t.Errorf("escaping twice changed %q to %q", EscapeLines(in), got)
	}
}
