package lease

import (
	"testing"
)

func TestSamePayload(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		a, b string
		same bool
	}{
		{"identical", `{"a":1}`, `{"a":1}`, true},
		{"white space", `{"a":1,"b":[1,2]}`, " {\"a\" : 1 ,\n\"b\":[ 1, 2 ]}\n", true},
		{"member order", `{"a":1,"b":{"c":2,"d":3}}`, `{"b":{"d":3,"c":2},"a":1}`, true},
		{"string escapes", `"A<&>"`, `"\u0041\u003c&>"`, true},
		{"none and null", ``, `null`, true},
		{"big numbers kept exact", `12345678901234567890`, `12345678901234567891`, false},
		{"number spelling", `1`, `1.0`, false},
		{"array order", `[1,2]`, `[2,1]`, false},
		{"value", `{"a":1}`, `{"a":2}`, false},
		{"none and a document", ``, `{}`, false},
		{"not JSON, same bytes", `{"a":`, `{"a":`, true},
		{"not JSON, other bytes", `{"a":`, `{"a": `, false},
	}
	for _, c := range cases {
		if got := samePayload([]byte(c.a), []byte(c.b)); got != c.same {
			t.Errorf("%s: samePayload(%q, %q) = %t", c.name, c.a, c.b, got)
		}
		if got := samePayload([]byte(c.b), []byte(c.a)); got != c.same {
			t.Errorf("%s: not symmetric", c.name)
		}
	}
}
