package lease

import (
	"encoding/json"
	"fmt"
)

// MaxJSONDepth is how deeply a payload, result or step result may nest
// arrays and objects: encoding/json's own limit, so every document the
// store accepts decodes in a Go handler, and nothing that decoded before
// is refused.
const MaxJSONDepth = 10000

// checkJSON checks that b, the document called what ("payload",
// "result"...), is one JSON value. A document that nests deeper than
// MaxJSONDepth says so, rather than that it is not JSON. The error wraps
// ErrInvalid.
func checkJSON(what string, b []byte) error {
	if p := JSONProblem(b); p != "" {
		return fmt.Errorf("%w: %s %s", ErrInvalid, what, p)
	}
	return nil
}

// TooDeep is what JSONProblem says of a document nested past MaxJSONDepth.
var TooDeep = fmt.Sprintf("nests arrays and objects deeper than %d levels, the JSON depth limit", MaxJSONDepth)

// JSONProblem says what is wrong with b as one JSON document: "" when
// nothing, TooDeep when it nests deeper than MaxJSONDepth, else "is not
// valid JSON".
func JSONProblem(b []byte) string {
	switch {
	case json.Valid(b):
		return ""
	case jsonDepth(b) > MaxJSONDepth:
		return TooDeep
	}
	return "is not valid JSON"
}

// jsonDepth is the deepest nesting of brackets in b outside strings,
// judged by brackets and quotes alone.
func jsonDepth(b []byte) int {
	depth, deepest := 0, 0
	var str JSONString
	for _, c := range b {
		switch {
		case str.Next(c):
		case c == '[' || c == '{':
			depth++
			deepest = max(deepest, depth)
		case c == ']' || c == '}':
			depth--
		}
	}
	return deepest
}

// JSONString follows a walk through JSON text, a byte at a time, in and out
// of its strings. The zero value starts outside a string.
type JSONString struct{ in, escaped bool }

// Next takes the text's next byte, c, and reports whether it belongs to a
// string, its quotes included.
func (s *JSONString) Next(c byte) bool {
	switch {
	case s.escaped:
		s.escaped = false
	case !s.in:
		s.in = c == '"'
		return s.in
	case c == '\\':
		s.escaped = true
	case c == '"':
		s.in = false
	}
	return true
}

// EncodeJSON encodes v, a payload or a result, as JSON for the table: nil
// is no value, a json.RawMessage is checked and passes through, anything
// else goes through json.Marshal. what names it in errors, which wrap
// ErrInvalid.
func EncodeJSON(what string, v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		if err := checkJSON(what, v); err != nil {
			return nil, err
		}
		return v, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: %s does not encode as JSON: %w", ErrInvalid, what, err)
	}
	// Marshal nests as deep as the value does; a worker could not decode
	// more than MaxJSONDepth.
	if err := checkJSON(what, b); err != nil {
		return nil, err
	}
	return b, nil
}
