package settings

import (
	"fmt"
	"strconv"
	"time"

	"github.com/leasehold/leasehold/internal/durationtext"
)

// RateLimit bounds how many tasks of one queue start in each window of Per,
// across every worker of the table (WorkerConfig.RateLimits).
type RateLimit struct {
	// Starts is how many may start in one window; at least 1.
	Starts int
	// Per is the window: a whole number of seconds, at least one.
	Per time.Duration
}

// Check reports what is wrong with r, if anything.
func (r RateLimit) Check() error {
	switch {
	case r.Starts < 1:
		return fmt.Errorf("%d starts: want at least 1", r.Starts)
	case r.Per < time.Second || r.Per%time.Second != 0:
		return fmt.Errorf("a window of %s: want a whole number of seconds, at least 1s", r.Per)
	}
	return nil
}

// String writes r as LEASEHOLD_RATE_LIMITS writes it: "5/s", "100/m",
// "3/10s".
func (r RateLimit) String() string {
	per := map[time.Duration]string{time.Second: "s", time.Minute: "m", time.Hour: "h"}[r.Per]
	if per == "" {
		per = durationtext.Format(r.Per)
	}
	return strconv.Itoa(r.Starts) + "/" + per
}

// MaxKindConcurrency bounds one kind's concurrency limit: its running
// attempts are entries of one item of the table.
const MaxKindConcurrency = 100
