package token_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/token"
)

// FuzzDecodeSubmission feeds the intake decoder arbitrary bodies: it never
// panics, every refusal is an *Error matching one sentinel, and every
// submission it accepts is one the store would take (id, kind, payload,
// attempts and start within their limits).
func FuzzDecodeSubmission(f *testing.F) {
	for _, s := range []string{
		`{"v":1,"kind":"resize","payload":{"w":64},"id":"optional","max_attempts":3,"delay_seconds":3600}`,
		`{"v":1,"kind":"report","payload":{},"run_at":"2031-03-14T15:09:26Z"}`,
		`{"v":1,"kind":"k","queue":"images_2-x"}`, `{"v":1,"kind":"k","queue":"q.fifo"}`,
		`{"v":1,"kind":"k","id":"a\u202eb"}`,
		`{"v":1,"kind":"k","id":"\ud800"}`,
		`{"v":2}`, `{}`, `[]`, `null`, `{"v":1,"kind":"k"} {}`, "\xff",
	} {
		f.Add(s)
	}
	now := time.Date(2031, time.March, 14, 15, 9, 26, 0, time.UTC)
	f.Fuzz(func(t *testing.T, body string) {
		s, err := token.DecodeSubmission(body, now)
		if err != nil {
			var te *token.Error
			if !errors.As(err, &te) || !oneReason(err) {
				t.Fatalf("DecodeSubmission(%q): %v is not a *token.Error with one reason", body, err)
			}
			if !utf8.ValidString(err.Error()) {
				t.Fatalf("DecodeSubmission(%q): the reason is not UTF-8: %q", body, err)
			}
			return
		}
		maxAttempts := s.MaxAttempts
		if maxAttempts == 0 {
			maxAttempts = 1
		}
		id := s.ID
		if id == "" {
			id = "message-id"
		}
		if err := (lease.NewTask{ID: id, Kind: s.Kind, Payload: s.Payload, MaxAttempts: maxAttempts, RunAt: s.RunAt, Queue: s.Queue}).Validate(); err != nil {
			t.Fatalf("DecodeSubmission(%q) accepted %+v, which the store refuses: %v", body, s, err)
		}
		if s.Payload != nil && !json.Valid(s.Payload) {
			t.Fatalf("DecodeSubmission(%q): payload %q is not JSON", body, s.Payload)
		}
		if s.RunAt.Sub(now) > token.MaxSubmissionDelay {
			t.Fatalf("DecodeSubmission(%q): run at %s is too far ahead", body, s.RunAt)
		}
	})
}

func oneReason(err error) bool {
	n := 0
	for _, r := range []error{token.ErrMalformed, token.ErrVersion, token.ErrMissingField, token.ErrInvalidField, token.ErrPayloadTooBig} {
		if errors.Is(err, r) {
			n++
		}
	}
	return n == 1
}
