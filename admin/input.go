package admin

import (
	"errors"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/queues"
	"github.com/leasehold/leasehold/internal/token"
)

// MaxSubmissionBytes bounds one intake-queue submission body, and one line
// of a bulk file (`leasehold enqueue --file`).
const MaxSubmissionBytes = token.MaxBodyBytes

// JSONProblem says what is wrong with b as one JSON document, in words that
// follow the name of the document ("payload " + problem): "" when nothing.
// tooDeep reports a document that nests arrays and objects past
// leasehold's depth limit, which the standard decoder would accept but the
// store does not.
func JSONProblem(b []byte) (problem string, tooDeep bool) {
	p := lease.JSONProblem(b)
	return p, p == lease.TooDeep
}

// CheckQueueName accepts a standard SQS queue name, as the client and the
// dispatcher do: 1 to 80 characters, each an ASCII letter, digit, '-' or
// '_'. A ".fifo" name is rejected: leasehold's tokens carry no message
// group, and its retries rely on per-message delays.
func CheckQueueName(name string) error { return queues.CheckName(name) }

// ParseListing reads a deployment's task-listing setting (the template's
// TaskListing parameter, settings.EnvListing): "on" or "" keeps the
// listing index, "off" turns it off, which the client then needs to know
// (unlisted).
func ParseListing(v string) (unlisted bool, err error) { return lease.ParseListing(v) }

// DisplayID returns id fit for a terminal or a log line: unchanged when it
// is valid UTF-8 made only of printable characters, otherwise quoted and
// escaped as by strconv.Quote, so that a control character, a
// bidirectional override or a stray byte can never act on the output.
func DisplayID(id string) string { return lease.DisplayID(id) }

// ParseSubmission reads one line of a file of submissions (`leasehold
// enqueue --file`): an intake-queue submission whose "v" may be left out.
// It is checked by the code, and with the words, the intake dispatcher
// uses for a message body; now bounds "run_at". A "delay_seconds" is kept
// as the submission's Delay, so it counts from the enqueue.
func ParseSubmission(line []byte, now time.Time) (leasehold.Submission, error) {
	t, err := token.DecodeSubmissionLine(string(line), now)
	var te *token.Error
	if errors.As(err, &te) {
		// The reason names the dispatcher's record ("malformed token"); a
		// line is not a token, and its detail says it all.
		return leasehold.Submission{}, errors.New(te.Detail)
	} else if err != nil {
		return leasehold.Submission{}, err
	}
	s := leasehold.Submission{ID: t.ID, Kind: t.Kind, MaxAttempts: t.MaxAttempts, Queue: t.Queue, Delay: t.Delay}
	if t.Payload != nil {
		s.Payload = t.Payload
	}
	if t.Delay == 0 && !t.RunAt.IsZero() {
		s.RunAt = t.RunAt
	}
	return s, nil
}

// HandedBack reports whether t's last attempt ended without using up an
// attempt (a snooze, a durable sleep or poll, a hold of a rate or
// concurrency limit, an unknown kind), so that t.Error is the reason it
// waited, not an error: PENDING with the last history entry's number above
// t.Attempt (the attempt was handed back), or RUNNING again at that same
// number (claimed again after the hand-back). The CLI's `status` and the
// inspector label it so. It needs t.History (Client.Get has it, a listing
// page does not).
func HandedBack(t leasehold.TaskInfo) bool {
	n := len(t.History)
	if n == 0 {
		return false
	}
	last := t.History[n-1].Attempt
	switch t.Status {
	case leasehold.StatusPending:
		return last > t.Attempt
	case leasehold.StatusRunning:
		return last >= t.Attempt
	}
	return false
}
