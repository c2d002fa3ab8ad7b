package ui_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/cli/ui"
)

// clock is a test's clock, moved by hand.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// A session ends after its idle limit without a request of the operator's
// (live refreshes do not count) or its lifetime after it opened, and stays
// ended; the page says so and how to get a new one. An unused start URL
// expires with the lifetime too.
func TestSessionExpires(t *testing.T) {
	t.Parallel()
	type step struct {
		after  time.Duration
		target string
		want   int
		says   string // in the answer of a refused request
	}
	const expired = "the session has expired: "
	for _, c := range []struct {
		name        string
		idle, total time.Duration // zero: the defaults
		steps       []step
	}{
		{"idle", 0, 0, []step{
			{29 * time.Minute, "/queues", http.StatusOK, ""},
			{29 * time.Minute, "/queues", http.StatusOK, ""},
			// A live refresh is no request of the operator's.
			{20 * time.Minute, "/queues?live=1", http.StatusOK, ""},
			{11 * time.Minute, "/queues", http.StatusForbidden, expired + "no request for more than 30m (the limit when idle)"},
			// Ended for good.
			{0, "/queues?live=1", http.StatusForbidden, expired},
			{0, "/", http.StatusForbidden, expired},
		}},
		{"lifetime", 0, 0, append(repeat(step{25 * time.Minute, "/queues", http.StatusOK, ""}, 28), // 11h40m
			step{19 * time.Minute, "/queues", http.StatusOK, ""},
			step{2 * time.Minute, "/queues", http.StatusForbidden, expired + "it is older than 12h (the session's limit)"},
		)},
		{"flags", 5 * time.Minute, 90 * time.Minute, []step{
			{4 * time.Minute, "/queues", http.StatusOK, ""},
			{6 * time.Minute, "/queues", http.StatusForbidden, expired + "no request for more than 5m"},
		}},
		{"lifetime from the start", 0, 2 * time.Hour, append(repeat(step{20 * time.Minute, "/queues", http.StatusOK, ""}, 6),
			step{time.Second, "/queues", http.StatusForbidden, expired + "it is older than 2h"},
		)},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			clk := &clock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
			srv, h := serveWith(t, ui.Config{Tasks: &bigMap{}, Queues: &fakeQueues{}, WorkQueueURL: workURL, SessionIdle: c.idle, SessionLifetime: c.total, Now: clk.Now})
			cookie := firstVisit(t, h, srv)
			for i, s := range c.steps {
				clk.Add(s.after)
				r := httptest.NewRequest(http.MethodGet, srv.Base()+s.target, nil)
				r.Host = addr
				r.AddCookie(cookie)
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != s.want || !strings.Contains(w.Body.String(), s.says) ||
					(s.want == http.StatusForbidden && !strings.Contains(w.Body.String(), "restart `leasehold ui`")) {
					t.Fatalf("step %d (%s, +%s): %d %q, want %d with %q", i, s.target, s.after, w.Code, w.Body, s.want, s.says)
				}
			}
		})
	}
}

func repeat[T any](v T, n int) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// The start URL, never used, expires with the session's lifetime.
func TestUnusedStartURLExpires(t *testing.T) {
	t.Parallel()
	clk := &clock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
	srv, h := serveWith(t, ui.Config{Tasks: &bigMap{}, Queues: &fakeQueues{}, WorkQueueURL: workURL, Now: clk.Now})
	clk.Add(12*time.Hour + time.Second)
	r := httptest.NewRequest(http.MethodGet, startTarget(t, srv), nil)
	r.Host = addr
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if body := w.Body.String(); w.Code != http.StatusForbidden || len(w.Result().Cookies()) != 0 ||
		!strings.Contains(body, "expired unused") || !strings.Contains(body, "restart `leasehold ui`") {
		t.Fatalf("start URL 12h after start: %d %v %q", w.Code, w.Result().Cookies(), body)
	}
}
