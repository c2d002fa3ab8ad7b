package leasehold

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/jonboulle/clockwork"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold/internal/awsenv"
	"github.com/leasehold/leasehold/internal/claimcheck"
	"github.com/leasehold/leasehold/internal/defaults"
	"github.com/leasehold/leasehold/internal/durable"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/dynamo"
	"github.com/leasehold/leasehold/internal/lease/query"
	"github.com/leasehold/leasehold/internal/queues"
	"github.com/leasehold/leasehold/internal/submit"
	"github.com/leasehold/leasehold/internal/wiring"
)

// ClientConfig configures a client: the resources it uses and how it
// calls them. Zero fields take the defaults that package settings lists.
// It is defined in internal/wiring, where its fields are documented, so
// that package leaseholdtest can build a Client on its in-memory store
// with NewClient itself.
type ClientConfig = wiring.ClientConfig[EnqueueMiddleware]

type clientOptions struct {
	callTimeout time.Duration
	clock       clockwork.Clock
	maxAttempts int
	endpoint    string
	concurrency int
	unlisted    bool
	waitPoll    time.Duration
	createWait  time.Duration
	// tracer is ClientConfig.TracerProvider's; nil without one.
	tracer trace.Tracer
	// middleware is ClientConfig.Middleware, after the tracer's.
	middleware []EnqueueMiddleware
}

// adminStore lists the lease store calls a client makes; both stores
// satisfy it.
type adminStore = wiring.ClientStore

// Client enqueues, inspects, cancels and retries tasks. It is safe for
// concurrent use.
type Client struct {
	store     adminStore
	sqs       clientSQS
	table     string
	queueName string
	opts      clientOptions

	// region and endpoints name, per SDK service id, where calls go: for
	// errors.
	region    string
	endpoints map[string]string

	// kindQueues is ClientConfig.KindQueues; named resolves queue names
	// other than the default one.
	kindQueues map[string]string
	named      *queues.Resolver

	// claims keeps payloads over the inline limit in the payload bucket
	// and reads back what is kept there; nil without a bucket.
	claims *claimcheck.Checker

	mu       sync.Mutex
	queueURL string // looked up from queueName on first use
}

// NewClient checks cfg and returns a client. It makes no call.
// Its SDK clients use a copy of cfg.AWS whose HTTPClient (nil: the SDK's
// default) is behind GuardHTTP, so no answer the server sent is lost.
func NewClient(cfg ClientConfig) (*Client, error) {
	if cfg.Table == "" {
		return nil, fmt.Errorf("%w: the tasks table name is required", ErrConfig)
	}
	o := clientOptions{
		callTimeout: cmp.Or(cfg.CallTimeout, defaults.ClientCallTimeout),
		maxAttempts: cmp.Or(cfg.MaxAttempts, defaults.MaxAttempts),
		clock:       cfg.Clock,
		endpoint:    cfg.Endpoint,
		concurrency: cfg.EnqueueConcurrency,
		unlisted:    cfg.Unlisted,
		waitPoll:    cmp.Or(cfg.WaitPoll, 2*time.Second),
		createWait:  cfg.CreateWait,
	}
	if o.clock == nil {
		o.clock = clockwork.NewRealClock()
	}
	switch {
	case o.callTimeout <= 0:
		return nil, fmt.Errorf("%w: call timeout must be positive, got %s", ErrConfig, o.callTimeout)
	case o.concurrency < 0:
		return nil, fmt.Errorf("%w: enqueue concurrency cannot be negative", ErrConfig)
	case o.waitPoll < 0:
		return nil, fmt.Errorf("%w: wait poll cannot be negative, got %s", ErrConfig, o.waitPoll)
	case o.createWait < 0:
		return nil, fmt.Errorf("%w: create wait cannot be negative, got %s", ErrConfig, o.createWait)
	case o.maxAttempts < 1 || o.maxAttempts > lease.MaxAttemptsLimit:
		return nil, fmt.Errorf("%w: default max attempts %d is outside 1..%d", ErrConfig, o.maxAttempts, lease.MaxAttemptsLimit)
	}
	for kind, name := range cfg.KindQueues {
		if err := queues.CheckName(name); err != nil {
			return nil, fmt.Errorf("%w: queue of kind %q: %w", ErrConfig, kind, err)
		}
	}
	if b, ok := wiring.ClientBackendOf(cfg); ok {
		c := newClientOn(b.Store, b.SQS, cfg, o)
		if b.Blobs != nil {
			c.claims = &claimcheck.Checker{Blobs: b.Blobs}
		}
		c.traceWith(cfg.TracerProvider)
		return c, nil
	}
	cfg.AWS.HTTPClient = awsenv.GuardHTTP(cfg.AWS.HTTPClient) // cfg is a copy
	ddb := dynamodb.NewFromConfig(cfg.AWS, func(d *dynamodb.Options) {
		if o.endpoint != "" {
			d.BaseEndpoint = aws.String(o.endpoint)
		}
	})
	queue := sqs.NewFromConfig(cfg.AWS, func(q *sqs.Options) {
		if o.endpoint != "" {
			q.BaseEndpoint = aws.String(o.endpoint)
		}
	})
	store := dynamo.New(ddb, cfg.Table, lease.Options{
		Clock:       o.clock,
		CallTimeout: o.callTimeout,
		Unlisted:    o.unlisted,
	})
	c := newClientOn(store, queue, cfg, o)
	if cfg.PayloadBucket != "" {
		c.claims = &claimcheck.Checker{Blobs: &claimcheck.S3{Client: claimcheck.NewS3Client(cfg.AWS, o.endpoint), Bucket: cfg.PayloadBucket}}
	}
	c.region = cfg.AWS.Region
	c.endpoints = map[string]string{
		"DynamoDB": endpointOf(ddb.Options().BaseEndpoint, "dynamodb", cfg.AWS.Region),
		"SQS":      endpointOf(queue.Options().BaseEndpoint, "sqs", cfg.AWS.Region),
	}
	c.traceWith(cfg.TracerProvider)
	return c, nil
}

// newClientOn is NewClient's client on store and q, with cfg's queues and
// the options o checked from it.
func newClientOn(store adminStore, q clientSQS, cfg ClientConfig, o clientOptions) *Client {
	return &Client{
		store:      store,
		sqs:        q,
		table:      cfg.Table,
		queueURL:   cfg.QueueURL,
		queueName:  cfg.QueueName,
		opts:       withMiddleware(o, cfg.Middleware),
		kindQueues: maps.Clone(cfg.KindQueues),
		named:      queues.NewResolver(q, "", o.callTimeout),
	}
}

// withMiddleware is o with its own copy of mws.
func withMiddleware(o clientOptions, mws []EnqueueMiddleware) clientOptions {
	o.middleware = slices.Clone(mws)
	return o
}

// endpointOf is where a client's calls go: its configured base endpoint, or
// the service's regional AWS endpoint.
func endpointOf(base *string, service, region string) string {
	if base != nil && *base != "" {
		return *base
	}
	return "https://" + service + "." + region + ".amazonaws.com"
}

// Link is a task of a chain: see Submission.Then.
type Link struct {
	Kind string
	// Payload is encoded as JSON (a json.RawMessage passes through).
	Payload any
	// ID names the task; empty gives it HEAD#N, where HEAD is the first
	// task's id and N the link's place in the chain (the first task's is
	// 1, so the first link's is 2).
	ID string
	// MaxAttempts: 0 takes the worker's default.
	MaxAttempts int
	// Queue names the link's SQS queue; "" takes the queue of the task
	// before it.
	Queue string
}

// Submission is one task to enqueue: Enqueue takes one, EnqueueMany a
// slice, and a client's EnqueueMiddleware sees them. Only Kind is
// required; the zero value of every other field is its default.
type Submission struct {
	// Kind names the handler that runs the task.
	Kind string
	// Payload is encoded with encoding/json; a json.RawMessage is used as
	// is (it must be valid JSON). nil means no payload.
	Payload any
	// ID names the task; it works like an idempotency key. Enqueueing an
	// id that exists with the same kind and payload is a no-op that returns
	// the stored task with an error matching ErrAlreadyExists, so a retried
	// Enqueue never makes a second task. The same id with another kind or
	// payload is a conflict: the stored task comes back with a
	// *ConflictError matching ErrConflict, and nothing is enqueued. Empty,
	// the client picks a random id; so an id variable that was never set
	// loses the idempotency it was meant to give: check it before. An id is
	// 1..256 bytes of UTF-8 without control, format (such as bidirectional
	// overrides) or separator characters; others give ErrInvalid.
	ID string
	// MaxAttempts bounds the attempts of the task (1..100); 0 takes the
	// client's default (5 unless ClientConfig says otherwise).
	MaxAttempts int
	// Delay makes the task due Delay from now. Delays longer than SQS's 15
	// minutes are kept in the table and dispatched by the sweeper when due.
	// Delay and RunAt are exclusive: setting both is ErrInvalid.
	Delay time.Duration
	// RunAt makes the task due at RunAt (the same rules as Delay, which it
	// excludes); the zero time means now.
	RunAt time.Time
	// Queue sends the task to the SQS queue of that name (a standard queue:
	// 1 to 80 letters, digits, '-' or '_'). Empty takes the kind's queue
	// from ClientConfig.KindQueues, else the default work queue. Its
	// retries, snoozes and sweeps go there too. A queue that does not exist
	// gives an error matching ErrQueueNotFound, and nothing is stored.
	Queue string
	// After makes the task wait, holding no lease, until every task named
	// has SUCCEEDED; if one fails or is cancelled, the task is cancelled
	// with the reason. A task with dependencies starts when they end: it
	// takes no Delay or RunAt.
	After []string
	// AfterAny changes what the task waits for: with it the task runs once
	// every task named in After has ended, whatever the outcome; its
	// handler reads their outcomes with workflow.Dependencies.
	AfterAny bool
	// WaitTimeout bounds how long a task with After waits for its
	// dependencies, from its enqueue (0 is the default of 7 days, at most
	// 365): if they have not all ended by then, the task ends FAILED with
	// the reason. Without After it is ErrInvalid.
	WaitTimeout time.Duration
	// Then makes the task the first of a chain: once it has SUCCEEDED, the
	// first link runs, then the next once that one has SUCCEEDED, and so
	// on; each reads the outcome of the one before with
	// workflow.Dependencies. A chain costs no more than its tasks: each
	// link is created, claimed and run from one inline token the task
	// before it sends when it ends, with no wait, no watch and no wake-up.
	// If a task of the chain does not succeed, its later links are recorded
	// CANCELLED with the reason. At most 25 links, 64 KiB of payloads in
	// all. docs/workflows.md#chains-then.
	Then []Link
	// Metadata is a few strings that travel with the task from the enqueue
	// to every run (HandlerRun.Metadata, for the worker's middleware), are
	// stored on it (TaskInfo.Metadata), and pass on to the children its
	// handler spawns and the links of its chain. Keys are 1 to 64 ASCII
	// letters, digits and '-', '_', '.', ':'; at most 16 entries of at most
	// 512 bytes each, 2 KiB in all (docs/limits.md); metadata that breaks
	// the rules makes the submission ErrInvalid. The client does not write
	// the map. A client's EnqueueMiddleware can add entries to every task
	// (on its own copy); a tracer adds the W3C "traceparent" and
	// "tracestate".
	Metadata map[string]string
}

// links is s.Then as package submit takes it.
func (s Submission) links() []submit.Link {
	out := make([]submit.Link, len(s.Then))
	for i, l := range s.Then {
		out[i] = submit.Link(l)
	}
	return out
}

// EnqueueResult is the outcome of one Submission of EnqueueMany.
type EnqueueResult struct {
	// ID is the task's id (picked by the client when the submission had
	// none); empty only when the submission was rejected before an id was
	// needed.
	ID string
	// Task is the stored task: the new one, or on ErrAlreadyExists and
	// ErrConflict the one that was there. Zero when Err is any other error.
	Task TaskInfo
	// Err is nil, or an error matching ErrAlreadyExists (nothing was
	// enqueued: a task with this id, kind and payload exists), ErrConflict
	// (nothing was enqueued: the id names a task of another kind or
	// payload) or ErrInvalid (the submission breaks a rule); or a
	// *NotSentError (stored, but the dispatch token was not sent); or
	// another failure to store it.
	Err error
}

// BatchOption tunes EnqueueMany.
type BatchOption func(*batchOptions)

type batchOptions struct {
	progress func(done, total int)
}

// OnProgress has EnqueueMany call f after each chunk with how many
// submissions are done (stored, rejected or failed) out of total. Calls come
// from the goroutine that called EnqueueMany, one at a time.
func OnProgress(f func(done, total int)) BatchOption {
	return func(o *batchOptions) { o.progress = f }
}

// Enqueue stores the task s describes and dispatches it, through the
// client's EnqueueMiddleware as EnqueueMany does. The returned TaskInfo
// omits nothing but the result.
func (c *Client) Enqueue(ctx context.Context, s Submission) (TaskInfo, error) {
	res, err := c.EnqueueMany(ctx, []Submission{s})
	if err != nil {
		return TaskInfo{}, err
	}
	return res[0].Task, res[0].Err
}

// EnqueueMany stores and dispatches any number of tasks: it splits them into
// the limits of DynamoDB and SQS and runs a bounded number of calls at once.
// results[i] is the outcome of subs[i]; one submission's failure does not
// stop the others. The error is non-nil only when nothing could be done at
// all, such as an unreachable endpoint or a cancelled ctx; the results then
// say which submissions were done before.
func (c *Client) EnqueueMany(ctx context.Context, subs []Submission, opts ...BatchOption) ([]EnqueueResult, error) {
	mws := c.opts.middleware
	if len(mws) == 0 {
		return c.enqueueMany(ctx, subs, opts...)
	}
	// The middleware may change the submissions: its own copies, so that
	// the caller's slice and maps are never written.
	own := slices.Clone(subs)
	for i := range own {
		own[i].Metadata = maps.Clone(own[i].Metadata)
	}
	next := func(ctx context.Context) ([]EnqueueResult, error) { return c.enqueueMany(ctx, own, opts...) }
	for i := len(mws) - 1; i >= 0; i-- {
		mw, inner := mws[i], next
		next = func(ctx context.Context) ([]EnqueueResult, error) { return mw(ctx, own, inner) }
	}
	return next(ctx)
}

// enqueueMany is EnqueueMany's work.
func (c *Client) enqueueMany(ctx context.Context, subs []Submission, opts ...BatchOption) ([]EnqueueResult, error) {
	var o batchOptions
	for _, opt := range opts {
		opt(&o)
	}
	results := make([]EnqueueResult, len(subs))
	tasks := make([]lease.NewTask, 0, len(subs))
	index := make([]int, 0, len(subs)) // tasks[j] is subs[index[j]]
	now := c.opts.clock.Now()
	for i, s := range subs {
		nt, err := c.newTask(ctx, s, now)
		results[i].ID = nt.ID
		if err != nil {
			results[i].Err = err
			continue
		}
		tasks = append(tasks, nt)
		index = append(index, i)
	}
	done := len(subs) - len(tasks)
	report := func() {
		if o.progress != nil {
			o.progress(done, len(subs))
		}
	}
	if len(tasks) == 0 {
		report()
		return results, nil
	}
	queueURL, err := c.workQueue(ctx)
	if err != nil {
		for _, i := range index {
			results[i].Err = err
		}
		return results, err
	}
	// Every named queue must exist before its tasks are stored: a task on
	// a missing queue would wait in the table for ever.
	tasks, index = c.checkQueues(ctx, tasks, index, results)
	done = len(subs) - len(tasks)
	if len(tasks) == 0 {
		report()
		return results, nil
	}
	for start := 0; start < len(tasks); start += enqueueChunk {
		end := min(start+enqueueChunk, len(tasks))
		out, err := c.dispatch(ctx, queueURL, tasks[start:end])
		if err != nil {
			err = c.translate(ctx, err)
			for j := start; j < len(tasks); j++ {
				results[index[j]].Err = err
			}
			return results, fmt.Errorf("enqueue: %w", err)
		}
		for j, r := range out {
			results[index[start+j]] = r
		}
		done += end - start
		report()
	}
	return results, nil
}

// enqueueChunk is how many tasks go to the dispatcher between progress
// reports: large enough to keep its concurrent calls busy.
const enqueueChunk = 400

// newTask checks a submission and turns it into a task record: the
// client's defaults (queue, id, attempts), then the rules every way of
// enqueueing applies (internal/submit).
func (c *Client) newTask(ctx context.Context, s Submission, now time.Time) (lease.NewTask, error) {
	r := submit.Request{ID: s.ID, Kind: s.Kind, Payload: s.Payload, MaxAttempts: s.MaxAttempts, Queue: s.Queue,
		After: s.After, AfterAny: s.AfterAny, Delay: s.Delay, RunAt: s.RunAt, WaitTimeout: s.WaitTimeout, Then: s.links(),
		Metadata: s.Metadata}
	if c.claims != nil {
		r.Stow = func(id string, payload []byte) ([]byte, error) {
			return c.claims.Stow(ctx, id, claimcheck.WhatPayload, payload, 0)
		}
	}
	if r.Queue == "" {
		r.Queue = c.kindQueues[s.Kind]
	}
	if r.ID == "" {
		r.ID = newTaskID()
	}
	if r.MaxAttempts == 0 {
		r.MaxAttempts = c.opts.maxAttempts
	}
	return submit.NewTask(r, now)
}

// newTaskID returns a random version-4 UUID.
func newTaskID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// Get reads a task, payload, result and history included (a payload or
// result kept in the payload bucket is read from there).
func (c *Client) Get(ctx context.Context, id string) (TaskInfo, error) {
	t, err := c.get(ctx, id)
	if err != nil {
		return TaskInfo{}, err
	}
	if t, err = c.fetch(ctx, t); err != nil {
		return c.view(t), err
	}
	return c.view(t), nil
}

// fetch is t with its payload and result read back from the payload
// bucket when they are kept there; no call for a task that keeps them
// inline.
func (c *Client) fetch(ctx context.Context, t lease.Task) (lease.Task, error) {
	var err error
	if claimcheck.IsRef(t.Payload) {
		if t.Payload, err = c.claims.Fetch(ctx, t.Payload); err != nil {
			return t, fmt.Errorf("payload of task %s: %w", lease.DisplayID(t.ID), err)
		}
	}
	if claimcheck.IsRef(t.Result) {
		if t.Result, err = c.claims.Fetch(ctx, t.Result); err != nil {
			return t, fmt.Errorf("result of task %s: %w", lease.DisplayID(t.ID), err)
		}
	}
	return t, nil
}

// get reads the task id from the store, its errors translated.
func (c *Client) get(ctx context.Context, id string) (lease.Task, error) {
	if err := lease.CheckID(id); err != nil {
		return lease.Task{}, err
	}
	t, err := c.store.Get(ctx, id)
	if err != nil {
		return lease.Task{}, c.translate(ctx, err)
	}
	return t, nil
}

// ListOptions selects a page of tasks.
type ListOptions struct {
	// Status selects the tasks with this status; empty lists every status
	// in lifecycle order (PENDING first).
	Status Status
	// Limit bounds the page (default 100, at most 1000).
	Limit int
	// Kind, when set, lists only the tasks of this kind, read from the
	// listing by kind: a rare kind costs the reads of its own tasks, not
	// of every task of the status.
	Kind string
	// Queue, when set, lists only the tasks of the queue of this name,
	// read from the listing by queue. The default work queue has no
	// listing of its own (most tasks go to it): naming it is an error;
	// list without Queue and keep the tasks whose Queue is empty.
	Queue string
	// Cursor continues from a previous Page.Next; it is only valid with the
	// same Status, Kind and Queue.
	Cursor string
	// StopBy, when set, is when the page should have answered: the listing
	// makes no read it expects to end past it (at the pace of its slowest
	// read so far) and ends the page short, with a Next to go on from. The
	// page's first read is always made. A context deadline does the same,
	// but also cuts off the calls under way.
	StopBy time.Time
}

// Page is one page of List.
type Page struct {
	// Tasks are newest first within each status. Payload, Result and
	// History are left out: Get has them.
	Tasks []TaskInfo
	// Next is the cursor of the next page; empty on the last page.
	Next string
}

// listCursor is what a Page.Next encodes: where in the status sequence the
// listing stands, and the store's cursor within that status.
type listCursor struct {
	Status int    `json:"s"`
	Inner  string `json:"c,omitempty"`
}

// List returns a page of tasks. Page through with Page.Next until it is
// empty; a task that changes status between pages may be seen twice or not
// at all, as with any paged listing of live data. A task started by
// another (a child, a chain's later link) is listed under it (Children)
// and has an entry of its own only once it has failed or been cancelled.
// With ListOptions.StopBy or a deadline on ctx, a page that would read
// past it (a rare status behind many tasks of others) ends short, with a
// Next to go on from, instead of failing.
func (c *Client) List(ctx context.Context, o ListOptions) (Page, error) {
	ctx = query.WithStopBy(ctx, o.StopBy)
	limit := o.Limit
	switch {
	case limit == 0:
		limit = defaults.ListLimit
	case limit < 0 || limit > query.MaxListLimit:
		return Page{}, invalidOption("list limit %d is outside 1..%d", limit, query.MaxListLimit)
	}
	by := query.ListBy{Kind: o.Kind, Queue: o.Queue}
	if by.Queue != "" && by.Queue == c.workQueueName() {
		return Page{}, invalidOption("list queue %q is the default work queue, which has no listing of its own: list without a queue and keep the tasks whose Queue is empty", by.Queue)
	}
	statuses := Statuses()
	if o.Status != "" {
		s, err := ParseStatus(string(o.Status))
		if err != nil {
			return Page{}, err
		}
		statuses = []Status{s}
	}
	var cur listCursor
	if o.Cursor != "" {
		var err error
		if cur, err = decodeListCursor(o.Cursor, len(statuses)); err != nil {
			return Page{}, err
		}
	}
	var page Page
	var last time.Duration // the time of the last store call, zero before the first
	for cur.Status < len(statuses) && len(page.Tasks) < limit {
		if last > 0 && query.Stopping(ctx, last) {
			break // no time left for the next status's first read
		}
		want := limit - len(page.Tasks)
		at := time.Now()
		tasks, next, err := c.store.ListBy(ctx, lease.Status(statuses[cur.Status]), by, want, cur.Inner)
		last = time.Since(at)
		if err != nil {
			if errors.Is(err, query.ErrBadCursor) {
				return Page{}, invalidOption("%w", err)
			}
			return Page{}, c.translate(ctx, err)
		}
		for _, t := range tasks {
			page.Tasks = append(page.Tasks, c.view(t))
		}
		if next != "" {
			cur.Inner = next
			if len(tasks) < want {
				break // the store stopped for the stop-by time or the deadline: a short page
			}
			continue
		}
		cur = listCursor{Status: cur.Status + 1}
	}
	if cur.Status < len(statuses) {
		page.Next = cur.encode()
	}
	return page, nil
}

func (c listCursor) encode() string {
	raw, _ := json.Marshal(c) // a struct of an int and a string always encodes
	return base64.RawURLEncoding.EncodeToString(raw)
}

// decodeListCursor reads a Page.Next of a listing over statuses statuses.
// The store's cursor inside is checked by the store.
func decodeListCursor(s string, statuses int) (listCursor, error) {
	var cur listCursor
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || json.Unmarshal(raw, &cur) != nil || cur.Status < 0 || cur.Status >= statuses {
		return listCursor{}, invalidOption("list cursor was not issued for this listing")
	}
	return cur, nil
}

// Cancel cancels a task. No other writer can make it fail: workers
// claiming, renewing, releasing or suspending the task meanwhile, however
// many, do not make it give up (docs/states.md, "What a cancel
// guarantees"). It takes effect by setting the task's cancel flag
// (TaskInfo.CancelRequested), after which no attempt claimed later runs
// the handler. A PENDING or WAITING task becomes CANCELLED at once and never
// runs (a parent waiting for its children takes them with it). A RUNNING
// task is marked: its worker cancels the handler's context (cause
// ErrCancelRequested) at its next lease renewal, and the task ends
// CANCELLED unless the handler finished first; a handler that returns
// asking to run again (an error to retry, a snooze) before that renewal is
// cancelled instead. Only if other writers keep moving a PENDING or WAITING
// task without claiming it, which no worker does, is it returned flagged
// and still PENDING or WAITING: the worker that next takes it cancels it.
// A task that already ended gives an error matching ErrFinished. A cancel
// that failed while it cancelled the children of a parent it had ended can
// be repeated: the repeat cancels the children that are left, then gives
// ErrFinished.
func (c *Client) Cancel(ctx context.Context, id string) (TaskInfo, error) {
	// A parent that waits for its children has them cancelled first, so
	// that no child is created or started after its parent ended: a child
	// whose token is still on a queue gets a CANCELLED item naming the
	// parent, which the token finds when it comes.
	cur, err := c.get(ctx, id)
	if err != nil {
		return TaskInfo{}, err
	}
	var endedKids []lease.Task
	children := func(p lease.Task) error {
		err := lease.CancelChildren(ctx, c.store, p, lease.ParentEndedReason(p.ID, lease.StatusCancelled, ""),
			func(k lease.Task) { endedKids = append(endedKids, k) })
		if err != nil {
			return fmt.Errorf("cancel %s: %w", lease.DisplayID(id), c.translate(ctx, err))
		}
		return nil
	}
	switch {
	case len(lease.UnendedChildren(cur)) > 0:
		if err := children(cur); err != nil {
			return c.view(cur), err
		}
	case cur.Status == lease.StatusWaiting && len(lease.UnendedChildren(durable.RacedKids(cur))) > 0:
		// A child raced against the callback it waits for is its child
		// too.
		if err := children(durable.RacedKids(cur)); err != nil {
			return c.view(cur), err
		}
	case cur.Status == lease.StatusCancelled && cur.Wait == lease.WaitChildren:
		// Cancelled while it waited for its children, perhaps by a
		// cancel that failed on them after ending it (below): cancel
		// those that are left, so that none whose token is still queued
		// runs. Those already cancelled are found so.
		waiting := cur
		waiting.Status = lease.StatusWaiting
		if err := children(waiting); err != nil {
			return c.view(cur), err
		}
	}
	t, err := c.store.RequestCancel(ctx, id)
	if err != nil {
		return TaskInfo{}, c.translate(ctx, err)
	}
	if t.Status == lease.StatusCancelled {
		if t.Wait == lease.WaitChildren && cur.Wait != lease.WaitChildren {
			// It suspended for its children between the read and the
			// cancel (their tokens were sent before), and the cancel
			// ended it: cancel them now. Should that fail, a repeat of
			// this cancel does it (above).
			waiting := t
			waiting.Status = lease.StatusWaiting
			if err := children(waiting); err != nil {
				return c.view(t), err
			}
		}
		// The tasks waiting for it, and for the children cancelled
		// outright, hear of their ends.
		c.wakeWaiters(ctx, t)
	}
	for _, k := range endedKids {
		c.wakeWaiters(ctx, k)
	}
	return c.view(t), nil
}

// Retry puts a FAILED or CANCELLED task back to PENDING, due now, with
// extraAttempts more attempts (1..100; 0 grants one); its attempt count
// and history are kept. Any other status gives an error matching
// ErrNotRetryable. The task is dispatched at once when the client has a
// work queue; if that send fails, or without a queue, the sweeper
// dispatches it.
func (c *Client) Retry(ctx context.Context, id string, extraAttempts int) (TaskInfo, error) {
	if extraAttempts == 0 {
		extraAttempts = 1
	}
	if extraAttempts < 1 || extraAttempts > lease.MaxAttemptsLimit {
		return TaskInfo{}, invalidOption("extra attempts %d is outside 1..%d", extraAttempts, lease.MaxAttemptsLimit)
	}
	if err := lease.CheckID(id); err != nil {
		return TaskInfo{}, err
	}
	t, err := c.store.Retry(ctx, id, extraAttempts)
	if err != nil {
		return TaskInfo{}, c.translate(ctx, err)
	}
	// The task is safely PENDING and in the sweep index, so a failed send
	// only delays it until the sweep; it is not the caller's error.
	if queueURL, err := c.queueOf(ctx, t.Queue); err == nil {
		_ = c.sendRef(ctx, queueURL, id)
	}
	return c.view(t), nil
}

// Wait reads the task until it reaches a terminal status and returns it,
// result included; the pause between reads starts at 100ms and doubles up
// to ClientConfig.WaitPoll (2s unless set). When ctx ends first it returns
// the task as last read and an error wrapping ctx's cause: give it a
// deadline.
func (c *Client) Wait(ctx context.Context, id string) (TaskInfo, error) {
	maxPause := c.opts.waitPoll
	pause := min(100*time.Millisecond, maxPause)
	var last TaskInfo
	for {
		info, err := c.Get(ctx, id)
		switch {
		case err != nil && ctx.Err() != nil && last.ID != "":
			return last, fmt.Errorf("wait for task %s (%s): %w", id, last.Status, context.Cause(ctx))
		case err != nil:
			return TaskInfo{}, err
		case info.Status.Terminal():
			return info, nil
		}
		last = info
		timer := c.opts.clock.NewTimer(pause)
		select {
		case <-ctx.Done():
			timer.Stop()
			return info, fmt.Errorf("wait for task %s (%s): %w", id, info.Status, context.Cause(ctx))
		case <-timer.Chan():
		}
		pause = min(pause*2, maxPause)
	}
}

// Result waits for the task (see Wait) and decodes its result into R. A task
// that ended FAILED or CANCELLED gives a *TaskError, whose Status says
// which.
func Result[R any](ctx context.Context, c *Client, id string) (R, error) {
	var r R
	info, err := c.Wait(ctx, id)
	if err != nil {
		return r, err
	}
	if info.Status != StatusSucceeded {
		return r, &TaskError{ID: id, Status: info.Status, Message: info.Error}
	}
	if len(info.Result) > 0 {
		if err := json.Unmarshal(info.Result, &r); err != nil {
			return r, fmt.Errorf("decode result of task %s into %T: %w", id, r, err)
		}
	}
	return r, nil
}
