package lease

import (
	"errors"
	"strings"
	"testing"
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
		{"at the limit", nested(MaxJSONDepth), ""},
		{"object at the limit", []byte(strings.Repeat(`{"a":`, MaxJSONDepth) + "1" + strings.Repeat("}", MaxJSONDepth)), ""},
		{"one over", nested(MaxJSONDepth + 1), "payload nests arrays and objects deeper than 10000 levels, the JSON depth limit"},
		{"brackets in strings do not count", []byte(`["` + strings.Repeat("[", 20000) + `"]`), ""},
		{"not JSON", []byte(`{"a":`), "payload is not valid JSON"},
		{"unbalanced and shallow", []byte(`[[[]`), "payload is not valid JSON"},
	} {
		err := checkJSON("payload", tc.doc)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want accepted", tc.name, err)
		case tc.want != "" && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want ErrInvalid with %q", tc.name, err, tc.want)
		}
	}
}
