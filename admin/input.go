package admin

import (
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/queues"
	"github.com/leasehold/leasehold/internal/token"
)

// Limits of an intake-queue submission, which a line of a bulk file
// (`leasehold enqueue --file`) shares.
const (
	// SubmissionVersion is the submission version ("v") this build
	// understands.
	SubmissionVersion = token.Version
	// MaxSubmissionBytes bounds one submission body or line.
	MaxSubmissionBytes = token.MaxBodyBytes
	// MaxSubmissionDelay is the furthest ahead a submission may start its
	// task.
	MaxSubmissionDelay = token.MaxSubmissionDelay
)

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
// TaskListing parameter, leasehold.EnvListing): "on" or "" keeps the
// listing index, "off" turns it off, which the client then needs to know
// (unlisted).
func ParseListing(v string) (unlisted bool, err error) { return lease.ParseListing(v) }

// DisplayID returns id fit for a terminal or a log line: unchanged when it
// is valid UTF-8 made only of printable characters, otherwise quoted and
// escaped as by strconv.Quote, so that a control character, a
// bidirectional override or a stray byte can never act on the output.
func DisplayID(id string) string { return lease.DisplayID(id) }
