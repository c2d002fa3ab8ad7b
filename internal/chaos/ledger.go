package chaos

import (
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/leasehold/leasehold/internal/lease/limiter"
)

// Write is one write to the tasks table that the emulator applied (it
// answered 200), as seen on the wire by a Proxy: the item's state right
// after the write. It was applied at some instant in [Forwarded, Answered].
type Write struct {
	Task       string
	Op         string // "PutItem" or "UpdateItem"
	Status     string // status the write left the task in
	Fence      int64
	Attempt    int
	Owner      string    // lease owner after the write; empty once it ended
	LeaseUntil time.Time // zero once the attempt ended
	Forwarded  time.Time
	Answered   time.Time
	Dropped    bool   // the answer never reached the worker
	Worker     string // the worker that made the call (its SDK app id)
	// FromWaiting: the write was conditional on the task being WAITING
	// (a resume, a callback's end of a wait, a dependency's cancellation).
	FromWaiting bool
	// Steps names the task's recorded steps after the write, in order.
	Steps []string
	// CancelRequested: the task carries a cancel request after the write.
	CancelRequested bool
	// Error is the task's error after the write (a held task's says why).
	Error string
}

// Delivery is one message handed to a worker by an applied ReceiveMessage.
type Delivery struct {
	MessageID     string
	ReceiptHandle string
	Task          string // the id in the token, if it names one
	ReceiveCount  int    // ApproximateReceiveCount, 0 when absent
	Worker        string
	Answered      time.Time
	Dropped       bool
}

// Deletion is one receipt handle deleted by an applied DeleteMessage or
// successful DeleteMessageBatch entry.
type Deletion struct {
	ReceiptHandle string
	Worker        string
	Forwarded     time.Time
	Answered      time.Time
}

// Start is one start a rate window gave (limiter.RateLimiter's TakeStart:
// an UpdateItem of the window's item that the emulator applied).
type Start struct {
	Window    string // the window item's id
	Worker    string
	Forwarded time.Time
	Answered  time.Time
	Dropped   bool // the answer never reached the worker (its retry may count again)
}

// Ledger collects the applied writes to one table from the proxies' Observe
// callbacks. It is safe for concurrent use.
type Ledger struct {
	table string

	mu         sync.Mutex
	writes     []Write
	starts     []Start
	deliveries []Delivery
	deletions  []Deletion
	rejected   int // conditional failures and other non-200 answers
	unknown    int // forwarded writes whose answer never came: applied or not, unknown
}

// NewLedger returns a ledger of the writes to table.
func NewLedger(table string) *Ledger { return &Ledger{table: table} }

const (
	dynamoPrefix = "DynamoDB_20120810."
	sqsPrefix    = "AmazonSQS."
)

// workerOf reads the worker's name from the "app/<name>" part of the SDK's
// User-Agent (the workers set AWS_SDK_UA_APP_ID to their name).
func workerOf(userAgent string) string {
	for _, f := range strings.Fields(userAgent) {
		if name, ok := strings.CutPrefix(f, "app/"); ok {
			return name
		}
	}
	return ""
}

// Observe is a Proxy observe callback.
func (l *Ledger) Observe(ex Exchange) {
	if op, ok := strings.CutPrefix(ex.Target, sqsPrefix); ok {
		l.observeSQS(op, ex)
		return
	}
	op, ok := strings.CutPrefix(ex.Target, dynamoPrefix)
	if !ok || (op != "PutItem" && op != "UpdateItem") {
		return
	}
	var req struct {
		TableName                 string
		Key                       map[string]wireValue
		Item                      map[string]wireValue
		ExpressionAttributeValues map[string]wireValue
	}
	if json.Unmarshal(ex.Request, &req) != nil || req.TableName != l.table {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case ex.Status == 0:
		l.unknown++
		return
	case ex.Status != 200:
		l.rejected++
		return
	case op == "UpdateItem" && limiter.IsRateWindowID(req.Key["id"].S):
		l.starts = append(l.starts, Start{Window: req.Key["id"].S, Worker: workerOf(ex.UserAgent),
			Forwarded: ex.Forwarded, Answered: ex.Answered, Dropped: ex.Dropped})
		return
	case op == "UpdateItem" && limiter.IsSlotsID(req.Key["id"].S):
		return // a kind's slot set, not a task
	}
	item := req.Item // PutItem: the item written
	if op == "UpdateItem" {
		var resp struct{ Attributes map[string]wireValue }
		if json.Unmarshal(ex.Response, &resp) != nil {
			l.unknown++
			return
		}
		item = resp.Attributes // ReturnValues=ALL_NEW
	}
	w := Write{
		Task:      item["id"].S,
		Op:        op,
		Status:    item["status"].S,
		Fence:     item["fence"].int(),
		Attempt:   int(item["attempt"].int()),
		Owner:     item["lease_owner"].S,
		Forwarded: ex.Forwarded,
		Answered:  ex.Answered,
		Dropped:   ex.Dropped,
		Worker:    workerOf(ex.UserAgent),
		// The store names the WAITING status :waiting in every condition
		// that requires it.
		FromWaiting: req.ExpressionAttributeValues[":waiting"].S == "WAITING",
	}
	w.CancelRequested = item["cancel_requested"].BOOL
	w.Error = item["error"].S
	for _, st := range item["steps"].L {
		w.Steps = append(w.Steps, st.M["name"].S)
	}
	if ms := item["lease_until"].int(); ms > 0 {
		w.LeaseUntil = time.UnixMilli(ms)
	}
	if w.Task == "" {
		l.unknown++
		return
	}
	l.writes = append(l.writes, w)
}

// Writes returns the applied writes so far, with counts of rejected writes
// and of writes whose fate is unknown.
func (l *Ledger) Writes() (writes []Write, rejected, unknown int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Write(nil), l.writes...), l.rejected, l.unknown
}

// Starts returns the starts the rate windows gave so far.
func (l *Ledger) Starts() []Start {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Start(nil), l.starts...)
}

// WritesFrom returns the applied writes from the n-th on (in the order they
// were recorded), and the count recorded so far.
func (l *Ledger) WritesFrom(n int) ([]Write, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n >= len(l.writes) {
		return nil, len(l.writes)
	}
	return append([]Write(nil), l.writes[n:]...), len(l.writes)
}

// observeSQS records the deliveries and deletions of the work queue's
// messages (SQS JSON protocol).
func (l *Ledger) observeSQS(op string, ex Exchange) {
	if ex.Status != 200 {
		return
	}
	worker := workerOf(ex.UserAgent)
	switch op {
	case "ReceiveMessage":
		var resp struct {
			Messages []struct {
				MessageID     string `json:"MessageId"`
				ReceiptHandle string
				Body          string
				Attributes    map[string]string
			}
		}
		if json.Unmarshal(ex.Response, &resp) != nil {
			return
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, m := range resp.Messages {
			var tok struct {
				ID string `json:"id"`
			}
			_ = json.Unmarshal([]byte(m.Body), &tok) // malformed bodies name no task
			n, _ := strconv.Atoi(m.Attributes["ApproximateReceiveCount"])
			l.deliveries = append(l.deliveries, Delivery{
				MessageID: m.MessageID, ReceiptHandle: m.ReceiptHandle, Task: tok.ID, ReceiveCount: n,
				Worker: worker, Answered: ex.Answered, Dropped: ex.Dropped,
			})
		}
	case "DeleteMessage":
		var req struct{ ReceiptHandle string }
		if json.Unmarshal(ex.Request, &req) != nil {
			return
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		l.deletions = append(l.deletions, Deletion{ReceiptHandle: req.ReceiptHandle, Worker: worker, Forwarded: ex.Forwarded, Answered: ex.Answered})
	case "DeleteMessageBatch":
		var req struct {
			Entries []struct{ ID, ReceiptHandle string } `json:"Entries"`
		}
		var resp struct {
			Successful []struct{ ID string } `json:"Successful"`
		}
		if json.Unmarshal(ex.Request, &req) != nil || json.Unmarshal(ex.Response, &resp) != nil {
			return
		}
		ok := map[string]bool{}
		for _, s := range resp.Successful {
			ok[s.ID] = true
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, e := range req.Entries {
			if ok[e.ID] {
				l.deletions = append(l.deletions, Deletion{ReceiptHandle: e.ReceiptHandle, Worker: worker, Forwarded: ex.Forwarded, Answered: ex.Answered})
			}
		}
	}
}

// Messages returns the deliveries and deletions so far.
func (l *Ledger) Messages() ([]Delivery, []Deletion) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Delivery(nil), l.deliveries...), append([]Deletion(nil), l.deletions...)
}

// wireValue is a DynamoDB attribute value in the JSON wire format; only the
// forms the ledger reads are decoded.
type wireValue struct {
	S    string               `json:"S"`
	N    string               `json:"N"`
	BOOL bool                 `json:"BOOL"`
	L    []wireValue          `json:"L"`
	M    map[string]wireValue `json:"M"`
}

func (v wireValue) int() int64 {
	n, _ := strconv.ParseInt(v.N, 10, 64)
	return n
}
