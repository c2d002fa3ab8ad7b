package settingstable

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold/settings"
)

// ParseRateLimits reads LEASEHOLD_RATE_LIMITS: comma-separated
// QUEUE=N/PER, PER being s, m, h or a duration of whole seconds ("10s",
// "2m"), such as "leasehold-work=50/s,reports=10/m"; N/PER alone is the
// default work queue's (key ""), whose name a deployed stack generates. A
// queue named twice is an error.
func ParseRateLimits(v string) (map[string]settings.RateLimit, error) {
	return parseKeyed(v, "queue", "QUEUE=N/PER", func(part string) (string, settings.RateLimit, error) {
		queue, rate, ok := strings.Cut(part, "=")
		if !ok { // N/PER alone: the default work queue
			queue, rate = "", queue
		}
		queue, rate = strings.TrimSpace(queue), strings.TrimSpace(rate)
		if ok && queue == "" || strings.ContainsAny(queue, " /") {
			return "", settings.RateLimit{}, fmt.Errorf("%q: want QUEUE=N/PER, such as leasehold-work=50/s, or N/PER for the default work queue", part)
		}
		n, per, ok := strings.Cut(rate, "/")
		starts, err := strconv.Atoi(strings.TrimSpace(n))
		if !ok || err != nil {
			return "", settings.RateLimit{}, fmt.Errorf("%q: want N/PER, such as 50/s", rate)
		}
		r := settings.RateLimit{Starts: starts}
		switch per = strings.TrimSpace(per); per {
		case "s":
			r.Per = time.Second
		case "m":
			r.Per = time.Minute
		case "h":
			r.Per = time.Hour
		default:
			if r.Per, err = time.ParseDuration(per); err != nil {
				return "", settings.RateLimit{}, fmt.Errorf("%q: the window %q is neither s, m, h nor a duration", rate, per)
			}
		}
		if err := r.Check(); err != nil {
			return "", settings.RateLimit{}, fmt.Errorf("queue %s: %w", queue, err)
		}
		return queue, r, nil
	})
}

// parseKeyed reads a comma-separated list whose items each name a key
// (each, which also checks the item), and refuses a key named twice or an
// empty list.
func parseKeyed[V any](v, what, form string, each func(part string) (string, V, error)) (map[string]V, error) {
	out := map[string]V{}
	for part := range strings.SplitSeq(v, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		key, val, err := each(part)
		if err != nil {
			return nil, err
		}
		if _, dup := out[key]; dup {
			return nil, fmt.Errorf("%s %s is named twice", what, key)
		}
		out[key] = val
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no %s in it", form)
	}
	return out, nil
}

// FormatRateLimits writes limits as ParseRateLimits reads them, by queue
// name.
func FormatRateLimits(limits map[string]settings.RateLimit) string {
	var parts []string
	for _, q := range slices.Sorted(maps.Keys(limits)) {
		if q == "" {
			parts = append(parts, limits[q].String())
			continue
		}
		parts = append(parts, q+"="+limits[q].String())
	}
	return strings.Join(parts, ",")
}

// ParseKindConcurrency reads LEASEHOLD_KIND_CONCURRENCY: comma-separated
// KIND=N, N from 1 to 100, such as "resize=3,report=1". A kind named twice
// is an error.
func ParseKindConcurrency(v string) (map[string]int, error) {
	return parseKeyed(v, "kind", "KIND=N", func(part string) (string, int, error) {
		kind, n, ok := strings.Cut(part, "=")
		kind = strings.TrimSpace(kind)
		limit, err := strconv.Atoi(strings.TrimSpace(n))
		if !ok || kind == "" || err != nil {
			return "", 0, fmt.Errorf("%q: want KIND=N, such as resize=3", part)
		}
		if limit < 1 || limit > settings.MaxKindConcurrency {
			return "", 0, fmt.Errorf("kind %s: %d is outside 1..%d", kind, limit, settings.MaxKindConcurrency)
		}
		return kind, limit, nil
	})
}
