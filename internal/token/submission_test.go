package token_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/claimcheck"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/token"
)

var now = time.Date(2031, time.March, 14, 15, 9, 26, 0, time.UTC)

func TestDecodeSubmissionAccepts(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		body string
		want token.Submission
	}{
		{
			name: "minimal",
			body: `{"v":1,"kind":"resize"}`,
			want: token.Submission{Version: 1, Kind: "resize"},
		},
		{
			name: "null payload is no payload",
			body: `{"v":1,"kind":"resize","payload":null}`,
			want: token.Submission{Version: 1, Kind: "resize"},
		},
		{
			name: "every field with a delay",
			body: `{"v":1,"kind":"resize","payload":{"w":64},"id":"order-42","max_attempts":3,"delay_seconds":1200}`,
			want: token.Submission{Version: 1, ID: "order-42", Kind: "resize", Payload: []byte(`{"w":64}`), MaxAttempts: 3, RunAt: now.Add(20 * time.Minute)},
		},
		{
			name: "a queue",
			body: `{"v":1,"kind":"k","queue":"images"}`,
			want: token.Submission{Version: 1, Kind: "k", Queue: "images"},
		},
		{
			name: "run_at with an offset is kept in UTC",
			body: `{"v":1,"kind":"k","run_at":"2031-03-14T17:09:26+02:00"}`,
			want: token.Submission{Version: 1, Kind: "k", RunAt: now},
		},
		{
			name: "run_at in the past is due at once",
			body: `{"v":1,"kind":"k","run_at":"2001-01-01T00:00:00.5Z"}`,
			want: token.Submission{Version: 1, Kind: "k", RunAt: time.Date(2001, 1, 1, 0, 0, 0, 5e8, time.UTC)},
		},
		{
			name: "longest delay",
			body: fmt.Sprintf(`{"v":1,"kind":"k","delay_seconds":%d}`, int64(token.MaxSubmissionDelay/time.Second)),
			want: token.Submission{Version: 1, Kind: "k", RunAt: now.Add(token.MaxSubmissionDelay)},
		},
		{
			name: "payload at the limit",
			body: `{"v":1,"kind":"k","payload":"` + strings.Repeat("x", lease.MaxPayloadBytes-2) + `"}`,
			want: token.Submission{Version: 1, Kind: "k", Payload: []byte(`"` + strings.Repeat("x", lease.MaxPayloadBytes-2) + `"`)},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, err := token.DecodeSubmission(c.body, now)
			if err != nil {
				t.Fatalf("DecodeSubmission: %v", err)
			}
			if got.Version != c.want.Version || got.ID != c.want.ID || got.Kind != c.want.Kind ||
				string(got.Payload) != string(c.want.Payload) || got.MaxAttempts != c.want.MaxAttempts ||
				!got.RunAt.Equal(c.want.RunAt) || (got.Payload == nil) != (c.want.Payload == nil) {
				t.Fatalf("got %+v\nwant %+v", got, c.want)
			}
		})
	}
}

func TestDecodeSubmissionRejects(t *testing.T) {
	t.Parallel()
	secret := "s3cr3t-value"
	cases := []struct {
		name   string
		body   string
		reason error
		detail string
	}{
		{"not JSON", `{"v":1,"kind":`, token.ErrMalformed, "truncated"},
		{"syntax error", `{"v":1 "kind":"k"}`, token.ErrMalformed, "invalid JSON at byte"},
		{"not UTF-8", "{\"v\":1,\"kind\":\"\xff\"}", token.ErrMalformed, "UTF-8"},
		{"trailing data", `{"v":1,"kind":"k"} {}`, token.ErrMalformed, "trailing"},
		{"unknown field", `{"v":1,"kind":"k","delay":5}`, token.ErrMalformed, `unknown field "delay"`},
		{"wrong type", `{"v":1,"kind":"k","delay_seconds":"60"}`, token.ErrMalformed, "delay_seconds"},
		{"fractional delay", `{"v":1,"kind":"k","delay_seconds":1.5}`, token.ErrMalformed, "delay_seconds"},
		{"no version", `{"kind":"k"}`, token.ErrMissingField, `"v"`},
		{"unknown version", `{"v":2,"kind":"k"}`, token.ErrVersion, "version 2"},
		{"missing kind", `{"v":1,"payload":{"p":"` + secret + `"}}`, token.ErrMissingField, `"kind"`},
		{"empty id", `{"v":1,"kind":"k","id":""}`, token.ErrInvalidField, `"id" is empty`},
		{"long id", `{"v":1,"kind":"k","id":"` + strings.Repeat("i", lease.MaxIDBytes+1) + `"}`, token.ErrInvalidField, `"id" is 257 bytes`},
		{"long kind", `{"v":1,"kind":"` + strings.Repeat("k", lease.MaxKindBytes+1) + `"}`, token.ErrInvalidField, `"kind" is 129 bytes`},
		{"zero attempts", `{"v":1,"kind":"k","max_attempts":0}`, token.ErrInvalidField, "max_attempts"},
		{"too many attempts", `{"v":1,"kind":"k","max_attempts":101}`, token.ErrInvalidField, "max_attempts"},
		{"fifo queue", `{"v":1,"kind":"k","queue":"q.fifo"}`, token.ErrInvalidField, "FIFO"},
		{"bad queue name", `{"v":1,"kind":"k","queue":"a b"}`, token.ErrInvalidField, `"queue"`},
		{"negative delay", `{"v":1,"kind":"k","delay_seconds":-1}`, token.ErrInvalidField, "delay_seconds"},
		{"delay over the cap", fmt.Sprintf(`{"v":1,"kind":"k","delay_seconds":%d}`, int64(token.MaxSubmissionDelay/time.Second)+1), token.ErrInvalidField, "delay_seconds"},
		{"delay and run_at", `{"v":1,"kind":"k","delay_seconds":1,"run_at":"2031-03-14T15:09:26Z"}`, token.ErrInvalidField, "exclusive"},
		{"bad run_at", `{"v":1,"kind":"k","run_at":"tomorrow ` + secret + `"}`, token.ErrInvalidField, "RFC 3339"},
		{"run_at without zone", `{"v":1,"kind":"k","run_at":"2031-03-14T15:09:26"}`, token.ErrInvalidField, "RFC 3339"},
		{"run_at too far", `{"v":1,"kind":"k","run_at":"2032-03-15T15:09:27Z"}`, token.ErrInvalidField, "days ahead"},
		{"oversize payload", `{"v":1,"kind":"k","payload":"` + secret + strings.Repeat("x", lease.MaxPayloadBytes) + `"}`, token.ErrPayloadTooBig, "payload is"},
		// Over the inline limit, even with a payload bucket: the error says
		// where a large payload goes instead (issue 36).
		{"oversize payload names the client", `{"v":1,"kind":"k","payload":"` + strings.Repeat("x", lease.MaxPayloadBytes) + `"}`, token.ErrPayloadTooBig, "goes through Client.Enqueue or `leasehold enqueue` with a payload bucket"},
		{"payload-bucket reference", `{"v":1,"kind":"k","payload":"\u0000leasehold-blob:12:tasks/other/payload/` + secret + `"}`, token.ErrInvalidField, "reserved prefix"},
		{"oversize body", `{"v":1,"kind":"k","payload":"` + secret + strings.Repeat("x", token.MaxBodyBytes) + `"}`, token.ErrPayloadTooBig, "message body is"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, err := token.DecodeSubmission(c.body, now)
			if err == nil {
				t.Fatalf("DecodeSubmission = %+v, want an error", got)
			}
			var te *token.Error
			if !errors.As(err, &te) || !errors.Is(err, c.reason) {
				t.Fatalf("error %v (%T), want a *token.Error matching %v", err, err, c.reason)
			}
			if !strings.Contains(err.Error(), c.detail) {
				t.Fatalf("error %q does not mention %q", err, c.detail)
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("error %q echoes the body", err)
			}
		})
	}
}

// The prefix the intake refuses is claimcheck's: a reference to a value in
// the payload bucket.
func TestSubmissionRefusesWhatClaimcheckCallsAReference(t *testing.T) {
	t.Parallel()
	ref := `"\u0000leasehold-blob:3:tasks/x/payload/abc"`
	if !claimcheck.IsRef([]byte(ref)) {
		t.Fatalf("claimcheck does not take %s for a reference: update blobRefPrefix with it", ref)
	}
	_, err := token.DecodeSubmission(`{"v":1,"kind":"k","payload":`+ref+`}`, time.Now())
	if !errors.Is(err, token.ErrInvalidField) {
		t.Fatalf("a submission whose payload is a reference: %v, want ErrInvalidField", err)
	}
}
