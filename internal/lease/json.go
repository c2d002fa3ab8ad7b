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

// CheckJSON checks that b, the document called what ("payload",
// "result"...), is one JSON value. A document that nests deeper than
// MaxJSONDepth says so, rather than that it is not JSON. The error wraps
// ErrInvalid.
func CheckJSON(what string, b []byte) error {
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
	inString, escaped := false, false
	for _, c := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			depth++
			deepest = max(deepest, depth)
		case c == ']' || c == '}':
			depth--
		}
	}
	return deepest
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
		if err := CheckJSON(what, v); err != nil {
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
	if err := CheckJSON(what, b); err != nil {
		return nil, err
	}
	return b, nil
}
