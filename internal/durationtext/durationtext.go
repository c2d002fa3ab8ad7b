// Package durationtext writes durations the way leasehold's docs and
// LEASEHOLD_* variables spell them. It is a leaf of its own so that the
// public settings package, the settings table and the command's UI share
// one spelling without settings exporting a formatting helper.
package durationtext

import (
	"strings"
	"time"
)

// Format writes d the way the docs and variables do: "10m", not "10m0s";
// "1h", not "1h0m0s".
func Format(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
