package token

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/metadata"
)

// A submission is the body of a message on the intake queue: a task to
// persist and dispatch, optionally later than SQS could delay a message:
//
//	{"v":1,"kind":"resize","payload":{"w":64},"id":"optional","max_attempts":3,"delay_seconds":3600}
//	{"v":1,"kind":"report","payload":{},"run_at":"2031-03-14T15:09:26Z"}
//	{"v":1,"kind":"resize","payload":{"w":64},"metadata":{"tenant":"acme"}}
//
// "delay_seconds" and "run_at" are exclusive; without either the task is due
// at once. Decoding is as strict as for tokens: unknown fields, trailing data
// and out-of-range values are rejected with an *Error that names the problem
// without echoing the payload.

// blobRefPrefix starts a reference to a value in the payload bucket
// (claimcheck.IsRef; a test holds the two equal). Only a client and a
// worker write references, after storing the value; a submission that
// starts with it is refused, so the intake never stores one. Kept here
// rather than imported so that the dispatch function does not link the S3
// client.
const blobRefPrefix = `"\u0000leasehold-blob:`

// MaxSubmissionDelay is the furthest ahead a submission may schedule its
// task, by delay or by start time.
const MaxSubmissionDelay = 365 * 24 * time.Hour

// Submission is a decoded intake message.
type Submission struct {
	Version int
	// ID is the client's task id; empty lets the SQS message id name the
	// task.
	ID      string
	Kind    string
	Payload json.RawMessage // nil when absent or null
	// MaxAttempts is 0 when the submission names none: the dispatcher's
	// default applies.
	MaxAttempts int
	// RunAt is the earliest start; zero means now. A "delay_seconds" is
	// resolved into it, and kept in Delay as given.
	RunAt time.Time
	Delay time.Duration
	// Queue names the SQS queue the task's tokens go to; empty for the
	// dispatcher's work queue.
	Queue string
	// Metadata is the task's metadata ("metadata"), within the bounds of
	// package metadata; nil for none.
	Metadata map[string]string
}

type submissionWire struct {
	V            *int              `json:"v"`
	ID           *string           `json:"id"`
	Kind         string            `json:"kind"`
	Payload      json.RawMessage   `json:"payload"`
	MaxAttempts  *int              `json:"max_attempts"`
	DelaySeconds *int64            `json:"delay_seconds"`
	RunAt        *string           `json:"run_at"`
	Queue        *string           `json:"queue"`
	Metadata     map[string]string `json:"metadata"`
}

// DecodeSubmission parses and validates an intake message body. now resolves
// "delay_seconds" into an absolute start and bounds "run_at".
func DecodeSubmission(body string, now time.Time) (Submission, error) {
	return decodeSubmission(body, now, true)
}

// DecodeSubmissionLine is DecodeSubmission for one line of a file of
// submissions (`leasehold enqueue --file`), where "v" may be left out: the
// same rules, checked by the same code, in the same words.
func DecodeSubmissionLine(line string, now time.Time) (Submission, error) {
	return decodeSubmission(line, now, false)
}

func decodeSubmission(body string, now time.Time, needVersion bool) (Submission, error) {
	if len(body) > MaxBodyBytes {
		return Submission{}, &Error{Reason: ErrPayloadTooBig, Detail: fmt.Sprintf("message body is %d bytes, the limit is %d", len(body), MaxBodyBytes)}
	}
	if !utf8.ValidString(body) {
		return Submission{}, &Error{Reason: ErrMalformed, Detail: "body is not valid UTF-8"}
	}
	var w submissionWire
	if err := decodeStrict(body, &w); err != nil {
		return Submission{}, err
	}
	if w.V == nil && !needVersion {
		v := Version
		w.V = &v
	}
	if w.V == nil {
		return Submission{}, &Error{Reason: ErrMissingField, Detail: `"v" (the submission version) is required`}
	}
	if *w.V != Version {
		return Submission{}, &Error{Reason: ErrVersion, Detail: fmt.Sprintf("version %d; this dispatcher understands version %d", *w.V, Version)}
	}
	s := Submission{Version: *w.V, Kind: w.Kind}
	if len(w.Payload) > 0 && !bytes.Equal(w.Payload, []byte("null")) {
		s.Payload = w.Payload
	}
	if err := s.decodeFields(w, now); err != nil {
		return Submission{}, err
	}
	return s, nil
}

func (s *Submission) decodeFields(w submissionWire, now time.Time) error {
	if w.ID != nil {
		switch {
		case *w.ID == "":
			return &Error{Reason: ErrInvalidField, Detail: `"id" is empty; leave it out to let the message id name the task`}
		case checkID(*w.ID) != nil:
			return checkID(*w.ID)
		}
		s.ID = *w.ID
	}
	switch {
	case s.Kind == "":
		return &Error{Reason: ErrMissingField, Detail: `"kind" is required`}
	case len(s.Kind) > lease.MaxKindBytes:
		return &Error{Reason: ErrInvalidField, Detail: fmt.Sprintf(`"kind" is %d bytes, the limit is %d`, len(s.Kind), lease.MaxKindBytes)}
	case len(s.Payload) > lease.MaxPayloadBytes:
		return &Error{Reason: ErrPayloadTooBig, Detail: fmt.Sprintf("payload is %d bytes, the limit is %d: an intake submission is one SQS message, so a larger payload (up to 10 MiB) goes through Client.Enqueue or `leasehold enqueue` with a payload bucket (LEASEHOLD_PAYLOAD_BUCKET)", len(s.Payload), lease.MaxPayloadBytes)}
	case bytes.HasPrefix(s.Payload, []byte(blobRefPrefix)):
		return &Error{Reason: ErrInvalidField, Detail: `"payload" starts with the reserved prefix of a payload-bucket reference`}
	}
	if w.MaxAttempts != nil {
		if n := *w.MaxAttempts; n < 1 || n > lease.MaxAttemptsLimit {
			return &Error{Reason: ErrInvalidField, Detail: fmt.Sprintf(`"max_attempts" %d is outside 1..%d`, n, lease.MaxAttemptsLimit)}
		}
		s.MaxAttempts = *w.MaxAttempts
	}
	if w.Queue != nil {
		if err := checkQueue(*w.Queue); err != nil {
			return err
		}
		s.Queue = *w.Queue
	}
	if p := metadata.Problem(w.Metadata); p != "" {
		return &Error{Reason: ErrInvalidField, Detail: `"metadata" ` + p}
	}
	if len(w.Metadata) > 0 {
		s.Metadata = w.Metadata
	}
	maxSeconds := int64(MaxSubmissionDelay / time.Second)
	switch {
	case w.DelaySeconds != nil && w.RunAt != nil:
		return &Error{Reason: ErrInvalidField, Detail: `"delay_seconds" and "run_at" are exclusive`}
	case w.DelaySeconds != nil:
		if d := *w.DelaySeconds; d < 0 || d > maxSeconds {
			return &Error{Reason: ErrInvalidField, Detail: fmt.Sprintf(`"delay_seconds" %d is outside 0..%d`, d, maxSeconds)}
		}
		s.Delay = time.Duration(*w.DelaySeconds) * time.Second
		s.RunAt = now.Add(s.Delay)
	case w.RunAt != nil:
		at, err := time.Parse(time.RFC3339, *w.RunAt)
		if err != nil {
			return &Error{Reason: ErrInvalidField, Detail: `"run_at" is not an RFC 3339 time such as 2031-03-14T15:09:26Z`}
		}
		if at.Sub(now) > MaxSubmissionDelay {
			return &Error{Reason: ErrInvalidField, Detail: fmt.Sprintf(`"run_at" is more than %d days ahead`, int(MaxSubmissionDelay/(24*time.Hour)))}
		}
		s.RunAt = at.UTC()
	}
	return nil
}
