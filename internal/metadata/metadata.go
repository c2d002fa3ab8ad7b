// Package metadata holds the rules of a task's metadata: a small map of
// strings that travels with a task from its enqueue to every run of it, in
// its tokens and on its stored item, and on to the children a workflow
// spawns. Middleware reads and writes it; trace context is one use of it
// (the W3C "traceparent" and "tracestate" entries).
//
// The bounds keep a token and an item small whatever a middleware adds:
// they are checked where metadata enters (the client, a token, the intake
// queue) so that a stored task always satisfies them.
package metadata

import (
	"fmt"
	"maps"
	"unicode/utf8"
)

// Bounds of a task's metadata (docs/limits.md).
const (
	// MaxEntries is the most entries one task's metadata holds.
	MaxEntries = 16
	// MaxKeyBytes bounds a key: 1 to 64 characters, each an ASCII letter,
	// digit, '-', '_', '.' or ':'.
	MaxKeyBytes = 64
	// MaxValueBytes bounds a value: at most 512 bytes of UTF-8 without
	// control characters (a W3C tracestate of 32 members fits).
	MaxValueBytes = 512
	// MaxTotalBytes bounds the keys and values together.
	MaxTotalBytes = 2048
)

// Keys of the W3C trace context, when a tracer propagates it.
const (
	TraceParent = "traceparent"
	TraceState  = "tracestate"
)

// MapSlots is the entry a worker gives each child of a sliding map
// (workflow.Map): the map's concurrency, which with the child's id names
// the slot group it counts itself in. The child's own children do not
// inherit it.
const MapSlots = "leasehold.map.slots"

// Problem says what is wrong with md, in words fit for an error record
// (never a value itself), or "" when md is within the bounds.
func Problem(md map[string]string) string {
	if len(md) > MaxEntries {
		return fmt.Sprintf("has %d entries, the limit is %d", len(md), MaxEntries)
	}
	total := 0
	for k, v := range md {
		if p := keyProblem(k); p != "" {
			return p
		}
		if len(v) > MaxValueBytes {
			return fmt.Sprintf("value of %q is %d bytes, the limit is %d", k, len(v), MaxValueBytes)
		}
		if !utf8.ValidString(v) || hasControl(v) {
			return fmt.Sprintf("value of %q must be UTF-8 text without control characters", k)
		}
		total += len(k) + len(v)
	}
	if total > MaxTotalBytes {
		return fmt.Sprintf("is %d bytes (keys and values), the limit is %d", total, MaxTotalBytes)
	}
	return ""
}

func keyProblem(k string) string {
	if k == "" || len(k) > MaxKeyBytes {
		return fmt.Sprintf("key of %d bytes: want 1 to %d", len(k), MaxKeyBytes)
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':') {
			return fmt.Sprintf("key %q: want ASCII letters, digits, '-', '_', '.' and ':' only", k)
		}
	}
	return ""
}

func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return true
		}
	}
	return false
}

// With returns md with key set to value: a copy, so that a map a caller
// handed in is never changed (and nil stays nil when value is "" and md
// has no key). An empty value removes the key.
func With(md map[string]string, key, value string) map[string]string {
	if old, ok := md[key]; ok && old == value || !ok && value == "" {
		return md
	}
	out := make(map[string]string, len(md)+1)
	maps.Copy(out, md)
	if value == "" {
		delete(out, key)
	} else {
		out[key] = value
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
