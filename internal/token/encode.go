package token

import (
	"strconv"
	"unicode/utf8"

	"github.com/leasehold/leasehold/internal/lease"
)

// appendWire appends a token's JSON body to b, byte for byte as json.Marshal
// writes the wire struct (FuzzEncodeMatchesMarshal): fields in wire's order,
// empty ones left out, strings with encoding/json's HTML-safe escaping, and
// the payload compacted and escaped the same way. payload must be valid
// JSON or empty; the callers check it.
func appendWire(b []byte, id, kind string, payload []byte, maxAttempts int, queue, createToken string) []byte {
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, Version, 10)
	b = appendStringMember(b, `,"id":`, id)
	b = appendStringMember(b, `,"kind":`, kind)
	if len(payload) > 0 {
		b = append(b, `,"payload":`...)
		b = appendCompact(b, payload)
	}
	if maxAttempts != 0 {
		b = append(b, `,"max_attempts":`...)
		b = strconv.AppendInt(b, int64(maxAttempts), 10)
	}
	b = appendStringMember(b, `,"queue":`, queue)
	b = appendStringMember(b, `,"create_token":`, createToken)
	return append(b, '}')
}

// appendStringMember appends key (a comma, the member's quoted name and a
// colon) and s as appendJSONString quotes it, unless s is empty.
func appendStringMember(b []byte, key, s string) []byte {
	if s == "" {
		return b
	}
	return appendJSONString(append(b, key...), s)
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s quoted as encoding/json quotes a string with
// HTML escaping on: \", \\, the short escapes for \b \f \n \r \t, \u00XX
// for other controls and for < > &, \u2028 and \u2029 for those two, and
// \ufffd for a byte that is not UTF-8.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendCompact appends the valid JSON value v without insignificant
// whitespace and with < > & and U+2028, U+2029 escaped, as encoding/json
// writes a json.RawMessage.
func appendCompact(b []byte, v []byte) []byte {
	var str lease.JSONString
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '<' || c == '>' || c == '&':
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			continue
		case c == 0xe2 && i+2 < len(v) && v[i+1] == 0x80 && v[i+2]&^1 == 0xa8:
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[v[i+2]&0xf])
			i += 2
			continue
		case !str.Next(c) && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			continue
		}
		b = append(b, c)
	}
	return b
}
