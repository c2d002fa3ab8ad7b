package token

import (
	"bytes"
	"encoding/json"
	"maps"
	"testing"
	"unicode/utf8"
)

var scanSeeds = []string{
	`{"v":1,"id":"a"}`,
	`{"v":1,"kind":"k","payload":{"a":[1,2,{"b":"}]"}]},"id":"x","max_attempts":3,"queue":"q-1"}`,
	` { "v" : 1 , "kind" : "k" , "payload" : [ 1 , "\"" ] } `,
	"{\"v\":1,\n\t\"kind\":\"k\",\r\"payload\":true}\n",
	`{"v":1,"kind":"k","payload":null}`,
	`{"v":1,"kind":"k","payload":"a\\\"b"}`,
	`{"v":1,"kind":"k","payload":-1.5e3}`,
	`{"v":1,"kind":"k","payload":01}`,
	`{"v":1,"kind":"k","payload":{"a":1]}`,
	`{"v":1,"kind":"k","payload":nul}`,
	`{"v":1,"kind":"k","payload":}`,
	`{"v":1,"kind":"k","payload":"unterminated}`,
	`{"v":1.0,"kind":"k"}`, `{"v":1e0,"kind":"k"}`, `{"v":-0,"kind":"k"}`, `{"v":01,"kind":"k"}`,
	`{"v":1,"kind":"k","max_attempts":1234567890}`, `{"v":-1}`, `{"v":}`,
	`{"V":1,"ID":"a"}`, `{"v":1,"id":"a","id":"b"}`, `{"v":1,"id":"a\u0062"}`,
	`{"v":1,"id":null}`, `{"v":1,"kind":"k","queue":null}`,
	`{"v":1,"id":"a"} {}`, `{"v":1,"id":"a"},`, `{"v":1,"id":"a",}`, `{,}`, `{}`, `[]`, `null`, ``, `{`,
	`{"v":1,"kind":"k","extra":1}`,
	`{"v":1,"id":"a","tp":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`,
	`{"v":1,"id":"a","tp":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","ts":"k=v"}`,
	`{"v":1,"id":"a","tp":"x","tp":"y"}`, `{"v":1,"id":"a","tp":null}`, `{"v":1,"id":"a","ts":"k=v"}`, "{\"v\":1,\"id\":\"a\x01\"}", `{"v":1,"kind":"ké"}`,
	`{"v":1,"id":"a","md":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","tenant":"acme"}}`,
	`{"v":1,"id":"a","md":{}}`, `{"v":1,"id":"a","md":null}`, `{"v":1,"id":"a","md":{"k":"a","k":"b"}}`,
	`{"v":1,"id":"a","md":{"k":1}}`, `{"v":1,"id":"a","md":{"k":"v",}}`, `{"v":1,"id":"a","md":{"k\u0041":"v"}}`,
}

// FuzzScanMatchesJSON: whatever scanFields accepts, encoding/json reads the
// same way (and accepts).
func FuzzScanMatchesJSON(f *testing.F) {
	for _, s := range scanSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		if !utf8.ValidString(body) {
			return // Decode refuses it before either reader
		}
		fast, ok := scanFields(body)
		if !ok {
			return
		}
		slow, err := decodeJSON(body)
		if err != nil {
			t.Fatalf("scanFields accepted %q, encoding/json refuses it: %v", body, err)
		}
		if !sameFields(fast, slow) {
			t.Fatalf("scanFields(%q) = %+v, encoding/json reads %+v", body, fast, slow)
		}
	})
}

func sameFields(a, b fields) bool {
	return a.v == b.v && a.hasV == b.hasV && a.id == b.id && a.kind == b.kind &&
		bytes.Equal(a.payload, b.payload) && (a.payload == nil) == (b.payload == nil) &&
		a.maxAttempts == b.maxAttempts && a.queue == b.queue && a.hasQueue == b.hasQueue &&
		a.tp == b.tp && a.ts == b.ts && maps.Equal(a.metadata, b.metadata) && (a.metadata == nil) == (b.metadata == nil)
}

// The shapes this package's encoders write take the fast path.
func TestScanTakesEncodedTokens(t *testing.T) {
	inline, err := Token{Kind: "resize", ID: "cat", Payload: []byte(`{"w":64,"tags":["a","b"]}`), MaxAttempts: 3, Queue: "images"}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	md := map[string]string{"traceparent": testTP, "tracestate": "a=b"}
	traced, err := Token{Kind: "resize", ID: "cat", Metadata: md}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{inline, Ref("order-42"), `{"v":1,"kind":"k"}`, traced, RefWith("order-42", md)} {
		if _, ok := scanFields(body); !ok {
			t.Errorf("scanFields(%s) fell back to encoding/json", body)
		}
	}
	// One allocation for the payload's copy, one for the queue name's.
	// The race detector adds allocations of its own: make test's
	// allocation step runs this test without it.
	if raceEnabled {
		t.Log("allocation count not checked under the race detector (make test's allocation step checks it)")
		return
	}
	if got := testing.AllocsPerRun(100, func() { _, _ = Decode(inline) }); got > 2 {
		t.Errorf("Decode of an inline token: %v allocations, want at most 2", got)
	}
}

// Every seed decodes to the same token and error by either reader.
func TestScanSeedsDecodeAlike(t *testing.T) {
	t.Parallel()
	for _, body := range scanSeeds {
		fast, ok := scanFields(body)
		slow, err := decodeJSON(body)
		if ok && (err != nil || !sameFields(fast, slow)) {
			t.Errorf("%q: scanFields %+v, encoding/json %+v, %v", body, fast, slow, err)
		}
	}
}

// FuzzEncodeMatchesMarshal: Encode and Ref write exactly the bytes
// json.Marshal writes for the same wire struct, whatever the strings and
// payload hold.
func FuzzEncodeMatchesMarshal(f *testing.F) {
	f.Add("k", "id", `{"a": [1, "<b>&\u2028", {"c" : null}]}`, 3, "q", "", "")
	f.Add("résumé<>&\"\\\x01\x7f", "a\u2028b\u2029c\xff", " \"x\" ", 0, "", "", "")
	f.Add("k", "", "", 0, "images-1", "", "")
	f.Add("k", "\t\n\r\b\f", "[\"\\u003c\", \"\\\"<\", 1e5, true]", 100, "", "", "")
	f.Add("k", "id", "", 0, "", testTP, "vendor=a,other=b")
	f.Fuzz(func(t *testing.T, kind, id, payload string, maxAttempts int, queue, mdKey, mdValue string) {
		var md map[string]string
		if mdKey != "" {
			md = map[string]string{mdKey: mdValue}
		}
		tok := Token{Kind: kind, ID: id, MaxAttempts: maxAttempts, Queue: queue, Metadata: md}
		if payload != "" {
			tok.Payload = json.RawMessage(payload)
		}
		got, err := tok.Encode()
		v := Version
		w := wire{V: &v, ID: id, Kind: kind, Payload: tok.Payload, MaxAttempts: maxAttempts, Metadata: md}
		if queue != "" {
			w.Queue = &queue
		}
		if err == nil {
			want, merr := json.Marshal(w)
			if merr != nil || got != string(want) {
				t.Fatalf("Encode(%+v) = %s\njson.Marshal writes %s (%v)", tok, got, want, merr)
			}
		}
		want, _ := json.Marshal(wire{V: &v, ID: id})
		if got := Ref(id); got != string(want) {
			t.Fatalf("Ref(%q) = %s, json.Marshal writes %s", id, got, want)
		}
		// A reference with metadata is what json.Marshal writes with it.
		want, _ = json.Marshal(wire{V: &v, ID: id, Metadata: md})
		if got := RefWith(id, md); got != string(want) {
			t.Fatalf("RefWith(%q, %v) = %s, json.Marshal writes %s", id, md, got, want)
		}
	})
}
