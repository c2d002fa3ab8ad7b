package limiter

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
)

// A rate window counts the task starts of one queue in one window of time,
// shared by every worker of the table (docs/worker.md, "Flow control"). It
// is an item of the tasks table whose id starts with a control character,
// like a batch listing entry's, so it can never be a task's; it has no
// index keys, and it expires (TTL) soon after its window.

// rateWindowPrefix starts every rate window's id.
const rateWindowPrefix = "\x1erate/"

// RateWindowSlack is how long after its window ends a rate window's item
// is kept before the table's TTL may delete it.
const RateWindowSlack = time.Hour

// AttrStarts is a rate window's count of the starts it has allowed.
const AttrStarts = "starts"

// RateLimiter is a store that keeps rate windows: both stores implement it.
type RateLimiter interface {
	// TakeStart counts one start in the window of key (a queue's name)
	// that begins at window and lasts per, unless limit starts are
	// counted in it already: it reports whether the start may go ahead.
	// One conditional write. A write whose answer was lost and that the
	// SDK retries may count twice, or refuse a start it counted: the
	// limit errs on the side of fewer starts.
	TakeStart(ctx context.Context, key string, window time.Time, per time.Duration, limit int) (bool, error)
}

// RateWindowID is the id of key's window that begins at window.
func RateWindowID(key string, window time.Time) string {
	return rateWindowPrefix + key + "/" + strconv.FormatInt(window.Unix(), 10)
}

// IsRateWindowID reports whether id names a rate window.
func IsRateWindowID(id string) bool {
	return strings.HasPrefix(id, rateWindowPrefix)
}

// CheckTakeStart validates TakeStart's arguments.
func CheckTakeStart(key string, window time.Time, per time.Duration, limit int) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: a rate window needs a key", lease.ErrInvalid)
	case per < time.Second || per%time.Second != 0:
		return fmt.Errorf("%w: a rate window of %s is not a whole number of seconds", lease.ErrInvalid, per)
	case limit < 1:
		return fmt.Errorf("%w: a rate limit of %d starts", lease.ErrInvalid, limit)
	case window.IsZero():
		return fmt.Errorf("%w: a rate window needs its start", lease.ErrInvalid)
	}
	return nil
}
