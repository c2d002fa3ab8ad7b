package lifecycle

import (
	"context"
	"errors"
	"log/slog"
	"slices"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/query"
	"github.com/leasehold/leasehold/internal/queues"
	"github.com/leasehold/leasehold/internal/token"
)

// received is a message's token, decoded once by its batch, and the batch
// listing entry that its inline create records.
type received struct {
	tok     token.Token
	err     error
	created string       // the listed inline task it creates (listedCreate), or ""
	by      query.ListBy // that task's kind and queue
	listing lease.Listing
}

// Prepared is a batch's listing, written ahead of the batch's run
// (Executor.Prepare).
type Prepared struct {
	ids  []string // the batch's message ids, in order
	done chan struct{}
	pre  []received
}

// Prepare starts writing the batch listing entries of msgs (listBatch) in
// a goroutine of its own, so that a batch received ahead of its turn has
// them written while it waits. Only each message's ID, Body and Paused
// are read. ProcessPrepared with the same messages joins it.
func (e *Executor) Prepare(ctx context.Context, log *slog.Logger, msgs []Message) *Prepared {
	p := &Prepared{ids: make([]string, len(msgs)), done: make(chan struct{})}
	for i, m := range msgs {
		p.ids[i] = m.ID
	}
	go func() {
		defer close(p.done)
		p.pre = e.listBatch(ctx, log, msgs)
	}()
	return p
}

// Wait returns when the listing writes Prepare started have ended: for a
// batch that will not be processed (ProcessPrepared waits itself).
func (p *Prepared) Wait() { <-p.done }

// ProcessPrepared is ProcessBatchEach for msgs that p was prepared with
// (the same messages in the same order): it waits for p's listing and
// creates the batch's tasks with it. For other messages it lists them
// itself, as ProcessBatchEach does.
func (e *Executor) ProcessPrepared(ctx context.Context, log *slog.Logger, msgs []Message, p *Prepared, done func(i int, r Result)) []Result {
	if p == nil {
		return e.ProcessBatchEach(ctx, log, msgs, done)
	}
	<-p.done
	if !slices.EqualFunc(p.ids, msgs, func(id string, m Message) bool { return id == m.ID }) {
		return e.ProcessBatchEach(ctx, log, msgs, done)
	}
	return e.processBatch(ctx, log, msgs, p.pre, done)
}

// openListing is the batch listing entry an executor adds later batches'
// tasks to, and how full it is.
type openListing struct {
	l          lease.Listing
	ids, bytes int
}

// minAppend is the fewest tasks a batch adds to an open entry: one write,
// against one index write each for tasks listed on their own.
const minAppend = 2

// listBatch decodes the tokens of msgs and lists the listed inline tasks
// they create (an inline token, not a child's or a chain link's, without
// dependencies or a create token) by batch listing entries, one per kind
// and queue among them (so that the listings by kind and by queue read
// only their own tasks), each written before any of its tasks is created,
// so that the listing indexes take one write per entry instead of one per
// task (docs/performance.md, "Listing"). While the executor's last entry
// of a kind and queue is younger than query.ListingWindow and has room,
// at least minAppend such tasks of the batch are added to it
// (AppendListing, one write and no index write); else at least
// query.MinListing open a new one. It returns nil, and each message
// decodes its own token, when the store writes no entries or the batch
// cannot use one. A task whose entry could not be written, or that too
// few of the batch share a kind and queue with, is created with a listing
// key of its own, as without entries.
func (e *Executor) listBatch(ctx context.Context, log *slog.Logger, msgs []Message) []received {
	lister := e.cfg.caps.lister
	if lister == nil || len(msgs) < minAppend {
		return nil
	}
	if log == nil {
		log = e.cfg.Logger
	}
	pre := make([]received, len(msgs))
	workQueue := queues.NameFromURL(e.cfg.QueueURL)
	var keys []query.ListBy // in the order of their first task
	ids := map[query.ListBy][]string{}
	first := make(map[string]bool, len(msgs))
	for i, m := range msgs {
		tok, err := token.Decode(m.Body)
		pre[i] = received{tok: tok, err: err, created: listedCreate(tok, err, m)}
		if pre[i].created != "" {
			pre[i].by = listedBy(tok, m, workQueue)
		}
		if id, by := pre[i].created, pre[i].by; id != "" && !first[id] {
			first[id] = true
			if _, ok := ids[by]; !ok {
				keys = append(keys, by)
			}
			ids[by] = append(ids[by], id)
		}
	}
	for _, by := range keys {
		if !e.listGroup(ctx, log, lister, by, ids[by], pre) {
			return pre // an unlisted store
		}
	}
	return pre
}

// listGroup lists ids, the batch's tasks of one kind and queue (by), as
// listBatch says, and records the entry in pre. It returns false for a
// store that writes no entries.
func (e *Executor) listGroup(ctx context.Context, log *slog.Logger, lister query.Lister, by query.ListBy, ids []string, pre []received) bool {
	assign := func(l lease.Listing, group []string) {
		for i := range pre {
			if pre[i].created != "" && pre[i].by == by && slices.Contains(group, pre[i].created) {
				pre[i].listing = l
			}
		}
	}
	size := idBytes(ids)

	// The open entry is taken while it is written to, so a batch beside
	// this one opens an entry of its own rather than wait.
	e.listingMu.Lock()
	cur := e.listings[by]
	delete(e.listings, by)
	e.listingMu.Unlock()
	switch {
	case cur == nil || e.cfg.Clock.Since(cur.l.At) >= query.ListingWindow:
	case len(ids) < minAppend:
		e.keepListing(by, cur) // for the next batch
	case cur.ids+len(ids) <= query.MaxListingIDs && cur.bytes+size <= query.MaxListingBytes:
		err := lister.AppendListing(ctx, cur.l, ids)
		if err == nil {
			cur.ids, cur.bytes = cur.ids+len(ids), cur.bytes+size
			assign(cur.l, ids)
			e.keepListing(by, cur)
			return true
		}
		if !errors.Is(err, query.ErrListingFull) && !errors.Is(err, lease.ErrNotFound) {
			log.Warn("could not add the batch's tasks to its listing entry; opening another", "tasks", len(ids), "error", err)
		}
	}
	for _, group := range query.SplitListing(ids) {
		if len(group) < query.MinListing {
			continue
		}
		l, err := lister.WriteListing(ctx, by, group)
		if err != nil {
			log.Warn("could not write the batch's listing entry; its tasks get listing keys of their own", "tasks", len(group), "error", err)
			continue
		}
		if l.ID == "" {
			return false
		}
		assign(l, group)
		e.keepListing(by, &openListing{l: l, ids: len(group), bytes: idBytes(group)})
	}
	return true
}

// keepListing makes o the entry later batches' tasks of by's kind and
// queue are added to, unless a newer one is kept already. Entries past
// query.ListingWindow are let go, so kinds that stop coming keep none.
func (e *Executor) keepListing(by query.ListBy, o *openListing) {
	e.listingMu.Lock()
	defer e.listingMu.Unlock()
	for k, old := range e.listings {
		if e.cfg.Clock.Since(old.l.At) >= query.ListingWindow {
			delete(e.listings, k)
		}
	}
	if e.listings == nil {
		e.listings = map[query.ListBy]*openListing{}
	}
	if cur := e.listings[by]; cur == nil || cur.l.At.Before(o.l.At) {
		e.listings[by] = o
	}
}

// listedBy is the kind and queue of the task m's token creates, as the
// create records them (runReceived's CreateClaimed): the token's queue,
// else, for a token not sent before its create, the queue it came by. The
// default work queue (by its name, workQueue, as a message from it
// records it) is no queue: it has no listing of its own (query.ListBy), so
// its entries cost the listing by queue nothing.
func listedBy(tok token.Token, m Message, workQueue string) query.ListBy {
	queue := tok.Queue
	if queue == "" && tok.CreateToken == "" {
		queue = m.Queue
	}
	if queue == workQueue {
		queue = ""
	}
	return query.ListBy{Kind: tok.Kind, Queue: queue}
}

// listedCreate is the id of the listed inline task that m's token creates
// (runReceived's CreateClaimed), or "". A token sent before its create is
// one only when its sender waits for the worker's create
// (token.CreateFirst); any other is claimed first, its task stored and
// listed by the sender.
func listedCreate(tok token.Token, err error, m Message) string {
	if m.Paused {
		return "" // held back, not created (holdForPause)
	}
	if tok.CreateToken != "" && !token.CreateFirst(tok.CreateToken) {
		return ""
	}
	if err != nil || !tok.Inline() || tok.IsCallback() || len(tok.After) > 0 || tok.Parent != "" || tok.Prev != "" {
		return ""
	}
	id := tok.ID
	if id == "" {
		id = m.ID
	}
	if lease.CheckID(id) != nil {
		return "" // rejected by its create
	}
	return id
}

// idBytes is the bytes of ids, as an entry's bound counts them.
func idBytes(ids []string) int {
	n := 0
	for _, id := range ids {
		n += len(id)
	}
	return n
}
