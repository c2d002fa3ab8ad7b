package token

import (
	"encoding/json"
	"strings"

	"github.com/leasehold/leasehold/internal/lease"
)

// fields are a token's JSON fields as read, before validation.
type fields struct {
	v           int
	hasV        bool
	id          string
	kind        string
	payload     json.RawMessage // nil when absent or null
	maxAttempts int
	queue       string
	hasQueue    bool
	createToken string
	tp, ts      string // a token's of a version before metadata
	// Read only by decodeJSON (the scanner leaves such bodies to it).
	parent      string
	after       []string
	afterAny    bool
	waitTimeout int64
	callback    string
	heartbeat   string
	result      json.RawMessage
	errMsg      *string
	wake        bool
	then        []lease.Link
	prev        string
	metadata    map[string]string
	// the message form's
	send, topic, messageID string
}

// scanFields reads the shape every encoder of this package writes, without
// encoding/json: one object whose keys are the field names exactly as
// spelled, each at most once; strings without escapes; "v" and
// "max_attempts" plain integers; any JSON value as payload. Whitespace
// between tokens is allowed. ok is false for anything else (unknown or
// differently cased keys, escapes, nulls but the payload's, other numbers,
// duplicates, trailing data, invalid JSON), and the caller then decodes with
// encoding/json, which accepts or refuses it and words the refusal. What
// scanFields accepts it reads as encoding/json would (FuzzScanMatchesJSON).
//
// The id, kind, metadata and legacy trace context it returns share the body's memory, which they keep alive
// no longer than the message's processing; the payload is copied, and so is
// the queue name, which may be cached for the life of the process.
func scanFields(body string) (f fields, ok bool) {
	s := scanner{s: body}
	if !s.skip('{') {
		return f, false
	}
	var seen uint16
	if !s.skip('}') {
		for {
			key, ok := s.str()
			if !ok || !s.skip(':') {
				return f, false
			}
			var bit uint16
			switch key {
			case "v":
				bit = 1 << 0
				f.v, ok = s.int()
				f.hasV = true
			case "id":
				bit = 1 << 1
				f.id, ok = s.str()
			case "kind":
				bit = 1 << 2
				f.kind, ok = s.str()
			case "payload":
				bit = 1 << 3
				f.payload, ok = s.value()
			case "max_attempts":
				bit = 1 << 4
				f.maxAttempts, ok = s.int()
			case "queue":
				bit = 1 << 5
				f.queue, ok = s.str()
				f.queue, f.hasQueue = strings.Clone(f.queue), true
			case "create_token":
				bit = 1 << 6
				f.createToken, ok = s.str()
			case "tp":
				bit = 1 << 7
				f.tp, ok = s.str()
			case "ts":
				bit = 1 << 8
				f.ts, ok = s.str()
			case "md":
				bit = 1 << 9
				f.metadata, ok = s.strMap()
			default:
				return f, false
			}
			if !ok || seen&bit != 0 {
				return f, false
			}
			seen |= bit
			if s.skip('}') {
				break
			}
			if !s.skip(',') {
				return f, false
			}
		}
	}
	s.space()
	return f, s.i == len(s.s)
}

type scanner struct {
	s string
	i int
}

// space skips JSON whitespace.
func (s *scanner) space() {
	for s.i < len(s.s) {
		switch s.s[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// skip consumes c after whitespace, if it is there.
func (s *scanner) skip(c byte) bool {
	s.space()
	if s.i < len(s.s) && s.s[s.i] == c {
		s.i++
		return true
	}
	return false
}

// str reads a string without escapes or control characters.
func (s *scanner) str() (string, bool) {
	if !s.skip('"') {
		return "", false
	}
	start := s.i
	for s.i < len(s.s) {
		switch c := s.s[s.i]; {
		case c == '"':
			s.i++
			return s.s[start : s.i-1], true
		case c == '\\' || c < 0x20:
			return "", false
		}
		s.i++
	}
	return "", false
}

// strMap reads an object whose members are strings, as str reads them,
// each key at most once (encoding/json keeps the last of a repeated key;
// such a body is left to it).
func (s *scanner) strMap() (map[string]string, bool) {
	if !s.skip('{') {
		return nil, false
	}
	m := map[string]string{}
	if s.skip('}') {
		return m, true
	}
	for {
		k, ok := s.str()
		if !ok || !s.skip(':') {
			return nil, false
		}
		v, ok := s.str()
		if _, dup := m[k]; !ok || dup {
			return nil, false
		}
		m[k] = v
		if s.skip('}') {
			return m, true
		}
		if !s.skip(',') {
			return nil, false
		}
	}
}

// int reads an integer of at most nine digits: -?(0|[1-9][0-9]*), not
// followed by a fraction or an exponent.
func (s *scanner) int() (int, bool) {
	s.space()
	neg := s.i < len(s.s) && s.s[s.i] == '-'
	if neg {
		s.i++
	}
	start, n := s.i, 0
	for s.i < len(s.s) && s.s[s.i] >= '0' && s.s[s.i] <= '9' {
		n = n*10 + int(s.s[s.i]-'0')
		s.i++
	}
	digits := s.i - start
	switch {
	case digits == 0 || digits > 9, digits > 1 && s.s[start] == '0':
		return 0, false
	case s.i < len(s.s) && (s.s[s.i] == '.' || s.s[s.i] == 'e' || s.s[s.i] == 'E'):
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}

// value reads any JSON value and returns a copy of its bytes, or nil for
// null. It finds the value's end by its brackets and strings, then checks
// the copy with json.Valid.
func (s *scanner) value() (json.RawMessage, bool) {
	s.space()
	start := s.i
	s.i = valueEnd(s.s, start)
	if s.i <= start || s.i > len(s.s) {
		return nil, false
	}
	raw := s.s[start:s.i]
	if raw == "null" {
		return nil, true
	}
	v := json.RawMessage(raw)
	return v, json.Valid(v)
}

// valueEnd returns where the JSON value that starts at i ends, judging by
// brackets and quotes alone: after its closing bracket or quote, or at the
// delimiter after a scalar. It validates nothing, and may return past the
// end of s for an unterminated string.
func valueEnd(s string, i int) int {
	depth := 0
	for i < len(s) {
		switch s[i] {
		case '"':
			for i++; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' {
					i++
				}
			}
			i++ // past the closing quote
			if depth == 0 {
				return i
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i // a scalar ended by the enclosing object
			}
			if depth--; depth == 0 {
				return i + 1
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i
			}
		}
		i++
	}
	return i
}
