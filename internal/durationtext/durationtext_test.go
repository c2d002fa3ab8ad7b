package durationtext

import (
	"testing"
	"time"
)

func TestFormat(t *testing.T) {
	for d, want := range map[time.Duration]string{
		20 * time.Second: "20s", 10 * time.Minute: "10m", 168 * time.Hour: "168h",
		90 * time.Second: "1m30s", 0: "0s", time.Hour + time.Second: "1h0m1s",
	} {
		if got := Format(d); got != want {
			t.Errorf("Format(%s) = %q, want %q", d, got, want)
		}
	}
}
