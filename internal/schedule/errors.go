package schedule

import "errors"

// Sentinel errors of this package; each error it returns wraps one.
var (
	// ErrExpression: a schedule expression that does not parse, or one that
	// EventBridge Scheduler would refuse (a rate under one minute).
	ErrExpression = errors.New("invalid schedule expression")
	// ErrInvalid: any other bad part of a schedule (name, kind, payload,
	// queue, catch-up policy).
	ErrInvalid = errors.New("invalid schedule")
)
