package lease

import (
	"fmt"
	"hash/fnv"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/leasehold/leasehold/internal/metadata"
	"github.com/leasehold/leasehold/internal/queues"
)

// Status is where a task stands in its lifecycle. The values are stored
// verbatim in the table's status attribute.
type Status string

const (
	StatusPending   Status = "PENDING"
	StatusRunning   Status = "RUNNING"
	StatusSucceeded Status = "SUCCEEDED"
	StatusFailed    Status = "FAILED"
	StatusCancelled Status = "CANCELLED"
)

// Statuses lists every status in lifecycle order.
var Statuses = []Status{StatusPending, StatusRunning, StatusWaiting, StatusSucceeded, StatusFailed, StatusCancelled}

// Terminal reports whether no further attempt will be made without an
// explicit retry.
func (s Status) Terminal() bool {
	return s == StatusSucceeded || s == StatusFailed || s == StatusCancelled
}

// Valid reports whether s is one of the known statuses.
// Unsuccessful reports whether s is an end other than SUCCEEDED: FAILED or
// CANCELLED.
func (s Status) Unsuccessful() bool { return s.Terminal() && s != StatusSucceeded }

func (s Status) Valid() bool {
	for _, v := range Statuses {
		if s == v {
			return true
		}
	}
	return false
}

// Limits enforced by the store and by everything that feeds it. DynamoDB caps
// an item at 400 KB (MaxItemBytes); these limits all at once (payload,
// result, error, history, steps, waits) stay inside it with ItemMarginBytes
// to spare, so no write within them fails for the item's size. A test
// builds that worst-case item and measures it; docs/limits.md lists them.
const (
	// MaxPayloadBytes is the largest payload a task may carry.
	MaxPayloadBytes = 128 << 10
	// MaxResultBytes is the largest result a handler may record.
	MaxResultBytes = 64 << 10
	// MaxErrorBytes bounds a stored error message; longer ones are cut.
	MaxErrorBytes = 2 << 10
	// MaxHistoryErrorBytes bounds the error of each history entry (the
	// task's current error keeps MaxErrorBytes): 50 entries of 2 KiB
	// would take a quarter of the item.
	MaxHistoryErrorBytes = 512
	// MaxIDBytes bounds a task id (see CheckID for the characters it may
	// hold).
	MaxIDBytes = 256
	// MaxKindBytes bounds a task kind.
	MaxKindBytes = 128
	// MaxAttemptsLimit is the largest max_attempts a task may ask for.
	MaxAttemptsLimit = 100
	// MaxHistory is how many history entries a task keeps: the newest ones.
	// Snoozes hand their attempt back and do not count against
	// max_attempts, so without this bound a task that keeps snoozing would
	// grow its item past DynamoDB's 400 KB and then fail every write.
	// Task.HistoryDropped counts the entries let go.
	MaxHistory = 50
	// ShardCount is the number of shards of the sparse sweep index and of
	// the listing index. Shards spread writes so no partition runs hot.
	ShardCount = 16
)

// Task is one task record: one item in the tasks table.
type Task struct {
	ID          string
	Kind        string
	Payload     []byte // JSON document as submitted
	Status      Status
	Attempt     int // attempts started so far (incremented by every claim)
	MaxAttempts int
	LeaseOwner  string
	LeaseUntil  time.Time
	// Fence is the fencing token: it grows by one with every successful
	// claim, so a write fenced on an older value can never land.
	Fence           int64
	RunAt           time.Time // earliest start
	Result          []byte    // JSON document returned by the handler
	Error           string    // last error
	CancelRequested bool
	// Spilled says the inline steps are frozen (Store.Spill): the history
	// goes on past Steps in step items (Store.ReadSteps from len(Steps)).
	// (Beside CancelRequested, in its padding: the executor's record keeps
	// a Task and its size class.)
	Spilled bool
	// Run counts the workflow's continue-as-new (Release.Continue): 0 for
	// its first run, n for the run that followed n of them. The ended runs
	// are archived as tasks of their own (RunID). (An int32 beside the
	// bool, in its padding: the executor's record keeps its size class.)
	Run        int32
	CreatedAt  time.Time
	UpdatedAt  time.Time
	FinishedAt time.Time
	ExpiresAt  time.Time // DynamoDB TTL; zero when the record is kept
	// DispatchAt is set while the task sits in the sparse sweep index: the
	// time after which the sweeper treats the task as having no live
	// message and dispatches it again. Zero when the task is not indexed.
	DispatchAt time.Time
	// History holds one entry per ended attempt, oldest first: the newest
	// MaxHistory of them.
	History []Attempt
	// HistoryDropped counts the oldest history entries dropped to keep
	// MaxHistory.
	HistoryDropped int
	// Snoozes counts the attempts that ended in a snooze (a release that
	// handed its attempt back).
	Snoozes int
	// Queue is the name of the SQS queue the task's tokens go to: its
	// retries, snoozes and sweeps. Empty means the default work queue.
	Queue string
	// UnknownKindSince is when a worker first found no handler for the
	// task's kind, in the current run of such findings: set by the first
	// release with Release.UnknownKind, cleared by any other ending. Zero
	// when the last attempt found a handler.
	UnknownKindSince time.Time

	// Parent is the task that spawned this one (a child), or "".
	Parent string
	// Waiters are the tasks to notify when this one ends: its parent and
	// the tasks that run after it.
	Waiters []Waiter
	// Wait is what the task waits for while WAITING, and after it resumes
	// what it last waited for ("" when it never waited).
	Wait WaitMode
	// WaitFor lists the tasks waited for (children in spawn order, or
	// dependencies); it is kept after the resume, for the handler.
	WaitFor []string
	// Ended lists the tasks of WaitFor known to have ended (cleared by the
	// resume).
	Ended []string
	// WaitUntil is the wait's deadline (every wait has one; items
	// suspended by older versions may have none for children).
	WaitUntil time.Time
	// CallbackHash is CallbackHash of the secret of a callback wait's
	// token; the secret itself is not stored.
	CallbackHash string
	// CallbackStep names the step a resumable callback wait records its
	// answer as (Wait.Step); "" for a callback that ends the task.
	CallbackStep string
	// HeartbeatTimeout is a callback wait's heartbeat timeout
	// (Wait.Heartbeat); zero for a wait without heartbeats. With
	// BeatUntil it is meaningful only while the task waits for a
	// callback (a later suspension sets or clears both).
	HeartbeatTimeout time.Duration
	// BeatUntil is when a callback wait with a heartbeat timeout ends
	// unless a heartbeat comes first: its suspension plus the timeout,
	// moved to the last beat plus the timeout by each beat (BeatCallback).
	// The wait's effective deadline is the earlier of it and WaitUntil
	// (Task.CallbackDeadline).
	BeatUntil time.Time
	// WaitNote is the last suspension's Wait.Note, kept after the resume
	// for the handler.
	WaitNote string
	// Steps are the handler's checkpointed steps, oldest first: the
	// history's inline head.
	Steps []Step
	// Then are the chain's links after this task (NewTask.Then): the first
	// runs once this task has SUCCEEDED, carrying the rest.
	Then []Link
	// Metadata is the task's metadata (package metadata) as it was
	// enqueued: nil when it has none.
	Metadata map[string]string
	// ListedIn is the batch listing entry that lists the task while it has
	// no listing key of its own (listing.go); empty otherwise.
	ListedIn string
}

// Lease is what a holder needs to renew, finish or release a task: every one
// of those writes is conditional on the owner and the fencing token.
type Lease struct {
	TaskID string
	Owner  string
	Fence  int64
	// Attempt is the task's attempt number under this lease. The ending
	// writes record it in the history entry they append (DynamoDB cannot
	// copy the stored attempt into a new list element), so a lease must come
	// from Task.LeaseOf.
	Attempt int
	Until   time.Time

	// history is the task's history when the lease was taken (the holder
	// read it with the claim, and nothing else appends to it while the lease
	// is held): the ending write needs it to drop the oldest entries.
	history      []Attempt
	historyKnown bool
	// listedIn: the task is listed only by a batch listing entry, so the
	// writes that park it give it a listing key of its own.
	listedIn bool
}

// LeaseOf returns the lease t is currently held under.
func (t Task) LeaseOf() Lease {
	return Lease{
		TaskID: t.ID, Owner: t.LeaseOwner, Fence: t.Fence, Attempt: t.Attempt, Until: t.LeaseUntil,
		history: t.History, historyKnown: true, listedIn: t.ListedIn != "",
	}
}

// KnownHistory is the task's history when the lease was taken, and whether
// it is known (a lease from Task.LeaseOf): an ending write needs it to drop
// the oldest entries past MaxHistory.
func (l Lease) KnownHistory() (history []Attempt, known bool) { return l.history, l.historyKnown }

// ListedByEntry says the task is listed only by a batch listing entry, so
// the writes that park it give it a listing key of its own.
func (l Lease) ListedByEntry() bool { return l.listedIn }

// Validate checks that l can be the lease of a claimed task.
func (l Lease) Validate() error {
	switch {
	case l.TaskID == "":
		return fmt.Errorf("%w: lease has no task id", ErrInvalid)
	case l.Fence < 1 || l.Attempt < 1:
		return fmt.Errorf("%w: lease of %s has fence %d, attempt %d: take it from Task.LeaseOf", ErrInvalid, l.TaskID, l.Fence, l.Attempt)
	}
	return nil
}

// Attempt records how one attempt ended.
type Attempt struct {
	Attempt int
	Fence   int64
	Status  Status // status the attempt left the task in
	Error   string
	At      time.Time
}

// NewTask is a submission: what Create and CreateClaimed need.
type NewTask struct {
	ID          string
	Kind        string
	Payload     []byte
	MaxAttempts int
	RunAt       time.Time // zero means now
	// DispatchAt is when the task enters the sweep index; zero means RunAt
	// plus the store's dispatch grace. A task due beyond SQS's delay cap
	// gets no message at once: its DispatchAt is its RunAt, and the sweep
	// dispatches it then.
	DispatchAt time.Time
	// Queue names the SQS queue the task's tokens go to (see Task.Queue);
	// empty for the default work queue.
	Queue string
	// Carried says a message already on the task's queue carries its
	// dispatch (a token sent before the create, which can create the task
	// itself): the task gets no sweep entry, so the create moves no sweep
	// key. DispatchAt must then be zero.
	Carried bool
	// CreateToken, when set, names this create across processes: a create
	// or CreateClaimed that finds the id taken by an item written with the
	// same token reports success, because that item is this very task,
	// written by the other holder of the token (the worker that received a
	// token sent before the create, or an earlier try whose answer was
	// lost). Empty: each call uses a token of its own.
	CreateToken string
	// Parent makes the task a child of that task: it is notified (a
	// WaitChildren waiter) when the task ends.
	Parent string
	// After creates the task WAITING until every one of these tasks has
	// SUCCEEDED (cancelled if one does not), or, with AfterAny, has ended.
	// The tasks are not told by the create: the creator registers the new
	// task on each (Store.Watch).
	After    []string
	AfterAny bool
	// WaitUntil is the deadline of the wait for After (zero:
	// DefaultWaitTimeout from the create); at it the task fails.
	WaitUntil time.Time
	// Then are the links of a chain that follow this task (see Link).
	Then []Link
	// Metadata is the task's metadata (Task.Metadata), within the bounds
	// of package metadata.
	Metadata map[string]string
	// Prev is the chain link before this task, which has SUCCEEDED: the
	// task records it as its dependency (Wait WaitAfter, WaitFor [Prev])
	// without waiting, so its handler reads its outcome as a dependent's.
	Prev string
	// Listing, when set, is the batch listing entry written for this task
	// (Lister.WriteListing): the create records it instead of a listing key
	// of the task's own, and takes its time as the task's CreatedAt. Ignored
	// for a derived task and on a store whose tasks are unlisted.
	Listing Listing
}

// Derived says the task is started by another task, a child (Parent) or a
// chain's link (Prev), rather than enqueued from outside: it is listed
// under the task that started it, and gets a listing entry of its own only
// if it ends otherwise than SUCCEEDED (see Store.List).
func (n NewTask) Derived() bool { return n.Parent != "" || n.Prev != "" }

// MaxCreateTokenBytes bounds NewTask.CreateToken.
const MaxCreateTokenBytes = 64

// Validate checks the submission against the store's limits.
func (n NewTask) Validate() error {
	switch {
	case CheckID(n.ID) != nil:
		return CheckID(n.ID)
	case n.Kind == "":
		return fmt.Errorf("%w: kind is required", ErrInvalid)
	case len(n.Kind) > MaxKindBytes:
		return fmt.Errorf("%w: kind is %d bytes, the limit is %d", ErrInvalid, len(n.Kind), MaxKindBytes)
	case len(n.Payload) > MaxPayloadBytes:
		return &TooLargeError{What: "payload", Size: len(n.Payload), Limit: MaxPayloadBytes}
	case !utf8.Valid(n.Payload):
		return fmt.Errorf("%w: payload is not UTF-8 text", ErrInvalid)
	case n.MaxAttempts < 1 || n.MaxAttempts > MaxAttemptsLimit:
		return fmt.Errorf("%w: max attempts %d is outside 1..%d", ErrInvalid, n.MaxAttempts, MaxAttemptsLimit)
	case n.Queue != "" && queues.CheckName(n.Queue) != nil:
		return fmt.Errorf("%w: queue: %w", ErrInvalid, queues.CheckName(n.Queue))
	case n.Carried && !n.DispatchAt.IsZero():
		return fmt.Errorf("%w: a carried task has no dispatch time", ErrInvalid)
	case len(n.CreateToken) > MaxCreateTokenBytes:
		return fmt.Errorf("%w: create token is %d bytes, the limit is %d", ErrInvalid, len(n.CreateToken), MaxCreateTokenBytes)
	case n.Parent != "" && CheckID(n.Parent) != nil:
		return fmt.Errorf("%w: parent: %w", ErrInvalid, CheckID(n.Parent))
	case len(n.After) > MaxAfter:
		return fmt.Errorf("%w: %d dependencies, the limit is %d", ErrInvalid, len(n.After), MaxAfter)
	case n.AfterAny && len(n.After) == 0:
		return fmt.Errorf("%w: after-any needs dependencies", ErrInvalid)
	case !n.WaitUntil.IsZero() && len(n.After) == 0:
		return fmt.Errorf("%w: a wait deadline needs dependencies", ErrInvalid)
	case n.Prev != "" && (CheckID(n.Prev) != nil || len(n.After) > 0 || n.Parent != ""):
		return fmt.Errorf("%w: a chain link's predecessor must be a valid id, with no dependencies and no parent", ErrInvalid)
	}
	if p := metadata.Problem(n.Metadata); p != "" {
		return fmt.Errorf("%w: metadata %s", ErrInvalid, p)
	}
	if err := CheckThen(n.ID, n.Then); err != nil {
		return err
	}
	for i, id := range n.After {
		switch {
		case CheckID(id) != nil:
			return fmt.Errorf("%w: dependency: %w", ErrInvalid, CheckID(id))
		case id == n.ID:
			return fmt.Errorf("%w: task %s depends on itself", ErrInvalid, id)
		case slices.Contains(n.After[:i], id):
			return fmt.Errorf("%w: dependency %s is named twice", ErrInvalid, id)
		}
	}
	return nil
}

// WaitModeOf is the wait of a task created from n with dependencies.
func (n NewTask) WaitModeOf() WaitMode {
	if n.AfterAny {
		return WaitAfterAny
	}
	return WaitAfter
}

// CheckResult checks a handler's result against the store's limits: it is
// kept as text, so it must be UTF-8 and at most MaxResultBytes long.
func CheckResult(result []byte) error {
	if len(result) > MaxResultBytes {
		return &TooLargeError{What: "result", Size: len(result), Limit: MaxResultBytes}
	}
	if !utf8.Valid(result) {
		return fmt.Errorf("%w: result is not UTF-8 text", ErrInvalid)
	}
	return nil
}

// Shard returns the shard ("00".."15") a task id belongs to in the sharded
// indexes. It is a pure function of the id, so every writer agrees.
func Shard(id string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	return fmt.Sprintf("%02d", h.Sum32()%ShardCount)
}

// Shards lists every shard name.
func Shards() []string {
	out := make([]string, ShardCount)
	for i := range out {
		out[i] = fmt.Sprintf("%02d", i)
	}
	return out
}

// Truncate cuts s to at most n bytes without splitting a UTF-8 sequence.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut]
}

// SuspendReplaces says whether entry, appended to history, replaces the
// last entry: both are WAITING entries of the same attempt.
func SuspendReplaces(history []Attempt, entry Attempt) bool {
	n := len(history)
	return n > 0 && entry.Status == StatusWaiting && history[n-1].Status == StatusWaiting && history[n-1].Attempt == entry.Attempt
}

// MaxItemBytes is DynamoDB's limit on an item: 400 KB, attribute names
// included. ItemMarginBytes is kept free of the per-field limits for
// bookkeeping attributes (call stamps and the like).
const (
	MaxItemBytes    = 400 << 10
	ItemMarginBytes = 8 << 10
)

// Millis drops what the table cannot store below a millisecond (times are
// stored as unix milliseconds), so a time computed before a write compares
// equal to the one read back.
func Millis(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return time.UnixMilli(t.UnixMilli()).UTC()
}
