package token

import (
	"errors"
	"fmt"
	"testing"

	"github.com/leasehold/leasehold/internal/lease"
)

// A chain link's token carries the later links and its predecessor, and
// reads back the same; the fields are refused where they mean nothing.
func TestChainFieldsRoundTrip(t *testing.T) {
	in := Token{ID: "c#2", Kind: "b", Payload: []byte(`{"n":2}`), Prev: "c",
		Then: []lease.Link{{ID: "c#3", Kind: "c", Payload: []byte(`[1,2]`), MaxAttempts: 4, Queue: "slow"}}}
	body, err := in.Encode()
	if err != nil {
		t.Fatal(err)
	}
	out, err := Decode(body)
	if err != nil {
		t.Fatalf("Decode(%s): %v", body, err)
	}
	if out.Prev != "c" || fmt.Sprintf("%+v", out.Then) != fmt.Sprintf("%+v", in.Then) {
		t.Fatalf("decoded prev %q then %+v, want %q %+v", out.Prev, out.Then, in.Prev, in.Then)
	}
	for name, body := range map[string]string{
		"then on a reference":    `{"v":1,"id":"a","then":[{"id":"b","kind":"k"}]}`,
		"prev on a reference":    `{"v":1,"id":"a","prev":"z"}`,
		"then without an id":     `{"v":1,"kind":"k","then":[{"id":"b","kind":"k"}]}`,
		"a link with no kind":    `{"v":1,"id":"a","kind":"k","then":[{"id":"b"}]}`,
		"a link named as itself": `{"v":1,"id":"a","kind":"k","then":[{"id":"a","kind":"k"}]}`,
		"prev and parent":        `{"v":1,"id":"a","kind":"k","prev":"z","parent":"p"}`,
		"an unknown link field":  `{"v":1,"id":"a","kind":"k","then":[{"id":"b","kind":"k","when":1}]}`,
	} {
		if _, err := Decode(body); err == nil || !(errors.Is(err, ErrInvalidField) || errors.Is(err, ErrMissingField) || errors.Is(err, ErrMalformed)) {
			t.Errorf("%s: %v, want a field error", name, err)
		}
	}
}
