package leasehold

import (
	"errors"
	"testing"
)

// FuzzDecodeListCursor feeds List's cursor decoder arbitrary strings: it
// never panics, refuses with ErrInvalid whatever it cannot use, and what it
// accepts points inside the listing and survives a round trip.
func FuzzDecodeListCursor(f *testing.F) {
	for _, c := range []listCursor{{}, {Status: 1, Inner: "eyJzIjoiUEVORElORyJ9"}, {Status: 4, Inner: "x"}} {
		f.Add(c.encode(), 5)
	}
	f.Add("", 5)
	f.Add("not base64!", 1)
	f.Add("eyJzIjotMX0", 5) // {"s":-1}
	f.Add("bnVsbA", 5)      // null
	f.Fuzz(func(t *testing.T, s string, statuses int) {
		statuses = 1 + (statuses%5+5)%5 // 1..5, as List passes
		cur, err := decodeListCursor(s, statuses)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("decodeListCursor(%q) = %v, want ErrInvalid", s, err)
			}
			return
		}
		if cur.Status < 0 || cur.Status >= statuses {
			t.Fatalf("decodeListCursor(%q) accepted status %d of %d", s, cur.Status, statuses)
		}
		again, err := decodeListCursor(cur.encode(), statuses)
		if err != nil || again != cur {
			t.Fatalf("round trip of %+v: %+v, %v", cur, again, err)
		}
	})
}
