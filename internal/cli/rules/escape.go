package rules

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Escape makes task text (an error, a result, a queue name: anything a
// handler or a sender to the queues wrote) safe to print to a terminal:
// every rune strconv.IsPrint rejects (C0 and C1 controls such as ESC, CR,
// BEL and CSI U+009B, DEL, bidirectional and other format characters) is
// written as its Go escape (\x1b, \r, \u009b, \u202e), and every byte
// that is not UTF-8 as \xNN. Printable text, spaces included, is kept.
// Its output is all printable, so escaping twice changes nothing. The
// CLI and the inspector (internal/cli/ui) both show task text through it,
// so that an operator reads the same characters in a terminal and a page.
func Escape(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || !strconv.IsPrint(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case strconv.IsPrint(r):
			b.WriteString(s[i : i+n])
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
		i += n
	}
	return b.String()
}

// OneLine is s on one line, its runs of white space made one space, and
// escaped by Escape: how a list row shows an error.
func OneLine(s string) string { return Escape(strings.Join(strings.Fields(s), " ")) }

// EscapeLines is s escaped by Escape line by line: a multi-line text (an
// error with a stack, a message body) keeps its line breaks, and every
// other character Escape escapes is escaped.
func EscapeLines(s string) string {
	if !strings.Contains(s, "\n") {
		return Escape(s)
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = Escape(l)
	}
	return strings.Join(lines, "\n")
}
