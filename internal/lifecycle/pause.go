package lifecycle

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/leasehold/leasehold/internal/queues"
)

// The hold of a message handed back to come again (holdForPause, and a
// notification that failed: runNotifying): firstHold on its first
// receive, doubling with each receive, at most maxHold, which is also the
// delay of the fresh token that replaces it near maxReceiveCount (at most
// SQS's 15-minute delay). A paused queue's message held n times has waited
// at least about half its next hold, so after a resume a backlog runs
// again within about twice the time it had been paused, and within
// maxHold whatever the pause's length.
const (
	firstHold = 10 * time.Second
	maxHold   = MaxSQSDelay
)

// backoffHold is the hold of a message handed back after it was received
// count times: drawn from [h/2, h], h = firstHold doubled count-1 times,
// at most maxHold, so a backlog that came in together comes back spread
// out.
func backoffHold(count int) time.Duration {
	h := min(firstHold<<(min(max(count, 1), 10)-1), maxHold)
	h = h/2 + rand.N(h/2+1)
	return max(h.Round(time.Second), time.Second)
}

// holdForPause hands back, unrun, a message whose queue is paused
// (Message.Paused: `leasehold pause`, the queue's queues.PausedTag). No
// write touches its task, so no attempt is used; the message is hidden for
// backoffHold, or from ReplaceAtReceiveCount on replaced by a fresh token
// delayed by it (keep), so that a backlog paused for long never reaches the
// queue's maxReceiveCount and its dead-letter queue.
func (x *execution) holdForPause() State {
	hold := backoffHold(x.msg.ReceiveCount)
	queue := queues.NameFromURL(x.msgQueueURL())
	x.log.debug("queue paused; the token is held back", "queue", queue, "hold", hold, "receive_count", x.msg.ReceiveCount)
	x.result.Held = true
	return x.keep(x.detached, hold, fmt.Sprintf("held back: queue %s is paused (leasehold resume); offered again in %s without using an attempt", queue, hold))
}
