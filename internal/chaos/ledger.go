package chaos

import (
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"time"
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
	Dropped    bool // the answer never reached the worker
}

// Ledger collects the applied writes to one table from the proxies' Observe
// callbacks. It is safe for concurrent use.
type Ledger struct {
	table string

	mu       sync.Mutex
	writes   []Write
	rejected int // conditional failures and other non-200 answers
	unknown  int // forwarded writes whose answer never came: applied or not, unknown
}

// NewLedger returns a ledger of the writes to table.
func NewLedger(table string) *Ledger { return &Ledger{table: table} }

const dynamoPrefix = "DynamoDB_20120810."

// Observe is a Proxy observe callback.
func (l *Ledger) Observe(ex Exchange) {
	op, ok := strings.CutPrefix(ex.Target, dynamoPrefix)
	if !ok || (op != "PutItem" && op != "UpdateItem") {
		return
	}
	var req struct {
		TableName string
		Item      map[string]wireValue
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

// wireValue is a DynamoDB attribute value in the JSON wire format; only the
// scalar forms the ledger reads are decoded.
type wireValue struct {
	S string `json:"S"`
	N string `json:"N"`
}

func (v wireValue) int() int64 {
	n, _ := strconv.ParseInt(v.N, 10, 64)
	return n
}
