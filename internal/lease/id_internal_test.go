package lease

import (
	"testing"
	"unicode"
	"unicode/utf8"
)

// The ASCII shortcut of idRune agrees with the Unicode categories.
func TestIDRuneASCII(t *testing.T) {
	t.Parallel()
	for r := rune(0); r < utf8.RuneSelf; r++ {
		want := !unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp)
		if got := idRune(r); got != want {
			t.Errorf("idRune(%U) = %v, want %v", r, got, want)
		}
	}
}
