package limiter

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
)

// A redrive count counts the times the sweep's dead-letter recovery sent
// one dead letter back to its queue, for a message with no room for the
// count in its own attributes: SQS takes at most 10 message attributes,
// and the message has them all already (docs/dispatch.md, "Sweep"). It is
// an item of the tasks table whose id starts with a control character,
// like a rate window's, so it can never be a task's; it has no index keys,
// and it expires (TTL) RedriveCountTTL after its last count.

// redriveCountPrefix starts every redrive count's id.
const redriveCountPrefix = "\x1eredrive/"

// RedriveCountTTL is how long a redrive count is kept after its last
// count before the table's TTL may delete it: SQS keeps a message for at
// most 14 days, so a dead letter sent back finds its count when it comes
// back, unless it spent longer than that in the queue it went back to.
const RedriveCountTTL = 14 * 24 * time.Hour

// AttrRedriveCount is a redrive count's count.
const AttrRedriveCount = "redrives"

// RedriveCounter is a store that keeps redrive counts: both stores
// implement it.
type RedriveCounter interface {
	// TakeRedrive counts one more redrive of the dead letter key names (a
	// digest of its queue and body) unless limit are counted already, and
	// reports whether it may be sent back. One conditional write, which
	// also moves the count's expiry to RedriveCountTTL from now. A write
	// whose answer was lost and that the SDK retries may count twice: the
	// bound errs on the side of fewer redrives.
	TakeRedrive(ctx context.Context, key string, limit int) (bool, error)
}

// RedriveCountID is the id of key's redrive count.
func RedriveCountID(key string) string { return redriveCountPrefix + key }

// IsRedriveCountID reports whether id names a redrive count.
func IsRedriveCountID(id string) bool { return strings.HasPrefix(id, redriveCountPrefix) }

// CheckTakeRedrive validates TakeRedrive's arguments.
func CheckTakeRedrive(key string, limit int) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: a redrive count needs a key", lease.ErrInvalid)
	case limit < 1:
		return fmt.Errorf("%w: a redrive limit of %d", lease.ErrInvalid, limit)
	}
	return nil
}
