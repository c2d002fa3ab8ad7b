package dispatch

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/leasehold/leasehold/internal/lease/limiter"
	"github.com/leasehold/leasehold/internal/lifecycle"
	"github.com/leasehold/leasehold/internal/queues"
)

// Dead-letter recovery. A work queue's redrive policy moves a message to
// its dead-letter queue after maxReceiveCount receives, whether or not a
// worker ever handled it: receives whose answers were lost, workers that
// died holding it. Most tasks are safe anyway (their sweep entry brings
// them back), but a task created and claimed from its own message has no
// sweep entry while it runs: that message is its only way back. So each
// sweep also reads the dead-letter queue of the default work queue
// (Config.WorkDLQURL) and those of the named queues (Config.NamedQueues,
// each found through the queue's redrive policy), takes the messages SQS
// moved there (no leasehold-reason attribute: a worker forwards what it
// rejects with one, and those are left for an operator) and sends each
// back to the queue it came from, which SQS names in the message's
// DeadLetterQueueSourceArn. It counts the times in the leasehold-redrives
// attribute or, for a message that has SQS's 10 message attributes
// already, in a redrive count of the table (limiter.RedriveCounter). A
// message sent back MaxDeadLetterRedrives times stays, as does one from a
// queue the dispatcher does not know, and anything it cannot send back.

// AttrRedrives counts the times a message was sent back from a dead-letter
// queue.
const AttrRedrives = "leasehold-redrives"

// MaxDeadLetterRedrives is how many times a message is sent back from a
// dead-letter queue before it is left there for an operator: a token that
// keeps killing its workers must not circle forever.
const MaxDeadLetterRedrives = 3

// MaxMessageAttributes is the most message attributes SQS takes on one
// message: a send with more is refused.
const MaxMessageAttributes = 10

// Bounds of one sweep's dead-letter recovery: receives of up to ten
// messages, maxDeadLetterReceives in all, shared round-robin among the
// dead-letter queues, each message hidden for deadLetterHold while the
// sweep reads on. The messages left in a queue stay hidden until its last
// receive, so that each receive reaches messages behind them (a token
// moved there can sit behind any number of rejected messages), and are
// then made visible again at once.
const (
	maxDeadLetterReceives = 30
	deadLetterHold        = 30 // seconds
)

// namedDeadLetterRefresh is how long a named queue's dead-letter queue, once
// found, is kept before its redrive policy is read again: a policy added
// or changed later is seen within this time.
const namedDeadLetterRefresh = time.Hour

// DeadLetterClient is the part of *sqs.Client dead-letter recovery uses.
type DeadLetterClient interface {
	ReceiveMessage(ctx context.Context, params *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, params *sqs.DeleteMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
	ChangeMessageVisibilityBatch(ctx context.Context, params *sqs.ChangeMessageVisibilityBatchInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
}

// QueueAttributesClient is the call that finds a named queue's ARN and its
// dead-letter queue (its redrive policy); *sqs.Client satisfies it.
type QueueAttributesClient interface {
	GetQueueAttributes(ctx context.Context, params *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

// RedriveStats counts what one dead-letter recovery did.
type RedriveStats struct {
	// Redriven is how many messages were sent back to their queues.
	Redriven int `json:"redriven"`
	// Left is how many were left in their dead-letter queues: rejected by
	// a worker (with a reason), sent back too often, from a queue this
	// dispatcher does not know, or not sent back now.
	Left int `json:"left"`
	// Unread is how many dead-letter queues could not be read, or, for a
	// named queue, found; each is in the error too.
	Unread int `json:"unread"`
}

// deadLetterState is what dead-letter recovery keeps between sweeps.
type deadLetterState struct {
	mu sync.Mutex
	// named is what was found of each named queue (Config.NamedQueues), by
	// its entry there.
	named map[string]namedDeadLetter
	// next is where the next sweep starts its round of the dead-letter
	// queues, so that all are reached in turn when one sweep's receives do
	// not reach them all.
	next int
}

// namedDeadLetter is what the dispatcher found of one named queue.
type namedDeadLetter struct {
	source sourceQueue
	// dlqURL is the dead-letter queue its redrive policy names; empty for
	// a queue with none.
	dlqURL string
	at     time.Time
}

// sourceQueue is a queue whose dead letters go back to it.
type sourceQueue struct {
	url string
	// arn is empty for the default work queue, whose ARN the dispatcher
	// does not read: it is matched by name.
	arn string
}

// is reports whether arn (a DeadLetterQueueSourceArn) names s.
func (s sourceQueue) is(arn string) bool {
	if s.arn != "" {
		return s.arn == arn
	}
	name, _ := queues.NameFromARN(arn)
	return name != "" && name == queues.NameFromURL(s.url)
}

// deadLetterQueue is one dead-letter queue recovery reads, and the queues
// whose redrive policies name it.
type deadLetterQueue struct {
	url     string
	sources []sourceQueue
}

// sourceOf returns the URL of the queue m goes back to: the one SQS names
// as its source, when that is one of q's; for a message without a source
// (not moved by SQS, or an emulator that does not say), q's only source.
func (q deadLetterQueue) sourceOf(m types.Message) (string, bool) {
	arn := m.Attributes[string(types.MessageSystemAttributeNameDeadLetterQueueSourceArn)]
	if arn == "" {
		if len(q.sources) == 1 {
			return q.sources[0].url, true
		}
		return "", false
	}
	for _, s := range q.sources {
		if s.is(arn) {
			return s.url, true
		}
	}
	return "", false
}

// deadLetterRead is one sweep's reading of one dead-letter queue.
type deadLetterRead struct {
	deadLetterQueue
	seen map[string]bool
	// kept are the messages it leaves in the queue, still hidden.
	kept    []types.Message
	st      RedriveStats
	started bool
	done    bool
	err     error
}

// RedriveDeadLetters sends the messages SQS moved to the dead-letter
// queues of the work queue and of the named queues back to the queues they
// came from (see the package's dead-letter recovery), with at most
// maxDeadLetterReceives receives of ten messages in all, taken in turn from
// each dead-letter queue, so a busy one does not starve the others. A
// dead-letter queue that cannot be read (or a named queue whose redrive
// policy cannot be read) is counted in Unread and named in the error; the
// others are read all the same. With no dead-letter queue (no
// Config.WorkDLQURL, and no Config.NamedQueues with one) it does nothing.
func (d *Dispatcher) RedriveDeadLetters(ctx context.Context) (RedriveStats, error) {
	var st RedriveStats
	dlqs, errs := d.deadLetterQueues(ctx)
	st.Unread = len(errs)
	if len(dlqs) == 0 {
		return st, errors.Join(errs...)
	}
	client := d.cfg.SQS.(DeadLetterClient) // checked by New
	d.dead.mu.Lock()
	first := d.dead.next % len(dlqs)
	d.dead.mu.Unlock()
	reads := make([]*deadLetterRead, len(dlqs))
	for i := range dlqs {
		reads[i] = &deadLetterRead{deadLetterQueue: dlqs[(first+i)%len(dlqs)], seen: map[string]bool{}}
	}
	reached, receives := 0, 0
read:
	for receives < maxDeadLetterReceives {
		round := 0
		for _, r := range reads {
			switch {
			case r.done:
				continue
			case receives == maxDeadLetterReceives:
				break read
			case context.Cause(ctx) != nil:
				errs = append(errs, context.Cause(ctx))
				break read
			case !d.budgetLeft(ctx):
				d.cfg.Logger.WarnContext(ctx, "dead-letter recovery stopped near the invocation deadline; the next sweep continues")
				break read
			}
			if !r.started {
				r.started = true
				reached++
			}
			receives++
			round++
			d.readDeadLetters(ctx, client, r)
		}
		if round == 0 {
			break // every queue is done
		}
	}
	d.dead.mu.Lock()
	d.dead.next = (first + reached) % len(dlqs)
	d.dead.mu.Unlock()
	for _, r := range reads {
		// What stays is shown again only now: hidden, it let each receive
		// above reach the messages behind it.
		for i := 0; i < len(r.kept); i += 10 {
			r.err = errors.Join(r.err, d.showDeadLetters(ctx, client, r.url, r.kept[i:min(i+10, len(r.kept))]))
		}
		st.Redriven += r.st.Redriven
		st.Left += r.st.Left
		st.Unread += r.st.Unread
		if r.err != nil {
			errs = append(errs, fmt.Errorf("dead-letter queue %s: %w", r.url, r.err))
		}
	}
	return st, errors.Join(errs...)
}

// deadLetterQueues lists the dead-letter queues to read, each once however
// many queues name it: Config.WorkDLQURL's (the default work queue's), then
// those of the named queues, in their order; and an error for each named
// queue whose dead-letter queue could not be found. A named queue without
// a redrive policy has none, and is skipped.
func (d *Dispatcher) deadLetterQueues(ctx context.Context) ([]deadLetterQueue, []error) {
	var (
		list []deadLetterQueue
		errs []error
		at   = map[string]int{}
	)
	add := func(dlqURL string, src sourceQueue) {
		i, ok := at[dlqURL]
		if !ok {
			i = len(list)
			at[dlqURL] = i
			list = append(list, deadLetterQueue{url: dlqURL})
		}
		for j, s := range list[i].sources {
			if s.url == src.url { // the work queue listed as a named queue too
				list[i].sources[j].arn = cmp.Or(s.arn, src.arn)
				return
			}
		}
		list[i].sources = append(list[i].sources, src)
	}
	if d.cfg.WorkDLQURL != "" {
		add(d.cfg.WorkDLQURL, sourceQueue{url: d.cfg.WorkQueueURL})
	}
	for _, ref := range d.cfg.NamedQueues {
		n, err := d.namedDeadLetter(ctx, ref)
		switch {
		case err != nil:
			d.cfg.Logger.WarnContext(ctx, "could not find a named queue's dead-letter queue; the next sweep tries again", "queue", ref, "error", err)
			errs = append(errs, fmt.Errorf("named queue %s: %w", ref, err))
		case n.dlqURL != "":
			add(n.dlqURL, n.source)
		}
	}
	return list, errs
}

// namedDeadLetter returns what is known of the named queue ref (a URL or an
// ARN): kept for namedDeadLetterRefresh once found, read again on every
// call until then.
func (d *Dispatcher) namedDeadLetter(ctx context.Context, ref string) (namedDeadLetter, error) {
	now := d.cfg.Clock.Now()
	d.dead.mu.Lock()
	n, ok := d.dead.named[ref]
	d.dead.mu.Unlock()
	if ok && now.Sub(n.at) < namedDeadLetterRefresh {
		return n, nil
	}
	n, err := d.findNamedDeadLetter(ctx, ref)
	if err != nil {
		return n, err
	}
	n.at = now
	d.dead.mu.Lock()
	if d.dead.named == nil {
		d.dead.named = map[string]namedDeadLetter{}
	}
	d.dead.named[ref] = n
	d.dead.mu.Unlock()
	if n.dlqURL == "" {
		d.cfg.Logger.DebugContext(ctx, "named queue has no dead-letter queue; nothing to recover", "queue", ref)
	}
	return n, nil
}

// arnResolver is the part of *queues.Resolver that finds a queue by its
// ARN, in the ARN's account.
type arnResolver interface {
	URLOf(ctx context.Context, arn string) (string, error)
}

// findNamedDeadLetter reads the URL (for an ARN), the ARN and the redrive
// policy of the named queue ref.
func (d *Dispatcher) findNamedDeadLetter(ctx context.Context, ref string) (namedDeadLetter, error) {
	n := namedDeadLetter{source: sourceQueue{url: ref}}
	if strings.HasPrefix(ref, "arn:") {
		n.source.arn = ref
		var err error
		if r, ok := d.cfg.Queues.(arnResolver); ok {
			n.source.url, err = r.URLOf(ctx, ref)
		} else {
			name, _ := queues.NameFromARN(ref)
			n.source.url, err = d.cfg.Queues.URL(ctx, name)
		}
		if err != nil {
			return n, err
		}
	}
	cctx, cancel := context.WithTimeout(ctx, d.cfg.CallTimeout)
	out, err := d.cfg.SQS.(QueueAttributesClient).GetQueueAttributes(cctx, &sqs.GetQueueAttributesInput{ // checked by New
		QueueUrl:       aws.String(n.source.url),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn, types.QueueAttributeNameRedrivePolicy},
	})
	cancel()
	if err != nil {
		return n, fmt.Errorf("read its redrive policy: %w", err)
	}
	n.source.arn = cmp.Or(out.Attributes[string(types.QueueAttributeNameQueueArn)], n.source.arn)
	raw := out.Attributes[string(types.QueueAttributeNameRedrivePolicy)]
	if raw == "" {
		return n, nil
	}
	var policy struct {
		Target string `json:"deadLetterTargetArn"`
	}
	if err := json.Unmarshal([]byte(raw), &policy); err != nil {
		return n, fmt.Errorf("its redrive policy is not JSON: %w", err)
	}
	name, account := queues.NameFromARN(policy.Target)
	if name == "" {
		return n, fmt.Errorf("its redrive policy names no dead-letter queue: %s", raw)
	}
	if _, own := queues.NameFromARN(n.source.arn); own != "" && own != account {
		return n, fmt.Errorf("its dead-letter queue %s is in another account", policy.Target)
	}
	// SQS keeps a dead-letter queue in its source queue's account and
	// Region, so its URL is the source's with the name changed: no lookup,
	// and no sqs:GetQueueUrl on it.
	u, err := url.Parse(n.source.url)
	if err != nil || u.Path == "" {
		return n, fmt.Errorf("queue URL %q: %w", n.source.url, cmp.Or(err, errors.New("no path")))
	}
	u.Path = path.Join(path.Dir(u.Path), name)
	n.dlqURL = u.String()
	return n, nil
}

// readDeadLetters makes one receive from r's queue: it sends back what SQS
// moved there, deletes what it sent, and keeps the rest hidden in r.kept.
// r is done when the queue gave nothing new, or could not be read.
func (d *Dispatcher) readDeadLetters(ctx context.Context, client DeadLetterClient, r *deadLetterRead) {
	cctx, cancel := context.WithTimeout(ctx, d.cfg.CallTimeout)
	out, err := client.ReceiveMessage(cctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(r.url),
		MaxNumberOfMessages:         10,
		VisibilityTimeout:           deadLetterHold,
		MessageAttributeNames:       []string{"All"},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameDeadLetterQueueSourceArn},
	})
	cancel()
	if err != nil {
		r.done, r.st.Unread = true, 1
		r.err = fmt.Errorf("receive: %w", err)
		return
	}
	if len(out.Messages) == 0 {
		r.done = true
		return
	}
	// A message this sweep saw already (its hold ran out on a slow queue,
	// and it was received again) is only left again.
	var (
		leave, again []types.Message
		order        []string
		back         = map[string][]types.Message{} // by the queue each goes back to
	)
	for _, m := range out.Messages {
		id := aws.ToString(m.MessageId)
		if r.seen[id] {
			again = append(again, m)
			continue
		}
		r.seen[id] = true
		to, ok := d.redriveTo(ctx, r.deadLetterQueue, m)
		if !ok {
			leave = append(leave, m)
			continue
		}
		if _, ok := back[to]; !ok {
			order = append(order, to)
		}
		back[to] = append(back[to], m)
	}
	var done []types.Message
	for _, to := range order {
		msgs := back[to]
		for i, sent := range d.sendBack(ctx, to, msgs) {
			if sent {
				done = append(done, msgs[i])
			} else {
				leave = append(leave, msgs[i])
			}
		}
	}
	r.st.Redriven += len(done)
	r.st.Left += len(leave)
	fresh := len(again) < len(out.Messages)
	r.kept = append(append(r.kept, leave...), again...)
	if err := d.deleteDeadLetters(ctx, client, r.url, done); err != nil {
		r.done, r.err = true, err
		return
	}
	if !fresh {
		r.done = true // the same messages again: every one was seen
	}
}

// redriveTo says whether m, read from q, goes back now, and to which
// queue: it must have been moved there by SQS (no reason from a worker),
// from a queue the dispatcher knows, fewer than MaxDeadLetterRedrives
// times. A message with no room for the leasehold-redrives attribute is
// counted in the store instead (takeRedrive), before it is sent: a send
// that fails then still counts, and the count stays bounded.
func (d *Dispatcher) redriveTo(ctx context.Context, q deadLetterQueue, m types.Message) (string, bool) {
	if _, rejected := m.MessageAttributes[lifecycle.AttrReason]; rejected {
		return "", false
	}
	to, ok := q.sourceOf(m)
	if !ok {
		d.cfg.Logger.DebugContext(ctx, "dead letter from a queue this dispatcher does not know; left there", "message_id", aws.ToString(m.MessageId),
			"dead_letter_queue", q.url, "source", m.Attributes[string(types.MessageSystemAttributeNameDeadLetterQueueSourceArn)])
		return "", false
	}
	if roomForCount(m) {
		return to, redrives(m) < MaxDeadLetterRedrives
	}
	return to, d.takeRedrive(ctx, to, m)
}

// roomForCount reports whether m can carry the leasehold-redrives
// attribute: it has it already, or fewer than SQS's 10 attributes.
func roomForCount(m types.Message) bool {
	_, ok := m.MessageAttributes[AttrRedrives]
	return ok || len(m.MessageAttributes) < MaxMessageAttributes
}

// redrives is how many times m was sent back before, by its attribute.
func redrives(m types.Message) int {
	a, ok := m.MessageAttributes[AttrRedrives]
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(aws.ToString(a.StringValue))
	if err != nil || n < 0 {
		return MaxDeadLetterRedrives // unreadable: leave it to an operator
	}
	return n
}

// takeRedrive counts one more redrive of m, which goes back to the queue
// at to, in the store's redrive count for that queue (its account and
// name) and m's body, and reports
// whether it is within MaxDeadLetterRedrives. Without a store that keeps
// counts, or when the count cannot be written, m stays where it is.
func (d *Dispatcher) takeRedrive(ctx context.Context, to string, m types.Message) bool {
	id := aws.ToString(m.MessageId)
	if d.counter == nil {
		d.cfg.Logger.WarnContext(ctx, "dead letter has no room for its redrive count, and the store keeps none; left there", "message_id", id)
		return false
	}
	sum := sha256.Sum256([]byte(queueIdentity(to) + "\n" + aws.ToString(m.Body)))
	ok, err := d.counter.TakeRedrive(ctx, hex.EncodeToString(sum[:]), MaxDeadLetterRedrives)
	if err != nil {
		d.cfg.Logger.WarnContext(ctx, "could not count a dead letter's redrive; the next sweep tries again", "message_id", id, "error", err)
		return false
	}
	return ok
}

// queueIdentity is the account and name of the queue at queueURL (the
// last two parts of its path, on AWS as on the local stack), so that
// sweepers that spell one queue's URL differently share its counts.
func queueIdentity(queueURL string) string {
	u, err := url.Parse(queueURL)
	if err != nil {
		return queueURL
	}
	dir, name := path.Split(strings.TrimSuffix(u.Path, "/"))
	return path.Base(dir) + "/" + name
}

// sendBack sends msgs to the queue at to, body and attributes as they
// were, with the redrive count one higher where the message has room for
// it, and reports which were sent.
func (d *Dispatcher) sendBack(ctx context.Context, to string, msgs []types.Message) []bool {
	sent := make([]bool, len(msgs))
	entries := make([]types.SendMessageBatchRequestEntry, len(msgs))
	for i, m := range msgs {
		attrs := maps.Clone(m.MessageAttributes)
		if roomForCount(m) {
			if attrs == nil {
				attrs = map[string]types.MessageAttributeValue{}
			}
			attrs[AttrRedrives] = types.MessageAttributeValue{DataType: aws.String("Number"), StringValue: aws.String(strconv.Itoa(redrives(m) + 1))}
		}
		entries[i] = types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: m.Body, MessageAttributes: attrs}
	}
	cctx, cancel := context.WithTimeout(ctx, d.cfg.CallTimeout)
	out, err := d.cfg.SQS.SendMessageBatch(cctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(to), Entries: entries})
	cancel()
	if err != nil {
		d.cfg.Logger.WarnContext(ctx, "could not send dead letters back to their queue; the next sweep tries again", "queue", to, "error", err, "count", len(msgs))
		return sent
	}
	for _, ok := range out.Successful {
		if i, found := entryIndex(ok.Id, len(msgs)); found {
			sent[i] = true
			log := []any{"queue", to, "message_id", aws.ToString(msgs[i].MessageId)}
			if roomForCount(msgs[i]) {
				log = append(log, "redrive", redrives(msgs[i])+1)
			} else {
				log = append(log, "redrive_counted_in", "table")
			}
			d.cfg.Logger.InfoContext(ctx, "dead letter sent back to its queue", log...)
		}
	}
	for _, f := range out.Failed {
		if i, found := entryIndex(f.Id, len(msgs)); found {
			d.cfg.Logger.WarnContext(ctx, "a dead letter was refused by its queue; the next sweep tries again", "queue", to,
				"message_id", aws.ToString(msgs[i].MessageId), "code", aws.ToString(f.Code), "reason", aws.ToString(f.Message))
		}
	}
	return sent
}

// deleteDeadLetters deletes msgs, at most one receive's ten, from the
// dead-letter queue at dlqURL. A copy left undeleted comes back after the
// hold, is sent back again, and its second token is a duplicate the claim
// turns into a no-op.
func (d *Dispatcher) deleteDeadLetters(ctx context.Context, client DeadLetterClient, dlqURL string, msgs []types.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	entries := make([]types.DeleteMessageBatchRequestEntry, len(msgs))
	for i, m := range msgs {
		entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle}
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.CallTimeout)
	defer cancel()
	if _, err := client.DeleteMessageBatch(cctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(dlqURL), Entries: entries}); err != nil {
		return fmt.Errorf("delete what was sent back: %w", err)
	}
	return nil
}

// showDeadLetters makes msgs, at most ten, visible again at once in the
// dead-letter queue at dlqURL, where they stay.
func (d *Dispatcher) showDeadLetters(ctx context.Context, client DeadLetterClient, dlqURL string, msgs []types.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	entries := make([]types.ChangeMessageVisibilityBatchRequestEntry, len(msgs))
	for i, m := range msgs {
		entries[i] = types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle}
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.CallTimeout)
	defer cancel()
	if _, err := client.ChangeMessageVisibilityBatch(cctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(dlqURL), Entries: entries}); err != nil {
		return fmt.Errorf("show what stays: %w", err)
	}
	return nil
}

// counterOf is the store's redrive counts, if it keeps them.
func counterOf(s Store) limiter.RedriveCounter {
	c, _ := s.(limiter.RedriveCounter)
	return c
}
