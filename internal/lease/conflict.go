package lease

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// CheckDuplicate decides what a submission n whose id is taken by stored
// is: a duplicate (same kind, same payload: the error matches
// ErrAlreadyExists, and the submission is satisfied by the stored task) or a
// conflict (a *ConflictError matching ErrConflict). The id works like an
// idempotency key. Payloads are compared canonically (samePayload), so
// re-encoding a document does not make it another one. Both stores call it
// with the item their conditional write saw, so it costs no extra read.
func CheckDuplicate(stored Task, n NewTask) error {
	switch {
	case IsPlaceholder(stored) && stored.Parent == n.Parent:
		// The child itself, cancelled with its parent before its token
		// created it.
		return fmt.Errorf("create %s: %w: it was cancelled before it was created", DisplayID(n.ID), ErrAlreadyExists)
	case stored.Kind != n.Kind:
		return fmt.Errorf("create %s: %w", DisplayID(n.ID), &ConflictError{TaskID: n.ID, Field: "kind", Status: stored.Status})
	case !samePayload(stored.Payload, n.Payload):
		return fmt.Errorf("create %s: %w", DisplayID(n.ID), &ConflictError{TaskID: n.ID, Field: "payload", Status: stored.Status})
	}
	return fmt.Errorf("create %s: %w", DisplayID(n.ID), ErrAlreadyExists)
}

// samePayload reports whether two payloads are the same JSON document:
// equal once insignificant white space is dropped and object members are
// sorted by name. Numbers are compared as written (1 and 1.0 differ), and
// strings by their decoded value ("\u0041" and "A" are the same). No payload,
// an empty one and JSON null are all "no payload". A payload that is not
// JSON is compared byte for byte.
func samePayload(a, b []byte) bool {
	ca, okA := canonicalJSON(a)
	cb, okB := canonicalJSON(b)
	if !okA || !okB {
		return bytes.Equal(a, b)
	}
	return bytes.Equal(ca, cb)
}

// canonicalJSON re-encodes a JSON document with sorted members, no
// insignificant space and no HTML escaping; nil for no payload.
func canonicalJSON(p []byte) ([]byte, bool) {
	p = bytes.TrimSpace(p)
	if len(p) == 0 || bytes.Equal(p, []byte("null")) {
		return nil, true
	}
	dec := json.NewDecoder(bytes.NewReader(p))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, false
	}
	return out.Bytes(), true
}
