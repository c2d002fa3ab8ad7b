package settings

import (
	"math/rand/v2"
	"time"
)

// ExponentialBackoff returns a backoff for leasehold.WorkerConfig.Backoff
// that doubles from base after each failed attempt, up to max. Each delay
// is drawn from [d/2, d], so consecutive delays never shrink and concurrent
// failures do not retry in lockstep. The worker's default is
// ExponentialBackoff(2*time.Second, 10*time.Minute). It lives here because
// the default Backoff setting is one, and LEASEHOLD_BACKOFF=BASE,MAX builds
// one.
func ExponentialBackoff(base, max time.Duration) func(attempt int) time.Duration {
	return func(attempt int) time.Duration {
		d := base
		for i := 1; i < attempt && d < max; i++ {
			d *= 2
		}
		d = min(d, max)
		half := d / 2
		return half + rand.N(d-half+1)
	}
}
