// Package rules holds the leasehold command's input and display rules: how
// it checks what an operator types (a queue name, a payload, a since value,
// a line of a submissions file, the listing setting) and how it shows what
// it prints (a task id, a list of statuses, an attempt handed back, a
// duration), how it sets up its AWS configuration, and whether the OTEL_*
// environment asks it to trace.
//
// Where the client, the worker or the intake dispatcher applies the same
// rule, the function here calls that rule (internal/lease,
// internal/lease/query, internal/queues, internal/token, internal/awsenv, internal/settingstable,
// internal/durationtext, internal/tracing) rather than
// copying it: a copy would be a second rule waiting to differ from the
// first. This package is the one place of the CLI that imports them
// (internal/cli's TestImportsOnlyPublicPackages says which, and why); the
// CLI's operations on tasks, queues and schedules go through the public API
// (the root package and admin).
//
// These helpers were exported by package admin before issue 34: they are
// the CLI's, not an operator's verbs.
package rules

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/awsenv"
	"github.com/leasehold/leasehold/internal/durationtext"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/query"
	"github.com/leasehold/leasehold/internal/queues"
	"github.com/leasehold/leasehold/internal/settingstable"
	"github.com/leasehold/leasehold/internal/token"
	"github.com/leasehold/leasehold/internal/tracing"
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
// TaskListing parameter, settings.EnvListing): "on" or "" keeps the
// listing index, "off" turns it off, which the client then needs to know
// (unlisted).
func ParseListing(v string) (unlisted bool, err error) { return lease.ParseListing(v) }

// MaxListLimit is the largest page a List of the client returns: the bound
// of `leasehold list --limit` and of the inspector's page size, the one
// the client and the stores check.
const MaxListLimit = query.MaxListLimit

// DisplayID returns id fit for a terminal or a log line: unchanged when it
// is valid UTF-8 made only of printable characters, otherwise quoted and
// escaped as by strconv.Quote, so that a control character, a
// bidirectional override or a stray byte can never act on the output.
func DisplayID(id string) string { return lease.DisplayID(id) }

// RunID is the id of the n-th (1-based) ended run of the workflow id, as
// the worker archives it (workflow.ContinueAsNew).
func RunID(id string, n int) string { return lease.RunID(id, n-1) }

// StatusNames joins statuses with commas, as the CLI's messages show them.
func StatusNames(ss []leasehold.Status) string {
	names := make([]string, len(ss))
	for i, s := range ss {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// ErrSince: a since value that is neither a duration nor a time.
var ErrSince = errors.New("since: want a duration back from now such as 90m or 2h, or an RFC 3339 time")

// ParseSince reads a since value (`leasehold list --since`, the
// inspector's filter): a positive duration back from now (90m, 2h) or an
// RFC 3339 time. Empty is the zero time (no bound).
func ParseSince(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%w: %q", ErrSince, s)
}

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
	s := leasehold.Submission{ID: t.ID, Kind: t.Kind, MaxAttempts: t.MaxAttempts, Queue: t.Queue, Delay: t.Delay, Metadata: t.Metadata}
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

// HTTPClient is the SDK HTTP client leasehold's own processes build their
// AWS configuration with: the SDK's default client, each round trip
// bounded by timeout (none when 0), behind leasehold.GuardHTTP.
func HTTPClient(timeout time.Duration) aws.HTTPClient { return awsenv.HTTPClient(timeout) }

// CheckCredentials finds out, before any other call, whether cfg has usable
// credentials. Without them every call fails with the SDK's whole provider
// chain in its message; the error returned names what to set instead
// (profile, when not empty, is the profile cfg was loaded with). It
// returns nil when the credentials resolve within timeout.
func CheckCredentials(ctx context.Context, cfg aws.Config, profile string, timeout time.Duration) error {
	return awsenv.CheckCredentials(ctx, cfg, profile, timeout)
}

// WorkerFromEnv fills cfg's zero fields from the worker's LEASEHOLD_*
// variables, with the settings table's reader that NewWorkerFromEnv and the
// worker function use (`leasehold run`): what the command set wins.
func WorkerFromEnv(cfg *leasehold.WorkerConfig) error {
	return settingstable.Load(cfg, settingstable.Worker, os.Getenv)
}

// FormatDuration writes d as the docs and the LEASEHOLD_* variables spell
// a duration ("10m", not "10m0s"), so that what the command prints about
// a limit reads as the setting that sets it.
func FormatDuration(d time.Duration) string { return durationtext.Format(d) }

// TracingAsked reports whether getenv's OTEL_* variables ask for tracing,
// by the rule otelenv.FromEnv applies; the command asks before it builds
// a provider, with the getenv it was given.
func TracingAsked(getenv func(string) string) bool { return tracing.Asked(getenv) }
