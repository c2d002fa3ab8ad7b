package dispatch

import "testing"

// A queue's identity is its account and name, however its URL is spelled:
// the redrive counts of its dead letters are keyed by it.
func TestQueueIdentity(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ url, want string }{
		{"https://sqs.us-east-1.amazonaws.com/123456789012/images", "123456789012/images"},
		{"https://queue.amazonaws.com/123456789012/images", "123456789012/images"},
		{"http://127.0.0.1:4566/queue/us-east-1/000000000000/images/", "000000000000/images"},
	} {
		if got := queueIdentity(c.url); got != c.want {
			t.Errorf("queueIdentity(%q) = %q, want %q", c.url, got, c.want)
		}
	}
}
