package schedule

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold/internal/queues"
	"github.com/leasehold/leasehold/internal/token"
)

// ScheduledTime is EventBridge Scheduler's context attribute that it
// replaces, in a target's Input, with the slot's time (2026-12-03T10:15:00Z).
const ScheduledTime = "<aws.scheduler.scheduled-time>"

// IDPrefix starts the id of every task a schedule starts.
const IDPrefix = "sched:"

// timeLayout is how ScheduledTime writes a slot: UTC, whole seconds.
const timeLayout = "2006-01-02T15:04:05Z"

// marker stands for the slot time in an encoded token until it is replaced.
// It cannot occur in a schedule name, and the id is the first string of a
// token body, so the first occurrence is always the id's.
const marker = "@slot@"

// namePattern is EventBridge Scheduler's rule for schedule names.
var namePattern = regexp.MustCompile(`^[0-9A-Za-z_.-]{1,64}$`)

// CheckName checks a schedule name: 1 to 64 letters, digits, '-', '_' or
// '.', as EventBridge Scheduler requires.
func CheckName(name string) error {
	if !namePattern.MatchString(name) {
		return fmt.Errorf("%w: schedule name %q: want 1 to 64 letters, digits, '-', '_' or '.'", ErrInvalid, name)
	}
	return nil
}

// TaskID is the id of the task that the slot at of schedule name starts:
// sched:NAME:2026-12-03T10:15:00Z. Every firing of one slot, by EventBridge
// or by `leasehold run`, first or repeated, names the same task, so the
// slot's task runs once.
func TaskID(name string, at time.Time) string {
	return IDPrefix + name + ":" + at.UTC().Format(timeLayout)
}

// Spec is one schedule: when it fires and the task each slot starts.
type Spec struct {
	Name string
	Expr Expr
	// Location reads a cron expression's fields (UTC when nil).
	Location *time.Location
	// Anchor is where a rate's periods are counted from (the Unix epoch
	// when zero).
	Anchor time.Time
	Kind   string
	// Payload is the task's payload, valid JSON or nil.
	Payload json.RawMessage
	// Queue, when set, names the SQS queue of the task's later tokens
	// (the token's "queue" field); the firer sends the token there too.
	Queue   string
	CatchUp CatchUp
}

// Validate checks the spec and that its token encodes.
func (s Spec) Validate() error {
	if err := CheckName(s.Name); err != nil {
		return err
	}
	if s.Expr.period == 0 && s.Expr.cron == nil {
		return fmt.Errorf("%w: schedule %s has no expression", ErrInvalid, s.Name)
	}
	if s.Queue != "" {
		if err := queues.CheckName(s.Queue); err != nil {
			return fmt.Errorf("%w: schedule %s: %v", ErrInvalid, s.Name, err)
		}
	}
	if _, err := s.template(); err != nil {
		return err
	}
	return nil
}

// template is the inline token with the marker where the slot time goes.
func (s Spec) template() (string, error) {
	body, err := token.Token{Kind: s.Kind, ID: IDPrefix + s.Name + ":" + marker, Payload: s.Payload, Queue: s.Queue}.Encode()
	if err != nil {
		return "", fmt.Errorf("%w: schedule %s: %v", ErrInvalid, s.Name, err)
	}
	return body, nil
}

// Input is the target Input for EventBridge Scheduler: the inline token
// whose id ends in ScheduledTime, which EventBridge replaces with each
// slot's time.
func (s Spec) Input() (string, error) {
	t, err := s.template()
	if err != nil {
		return "", err
	}
	return strings.Replace(t, marker, ScheduledTime, 1), nil
}

// Body is the inline token of the slot at: what EventBridge sends for that
// slot, byte for byte.
func (s Spec) Body(at time.Time) (string, error) {
	t, err := s.template()
	if err != nil {
		return "", err
	}
	return strings.Replace(t, marker, at.UTC().Format(timeLayout), 1), nil
}

// FromInput reads a spec's name, kind, payload and queue back from a
// target Input that Input wrote. ok is false for any other input (a
// schedule that is not leasehold's).
func FromInput(input string) (s Spec, ok bool) {
	tok, err := token.Decode(input)
	if err != nil || !tok.Inline() {
		return Spec{}, false
	}
	rest, found := strings.CutPrefix(tok.ID, IDPrefix)
	if !found {
		return Spec{}, false
	}
	name, tail, found := strings.Cut(rest, ":")
	if !found || tail != ScheduledTime || CheckName(name) != nil {
		return Spec{}, false
	}
	return Spec{Name: name, Kind: tok.Kind, Payload: tok.Payload, Queue: tok.Queue}, true
}

// Mode is what a catch-up does with missed slots.
type Mode int

// The catch-up modes.
const (
	// Latest fires only the most recent missed slot (the default).
	Latest Mode = iota
	// None fires no missed slot.
	None
	// All fires every missed slot, up to a limit, oldest first.
	All
)

// DefaultMaxAge is how old a missed slot may be and still be fired, as
// EventBridge's MaximumEventAgeInSeconds bounds a retried slot.
const DefaultMaxAge = time.Hour

// DefaultAllLimit is how many missed slots "all" fires at most.
const DefaultAllLimit = 10

// CatchUp says what happens to slots that were missed: due while nothing
// fired them (the runner was stopped or stalled), found later than
// Tolerance after their time.
type CatchUp struct {
	Mode Mode
	// Limit bounds All (DefaultAllLimit when 0).
	Limit int
	// MaxAge: older missed slots are never fired (DefaultMaxAge when 0).
	MaxAge time.Duration
}

// String writes the policy as ParseCatchUp reads it.
func (c CatchUp) String() string {
	var s string
	switch c.Mode {
	case None:
		s = "none"
	case All:
		s = "all:" + strconv.Itoa(c.limit())
	default:
		s = "latest"
	}
	if c.MaxAge != 0 && c.MaxAge != DefaultMaxAge {
		s += "," + c.MaxAge.String()
	}
	return s
}

func (c CatchUp) limit() int {
	if c.Limit <= 0 {
		return DefaultAllLimit
	}
	return c.Limit
}

func (c CatchUp) maxAge() time.Duration {
	if c.MaxAge <= 0 {
		return DefaultMaxAge
	}
	return c.MaxAge
}

// ParseCatchUp reads none, latest, all or all:N, optionally followed by
// ",AGE" (a duration such as 30m) bounding the age of a slot fired late.
// Empty is latest.
func ParseCatchUp(s string) (CatchUp, error) {
	var c CatchUp
	mode, age, hasAge := strings.Cut(strings.TrimSpace(s), ",")
	if hasAge {
		d, err := time.ParseDuration(age)
		if err != nil || d <= 0 {
			return CatchUp{}, fmt.Errorf("%w: catch-up %q: %q is not a positive duration such as 30m", ErrInvalid, s, age)
		}
		c.MaxAge = d
	}
	switch {
	case mode == "" || mode == "latest":
		c.Mode = Latest
	case mode == "none":
		c.Mode = None
	case mode == "all":
		c.Mode = All
	case strings.HasPrefix(mode, "all:"):
		n, err := strconv.Atoi(mode[len("all:"):])
		if err != nil || n <= 0 || n > 1000 {
			return CatchUp{}, fmt.Errorf("%w: catch-up %q: all:N wants N from 1 to 1000", ErrInvalid, s)
		}
		c.Mode, c.Limit = All, n
	default:
		return CatchUp{}, fmt.Errorf("%w: catch-up %q: want none, latest, all or all:N, optionally with ,AGE", ErrInvalid, s)
	}
	return c, nil
}

// CheckFires refuses a schedule that has no slot after now: a cron whose
// years are all past, or whose last slot has gone. Creating one would give
// a schedule that never fires. (Parse already refuses a cron that never
// fires at all, such as 30 February.)
func (s Spec) CheckFires(now time.Time) error {
	if s.Expr.cron == nil {
		return nil
	}
	loc := s.Location
	if loc == nil {
		loc = time.UTC
	}
	if _, ok := s.Expr.Next(now, s.Anchor, loc); !ok {
		return fmt.Errorf("%w: schedule %s: %s has no slot after %s: it would never fire", ErrExpression, s.Name, s.Expr, now.UTC().Format(timeLayout))
	}
	return nil
}
