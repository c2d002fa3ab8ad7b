package lease_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/lease"
)

func nested(n int) []byte {
	return []byte(strings.Repeat("[", n) + strings.Repeat("]", n))
}

// A document nested deeper than the limit is refused with an error naming
// the limit, not as "not valid JSON"; one at the limit is accepted.
func TestCheckJSONNamesTheDepthLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		doc  []byte
		want string // "" when accepted
	}{
		{"at the limit", nested(lease.MaxJSONDepth), ""},
		{"object at the limit", []byte(strings.Repeat(`{"a":`, lease.MaxJSONDepth) + "1" + strings.Repeat("}", lease.MaxJSONDepth)), ""},
		{"one over", nested(lease.MaxJSONDepth + 1), "payload nests arrays and objects deeper than 10000 levels, the JSON depth limit"},
		{"brackets in strings do not count", []byte(`["` + strings.Repeat("[", 20000) + `"]`), ""},
		{"not JSON", []byte(`{"a":`), "payload is not valid JSON"},
		{"unbalanced and shallow", []byte(`[[[]`), "payload is not valid JSON"},
	} {
		err := lease.CheckJSON("payload", tc.doc)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want accepted", tc.name, err)
		case tc.want != "" && (!errors.Is(err, lease.ErrInvalid) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want ErrInvalid with %q", tc.name, err, tc.want)
		}
	}
}
