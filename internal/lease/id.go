package lease

import (
	"fmt"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// CheckID checks that id can name a task. An id is 1 to MaxIDBytes bytes of
// UTF-8 text without control characters (category Cc: NUL, newline, tab,
// ESC, DEL, C1), format characters (Cf: the bidirectional overrides and
// isolates U+202A..U+202E and U+2066..U+2069, the marks U+200E, U+200F and
// U+061C, zero-width characters, the BOM), line or paragraph separators (Zl,
// Zp), and without U+FFFD, the character a lossy conversion of bytes that are
// not UTF-8 leaves behind. Such ids would print misleadingly, or two
// different byte strings would become one id on the way to DynamoDB. The
// error wraps ErrInvalid and names the offending character by code point and
// byte offset, never by printing it.
func CheckID(id string) error {
	if p := IDProblem(id); p != "" {
		return fmt.Errorf("%w: id %s", ErrInvalid, p)
	}
	return nil
}

// IDProblem says what is wrong with id, as a phrase that follows the word
// "id" ("is 300 bytes, the limit is 256"), or "" when CheckID accepts it.
func IDProblem(id string) string {
	switch {
	case id == "":
		return "is empty"
	case len(id) > MaxIDBytes:
		return fmt.Sprintf("is %d bytes, the limit is %d", len(id), MaxIDBytes)
	}
	for i, r := range id {
		switch {
		case r == utf8.RuneError:
			if _, size := utf8.DecodeRuneInString(id[i:]); size == 1 {
				return fmt.Sprintf("is not UTF-8 (byte %d is 0x%02x)", i, id[i])
			}
			return fmt.Sprintf("contains U+FFFD (the replacement character) at byte %d", i)
		case !idRune(r):
			return fmt.Sprintf("contains %U (a control, format or separator character) at byte %d", r, i)
		}
	}
	return ""
}

// idRune reports whether r may appear in an id: anything but the categories
// Cc, Cf, Zl and Zp. Categories this broad are stable across Unicode
// versions, so every build agrees on which ids are valid.
func idRune(r rune) bool {
	if r < utf8.RuneSelf {
		// The only ASCII characters of these categories are the Cc
		// controls; most ids are ASCII, and the tables cost a search each.
		return r >= 0x20 && r != 0x7f
	}
	return !unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp)
}

// DisplayID returns id fit for a terminal or a log line: unchanged when it
// is valid UTF-8 made only of characters strconv.IsPrint accepts, otherwise
// quoted and escaped as by strconv.Quote, so that a control character, a
// bidirectional override or a stray byte can never act on the output.
func DisplayID(id string) string {
	if !utf8.ValidString(id) {
		return strconv.Quote(id)
	}
	for _, r := range id {
		if !strconv.IsPrint(r) {
			return strconv.Quote(id)
		}
	}
	return id
}
