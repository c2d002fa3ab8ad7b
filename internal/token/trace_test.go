package token

import (
	"errors"
	"testing"
)

const testTP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// The trace context is optional on every form, round-trips, and old tokens
// without it decode as before.
func TestTraceContext(t *testing.T) {
	t.Parallel()
	old, err := Decode(`{"v":1,"id":"a"}`)
	if err != nil || old.TraceParent != "" || old.TraceState != "" {
		t.Fatalf("old token: %+v, %v", old, err)
	}
	cb, err := CallbackMessage(Callback{ID: "t", Fence: 1, Attempt: 1, Nonce: "0123456789abcdef"}.String(), []byte(`1`), false, "")
	if err != nil {
		t.Fatal(err)
	}
	inline, err := Token{Kind: "k", ID: "i", Payload: []byte(`{"a":1}`)}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	child, err := Token{Kind: "k", ID: "p/0", Parent: "p", TraceParent: testTP, TraceState: "v=1"}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{WithTrace(Ref("a"), testTP, "v=1"), WithTrace(Wake("a"), testTP, "v=1"),
		WithTrace(cb, testTP, "v=1"), WithTrace(inline, testTP, "v=1"), child} {
		tok, err := Decode(body)
		if err != nil {
			t.Fatalf("Decode(%s): %v", body, err)
		}
		if tok.TraceParent != testTP || tok.TraceState != "v=1" {
			t.Errorf("Decode(%s) trace = %q %q", body, tok.TraceParent, tok.TraceState)
		}
		if !tok.IsCallback() && tok.Inline() {
			again, err := tok.Encode()
			if err != nil {
				t.Fatal(err)
			}
			if back, err := Decode(again); err != nil || back.TraceParent != testTP || back.TraceState != "v=1" {
				t.Errorf("re-encoded %s: %+v, %v", again, back, err)
			}
		}
	}
	// A body that has one keeps it; no trace leaves the body alone.
	once := WithTrace(Ref("a"), testTP, "")
	if got := WithTrace(once, "00-11111111111111111111111111111111-2222222222222222-01", ""); got != once {
		t.Errorf("a second trace context was added: %s", got)
	}
	if got := WithTrace(Ref("a"), "", ""); got != Ref("a") {
		t.Errorf("WithTrace without a traceparent changed the body: %s", got)
	}
	if got := WithTrace("not a token", testTP, ""); got != "not a token" {
		t.Errorf("WithTrace changed a body that is no token: %s", got)
	}
}

func TestTraceContextRefused(t *testing.T) {
	t.Parallel()
	long := make([]byte, MaxTraceParentBytes+1)
	for i := range long {
		long[i] = 'a'
	}
	for body, want := range map[string]error{
		`{"v":1,"id":"a","ts":"k=v"}`:                  ErrMissingField,
		`{"v":1,"id":"a","tp":"` + string(long) + `"}`: ErrInvalidField,
		`{"v":1,"id":"a","tp":"a b"}`:                  ErrInvalidField,
		`{"v":1,"id":"a","tp":1}`:                      ErrMalformed,
		`{"v":1,"id":"a","traceparent":"x"}`:           ErrMalformed,
	} {
		if _, err := Decode(body); !errors.Is(err, want) {
			t.Errorf("Decode(%s) = %v, want %v", body, err, want)
		}
	}
}
