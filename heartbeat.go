package leasehold

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
)

// HeartbeatCallback tells the callback wait the token names that the
// outside system still works on it: a wait with a heartbeat timeout
// (workflow.HeartbeatTimeout) then goes on for the timeout from now, up to
// its own deadline. It is one conditional write, and sends nothing. It
// takes the handler's token, as CompleteCallback does; a forged token, or
// one built from what the table holds, gives an error matching
// ErrBadCallback. A beat for a wait that has ended (answered, timed out,
// its attempt retried) or is past a deadline gives an error matching
// ErrBadCallback and ErrNotWaiting (or ErrFinished, and ErrNotFound for a
// task that is gone): stop beating then. A wait without a heartbeat
// timeout gives an error matching ErrInvalid. A beat that overtakes the
// suspension of the attempt that handed out the token is retried for a
// few seconds, as a callback is.
func (c *Client) HeartbeatCallback(ctx context.Context, callbackToken string) error {
	e, err := c.handlerWaitEnd(callbackToken, lease.StatusSucceeded, nil, "")
	if err != nil {
		return err
	}
	deadline := c.opts.clock.Now().Add(callbackRaceWait)
	pause := 50 * time.Millisecond
	for {
		cctx, cancel := context.WithTimeout(ctx, c.opts.callTimeout)
		_, err := c.store.BeatCallback(cctx, e)
		cancel()
		var we *lease.WaitError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &we) && we.Task.Status == lease.StatusRunning && we.Task.Fence == e.Fence && c.opts.clock.Now().Before(deadline):
			// The beat overtook the suspension: try again shortly.
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-c.opts.clock.After(pause):
			}
			pause = min(2*pause, time.Second)
			continue
		case errors.Is(err, ErrBadCallback), errors.Is(err, ErrInvalid):
			return err
		case errors.Is(err, lease.ErrFinished), errors.Is(err, ErrNotWaiting):
			return fmt.Errorf("%w: %w", ErrBadCallback, err)
		case errors.Is(err, lease.ErrNotFound):
			return fmt.Errorf("%w: task %s: %w", ErrBadCallback, lease.DisplayID(e.ID), ErrNotFound)
		}
		return c.translate(ctx, err)
	}
}
