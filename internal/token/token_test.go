package token_test

import (
	"encoding/json"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/token"
)

func TestDecode(t *testing.T) {
	t.Parallel()
	big := `"` + strings.Repeat("x", lease.MaxPayloadBytes) + `"`
	cases := []struct {
		name string
		body string
		want token.Token
		err  error
	}{
		{"reference", `{"v":1,"id":"t-1"}`, token.Token{Version: 1, ID: "t-1"}, nil},
		{"inline minimal", `{"v":1,"kind":"k"}`, token.Token{Version: 1, Kind: "k"}, nil},
		{"inline full", `{"v":1,"kind":"k","id":"x","payload":{"a":1},"max_attempts":3}`,
			token.Token{Version: 1, Kind: "k", ID: "x", Payload: json.RawMessage(`{"a":1}`), MaxAttempts: 3}, nil},
		{"null payload is no payload", `{"v":1,"kind":"k","payload":null}`, token.Token{Version: 1, Kind: "k"}, nil},
		{"inline with a queue", `{"v":1,"kind":"k","queue":"images-work"}`, token.Token{Version: 1, Kind: "k", Queue: "images-work"}, nil},
		{"empty queue", `{"v":1,"kind":"k","queue":""}`, token.Token{}, token.ErrInvalidField},
		{"fifo queue", `{"v":1,"kind":"k","queue":"q.fifo"}`, token.Token{}, token.ErrInvalidField},
		{"queue name too long", `{"v":1,"kind":"k","queue":"` + strings.Repeat("q", 81) + `"}`, token.Token{}, token.ErrInvalidField},
		{"queue on a reference", `{"v":1,"id":"a","queue":"q"}`, token.Token{}, token.ErrMissingField},
		{"empty body", ``, token.Token{}, token.ErrMalformed},
		{"not JSON", `hello`, token.Token{}, token.ErrMalformed},
		{"array", `[]`, token.Token{}, token.ErrMalformed},
		{"trailing data", `{"v":1,"id":"a"} {}`, token.Token{}, token.ErrMalformed},
		{"invalid UTF-8", "{\"v\":1,\"id\":\"\xff\"}", token.Token{}, token.ErrMalformed},
		{"wrong type", `{"v":"1","id":"a"}`, token.Token{}, token.ErrMalformed},
		{"unknown field", `{"v":1,"kind":"k","paylod":{}}`, token.Token{}, token.ErrMalformed},
		{"no version", `{"id":"a"}`, token.Token{}, token.ErrMissingField},
		{"future version", `{"v":2,"id":"a"}`, token.Token{}, token.ErrVersion},
		{"neither id nor kind", `{"v":1}`, token.Token{}, token.ErrMissingField},
		{"payload without kind", `{"v":1,"id":"a","payload":1}`, token.Token{}, token.ErrMissingField},
		{"attempts out of range", `{"v":1,"kind":"k","max_attempts":101}`, token.Token{}, token.ErrInvalidField},
		{"id too long", `{"v":1,"id":"` + strings.Repeat("i", lease.MaxIDBytes+1) + `"}`, token.Token{}, token.ErrInvalidField},
		{"payload too big", `{"v":1,"kind":"k","id":"big","payload":` + big + `}`, token.Token{Version: 1, Kind: "k", ID: "big"}, token.ErrPayloadTooBig},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, err := token.Decode(c.body)
			if !errors.Is(err, c.err) {
				t.Fatalf("Decode error = %v, want %v", err, c.err)
			}
			if err != nil && strings.Contains(err.Error(), "xxxxxxxx") {
				t.Errorf("error echoes the payload")
			}
			if got.ID != c.want.ID || got.Kind != c.want.Kind || string(got.Payload) != string(c.want.Payload) || got.MaxAttempts != c.want.MaxAttempts || got.Version != c.want.Version {
				t.Errorf("Decode = %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestEncodeRoundTrip(t *testing.T) {
	t.Parallel()
	body, err := token.Inline("resize", "cat", json.RawMessage(`{"w":64}`), 2)
	if err != nil {
		t.Fatal(err)
	}
	got, err := token.Decode(body)
	if err != nil || got.Kind != "resize" || got.ID != "cat" || string(got.Payload) != `{"w":64}` || got.MaxAttempts != 2 {
		t.Fatalf("round trip = %+v, %v", got, err)
	}
	ref, err := token.Decode(token.Ref("cat"))
	if err != nil || ref.Inline() || ref.ID != "cat" {
		t.Fatalf("ref round trip = %+v, %v", ref, err)
	}
	if _, err := token.Inline("", "x", nil, 0); !errors.Is(err, token.ErrMissingField) {
		t.Errorf("inline without kind: %v", err)
	}
	if _, err := token.Inline("k", "x", json.RawMessage(`{`), 0); !errors.Is(err, token.ErrMalformed) {
		t.Errorf("inline with invalid payload: %v", err)
	}
}

// FuzzDecode: no body makes Decode panic, and whatever it accepts encodes
// back to a body that decodes to the same token.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{`{"v":1,"id":"a"}`, `{"v":1,"kind":"k","payload":[1,{"x":null}]}`, `{"v":1,"kind":"k","queue":"q-1"}`, `{"v":2}`, `{`, ``,
		`{"v":1,"id":"a","tp":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","ts":"k=v"}`,
		`{"v":1,"kind":"k","tp":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`,
		`{"v":1,"kind":"k","md":{"tenant":"acme","traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		tok, err := token.Decode(body)
		if err != nil {
			var te *token.Error
			if !errors.As(err, &te) {
				t.Fatalf("error %v is not a *token.Error", err)
			}
			return
		}
		var again string
		if tok.Inline() {
			again, err = tok.Encode()
			if err != nil {
				t.Fatalf("re-encode %+v: %v", tok, err)
			}
		} else {
			again = token.RefWith(tok.ID, tok.Metadata)
		}
		back, err := token.Decode(again)
		if err != nil || back.ID != tok.ID || back.Kind != tok.Kind || back.MaxAttempts != tok.MaxAttempts || back.Queue != tok.Queue ||
			!maps.Equal(back.Metadata, tok.Metadata) {
			t.Fatalf("re-decode of %q = %+v, %v; want %+v", again, back, err, tok)
		}
	})
}

func BenchmarkDecodeInline(b *testing.B) {
	body, err := token.Inline("resize", "cat-64", json.RawMessage(`{"url":"s3://pics/cat.png","width":64,"height":64}`), 3)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := token.Decode(body); err != nil {
			b.Fatal(err)
		}
	}
}

func TestDecodeRejectsBadIDs(t *testing.T) {
	t.Parallel()
	bodies := map[string]string{
		"reference with NUL":         `{"v":1,"id":"a\u0000b"}`,
		"reference with newline":     `{"v":1,"id":"a\nb"}`,
		"inline with RLO":            `{"v":1,"kind":"k","id":"a\u202eb"}`,
		"inline with lone surrogate": `{"v":1,"kind":"k","id":"a\ud800b"}`,
		"inline with U+FFFD":         `{"v":1,"kind":"k","id":"a` + "\ufffd" + `b"}`,
	}
	for name, body := range bodies {
		_, err := token.Decode(body)
		if !errors.Is(err, token.ErrInvalidField) || !strings.Contains(err.Error(), `"id" contains U+`) {
			t.Errorf("%s: Decode = %v, want ErrInvalidField naming the character", name, err)
		}
		_, err = token.DecodeSubmission(body, time.Now())
		if name[0] == 'i' && (!errors.Is(err, token.ErrInvalidField) || !strings.Contains(err.Error(), `"id" contains U+`)) {
			t.Errorf("%s: DecodeSubmission = %v, want ErrInvalidField naming the character", name, err)
		}
	}
}

func TestEncodeQueueRoundTrips(t *testing.T) {
	t.Parallel()
	body, err := token.Token{Kind: "k", ID: "x", Queue: "images"}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := token.Decode(body)
	if err != nil || got.Queue != "images" || got.Kind != "k" || got.ID != "x" {
		t.Fatalf("Decode(%s) = %+v, %v", body, got, err)
	}
	if _, err := (token.Token{Kind: "k", Queue: "bad.fifo"}).Encode(); !errors.Is(err, token.ErrInvalidField) {
		t.Fatalf("Encode with a FIFO queue = %v, want ErrInvalidField", err)
	}
}

func TestCreateTokenRoundTripsAndNeedsKindAndID(t *testing.T) {
	body, err := token.Token{Kind: "echo", ID: "t-1", Payload: []byte(`{"n":1}`), CreateToken: "ABCdef234"}.Encode()
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	if want := `{"v":1,"id":"t-1","kind":"echo","payload":{"n":1},"create_token":"ABCdef234"}`; body != want {
		t.Fatalf("Encode = %s, want %s", body, want)
	}
	tok, err := token.Decode(body)
	if err != nil || tok.CreateToken != "ABCdef234" || tok.ID != "t-1" || !tok.Inline() {
		t.Fatalf("Decode = %+v, %v", tok, err)
	}
	for body, want := range map[string]error{
		`{"v":1,"id":"t-1","create_token":"x"}`:                                             token.ErrMissingField, // no kind
		`{"v":1,"kind":"echo","create_token":"x"}`:                                          token.ErrMissingField, // no id
		`{"v":1,"id":"t-1","kind":"echo","create_token":"a b"}`:                             token.ErrInvalidField,
		`{"v":1,"id":"t-1","kind":"echo","create_token":"` + strings.Repeat("a", 65) + `"}`: token.ErrInvalidField,
	} {
		if _, err := token.Decode(body); !errors.Is(err, want) {
			t.Errorf("Decode(%s) = %v, want %v", body, err, want)
		}
	}
}

// A dependent's wait timeout travels in whole seconds and needs "after".
func TestWaitTimeoutRoundTripsAndNeedsAfter(t *testing.T) {
	t.Parallel()
	body, err := token.Token{ID: "b", Kind: "k", After: []string{"a"}, WaitTimeout: 90*time.Minute + time.Millisecond}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(body, `"wait_timeout_seconds":5401`) {
		t.Fatalf("body %s: want the timeout rounded up to whole seconds", body)
	}
	got, err := token.Decode(body)
	if err != nil || got.WaitTimeout != 5401*time.Second {
		t.Fatalf("Decode: %v, wait timeout %s", err, got.WaitTimeout)
	}
	for _, bad := range []string{
		`{"v":1,"id":"b","kind":"k","wait_timeout_seconds":60}`,
		`{"v":1,"id":"b","kind":"k","after":["a"],"wait_timeout_seconds":-1}`,
		`{"v":1,"id":"b","kind":"k","after":["a"],"wait_timeout_seconds":40000000}`,
	} {
		if _, err := token.Decode(bad); !errors.Is(err, token.ErrInvalidField) {
			t.Errorf("Decode(%s): %v, want ErrInvalidField", bad, err)
		}
	}
}
