package token

import (
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/metadata"
)

const testTP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// Metadata is optional on every form, round-trips, and tokens without it
// decode as before. The trace context is two ordinary entries of it.
func TestMetadataRoundTrips(t *testing.T) {
	t.Parallel()
	old, err := Decode(`{"v":1,"id":"a"}`)
	if err != nil || old.Metadata != nil {
		t.Fatalf("token without metadata: %+v, %v", old, err)
	}
	md := map[string]string{metadata.TraceParent: testTP, metadata.TraceState: "v=1", "tenant": "acme"}
	inline, err := Token{Kind: "k", ID: "i", Payload: []byte(`{"a":1}`), Metadata: md}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	child, err := Token{Kind: "k", ID: "p/0", Parent: "p", Metadata: md}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{RefWith("a", md), WakeWith("a", md), inline, child} {
		tok, err := Decode(body)
		if err != nil {
			t.Fatalf("Decode(%s): %v", body, err)
		}
		if !maps.Equal(tok.Metadata, md) {
			t.Errorf("Decode(%s) metadata = %v, want %v", body, tok.Metadata, md)
		}
		if tok.Inline() {
			again, err := tok.Encode()
			if err != nil {
				t.Fatal(err)
			}
			if again != body {
				t.Errorf("re-encoded %s as %s", body, again)
			}
		}
	}
	if RefWith("a", nil) != Ref("a") || WakeWith("a", nil) != Wake("a") {
		t.Error("a token without metadata changed its encoding")
	}
}

// A payload is the user's: a "tp" key in it is no trace context, and the
// trace context in the metadata survives it (issue 34: the substring
// check of the old codec dropped the trace of such a payload).
func TestPayloadKeysAreNotMetadata(t *testing.T) {
	t.Parallel()
	md := map[string]string{metadata.TraceParent: testTP}
	for _, payload := range []string{`{"tp":"user data"}`, `{"md":{"x":"y"},"ts":"z"}`, `"\"tp\":"`} {
		body, err := Token{Kind: "k", ID: "i", Payload: []byte(payload), Metadata: md}.Encode()
		if err != nil {
			t.Fatal(err)
		}
		tok, err := Decode(body)
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(tok.Metadata, md) || string(tok.Payload) != payload {
			t.Errorf("payload %s: decoded metadata %v, payload %s", payload, tok.Metadata, tok.Payload)
		}
	}
}

// A token of a version before metadata carries the trace context as "tp"
// and "ts": it decodes into the metadata's entries, on every form and on
// both of the decoder's paths.
func TestLegacyTraceFieldsDecodeIntoMetadata(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		`{"v":1,"id":"a","tp":"` + testTP + `","ts":"v=1"}`,
		`{"v":1,"id":"a","kind":"k","payload":{"tp":1},"tp":"` + testTP + `","ts":"v=1"}`,
		`{"v":1,"id":"a","wake":true,"tp":"` + testTP + `","ts":"v=1"}`,
	} {
		tok, err := Decode(body)
		if err != nil {
			t.Fatalf("Decode(%s): %v", body, err)
		}
		want := map[string]string{metadata.TraceParent: testTP, metadata.TraceState: "v=1"}
		if !maps.Equal(tok.Metadata, want) {
			t.Errorf("Decode(%s) metadata = %v", body, tok.Metadata)
		}
	}
	// The metadata's own entry wins over a legacy field.
	tok, err := Decode(`{"v":1,"id":"a","md":{"traceparent":"mine"},"tp":"` + testTP + `"}`)
	if err != nil || tok.Metadata[metadata.TraceParent] != "mine" {
		t.Errorf("md and tp: %v, %v", tok.Metadata, err)
	}
}

func TestMetadataRefused(t *testing.T) {
	t.Parallel()
	many := make([]string, metadata.MaxEntries+1)
	for i := range many {
		many[i] = `"k` + strings.Repeat("x", i) + `":"v"`
	}
	for body, want := range map[string]error{
		`{"v":1,"id":"a","md":{` + strings.Join(many, ",") + `}}`:                             ErrInvalidField,
		`{"v":1,"id":"a","md":{"a b":"v"}}`:                                                   ErrInvalidField,
		`{"v":1,"id":"a","md":{"k":"line\nbreak"}}`:                                           ErrInvalidField,
		`{"v":1,"id":"a","md":{"k":"` + strings.Repeat("v", metadata.MaxValueBytes+1) + `"}}`: ErrInvalidField,
		`{"v":1,"id":"a","md":{"k":1}}`:                                                       ErrMalformed,
		`{"v":1,"id":"a","md":["k"]}`:                                                         ErrMalformed,
		`{"v":1,"id":"a","tp":"a\u0001b"}`:                                                    ErrInvalidField,
		`{"v":1,"id":"a","traceparent":"x"}`:                                                  ErrMalformed,
	} {
		if _, err := Decode(body); !errors.Is(err, want) {
			t.Errorf("Decode(%.80s) = %v, want %v", body, err, want)
		}
	}
	if _, err := (Token{Kind: "k", Metadata: map[string]string{"": "v"}}).Encode(); !errors.Is(err, ErrInvalidField) {
		t.Errorf("Encode with an empty key: %v", err)
	}
}
