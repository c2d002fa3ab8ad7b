// Package bench measures what a task and a workflow cost on the local
// stack: the AWS calls they make, by operation, and the DynamoDB write and
// read units those consume, index writes included. make bench runs it and
// writes docs/performance.md.
package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Index is one GSI of the table as the meter prices it.
type Index struct {
	Name       string
	Keys       []string // partition key, then sort key if any
	Projection types.ProjectionType
	Include    []string
}

// Meter is an HTTP client for the SDK that counts every call by service
// and operation and, for each DynamoDB write, the write units it consumed:
// the item's (the larger of its size before and after, by the KB) plus each
// index's, from the item before and after the write (an entry put or
// deleted: 1; its key moved: 2; a projected attribute changed: 1). It reads
// each written item before and after the write with its own client, so the
// calls it makes itself are not counted; writes to one item go through it
// one at a time, so that those reads see only the write they price. Reads
// are priced from their responses (read units).
type Meter struct {
	inner    aws.HTTPClient
	reader   *dynamodb.Client
	table    string
	tableKey string
	indexes  []Index

	itemMu sync.Mutex
	items  map[string]*sync.Mutex // per item id: one metered write at a time

	mu       sync.Mutex
	calls    map[string]int     // "DynamoDB PutItem", "SQS SendMessageBatch"
	wu       float64            // write units, table and indexes
	ru       float64            // read units
	gsiWU    map[string]float64 // per index
	byWrite  map[string][]float64
	watchers map[string]func(kind string)
}

// NewMeter reads the table's key and indexes with reader.
func NewMeter(ctx context.Context, inner aws.HTTPClient, reader *dynamodb.Client, table string) (*Meter, error) {
	out, err := reader.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &table})
	if err != nil {
		return nil, err
	}
	m := &Meter{inner: inner, reader: reader, table: table, watchers: map[string]func(string){}, items: map[string]*sync.Mutex{}}
	for _, k := range out.Table.KeySchema {
		if k.KeyType == types.KeyTypeHash {
			m.tableKey = aws.ToString(k.AttributeName)
		}
	}
	for _, g := range out.Table.GlobalSecondaryIndexes {
		ix := Index{Name: aws.ToString(g.IndexName)}
		for _, ks := range g.KeySchema {
			if ks.KeyType == types.KeyTypeHash {
				ix.Keys = append([]string{aws.ToString(ks.AttributeName)}, ix.Keys...)
			} else {
				ix.Keys = append(ix.Keys, aws.ToString(ks.AttributeName))
			}
		}
		if g.Projection != nil {
			ix.Projection = g.Projection.ProjectionType
			ix.Include = g.Projection.NonKeyAttributes
		}
		m.indexes = append(m.indexes, ix)
	}
	m.Reset()
	return m, nil
}

// Indexes returns the table's indexes as read.
func (m *Meter) Indexes() []Index { return m.indexes }

// Reset zeroes the counts.
func (m *Meter) Reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = map[string]int{}
	m.wu = 0
	m.ru = 0
	m.gsiWU = map[string]float64{}
	m.byWrite = map[string][]float64{}
}

// Counts is a snapshot of a Meter.
type Counts struct {
	Calls   map[string]int
	WU      float64
	RU      float64 // read units
	GSIWU   map[string]float64
	ByWrite map[string][]float64 // write kind: write units of each such write
}

// Snapshot returns the counts so far.
func (m *Meter) Snapshot() Counts {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := Counts{Calls: map[string]int{}, WU: m.wu, RU: m.ru, GSIWU: map[string]float64{}, ByWrite: map[string][]float64{}}
	for k, v := range m.calls {
		c.Calls[k] = v
	}
	for k, v := range m.gsiWU {
		c.GSIWU[k] = v
	}
	for k, v := range m.byWrite {
		c.ByWrite[k] = append([]float64(nil), v...)
	}
	return c
}

// Watch calls f with the kind of every successful write to the item id
// until the returned function is called.
func (m *Meter) Watch(id string, f func(kind string)) (stop func()) {
	m.mu.Lock()
	m.watchers[id] = f
	m.mu.Unlock()
	return func() {
		m.mu.Lock()
		delete(m.watchers, id)
		m.mu.Unlock()
	}
}

// Do implements aws.HTTPClient.
func (m *Meter) Do(req *http.Request) (*http.Response, error) {
	target := req.Header.Get("X-Amz-Target")
	service, op, _ := strings.Cut(target, ".")
	switch {
	case strings.HasPrefix(service, "DynamoDB"):
		service = "DynamoDB"
	case service == "AmazonSQS":
		service = "SQS"
	case target == "":
		service, op = "other", req.URL.Path
	}
	m.mu.Lock()
	m.calls[service+" "+op]++
	m.mu.Unlock()
	if service != "DynamoDB" {
		return m.inner.Do(req)
	}
	switch op {
	case "GetItem", "BatchGetItem", "Query", "Scan":
		return m.doRead(req, op)
	case "PutItem", "UpdateItem", "DeleteItem":
	default:
		return m.inner.Do(req)
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	w := parseWrite(op, body, m.tableKey)
	if w.id != "" {
		unlock := m.lockItem(w.id)
		defer unlock()
	}
	before, berr := m.read(req.Context(), w.id)
	resp, err := m.inner.Do(req)
	if err != nil || berr != nil || w.id == "" {
		return resp, err
	}
	if resp.StatusCode != http.StatusOK {
		// A failed condition still consumes a write unit; nothing changed.
		if resp.StatusCode == http.StatusBadRequest {
			m.record("failed condition: "+w.kind, 1, nil)
		}
		return resp, nil
	}
	after, aerr := m.read(req.Context(), w.id)
	if aerr != nil {
		return resp, nil
	}
	base := math.Ceil(math.Max(ItemSize(before), ItemSize(after)) / 1024)
	base = math.Max(base, 1)
	gsi := map[string]float64{}
	for _, ix := range m.indexes {
		if u := indexUnits(ix, m.tableKey, before, after); u > 0 {
			gsi[ix.Name] = u
		}
	}
	m.record(w.kind, base, gsi)
	m.mu.Lock()
	f := m.watchers[w.id]
	m.mu.Unlock()
	if f != nil {
		f(w.kind)
	}
	return resp, nil
}

// lockItem serialises the metered writes to one item.
func (m *Meter) lockItem(id string) (unlock func()) {
	m.itemMu.Lock()
	mu, ok := m.items[id]
	if !ok {
		mu = &sync.Mutex{}
		m.items[id] = mu
	}
	m.itemMu.Unlock()
	mu.Lock()
	return mu.Unlock
}

// doRead makes a read and prices it from its response: DynamoDB's read
// units, 1 per 4 KB (a GetItem or each item of a BatchGetItem rounded on
// its own, at least 1 even for an item not found; a Query or Scan on the
// sum of what it returned), half that when eventually consistent.
func (m *Meter) doRead(req *http.Request, op string) (*http.Response, error) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	resp, err := m.inner.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	out, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(out))
	ru := readUnits(op, body, out)
	m.mu.Lock()
	m.ru += ru
	m.mu.Unlock()
	return resp, nil
}

// readUnits prices a read from its request and response bodies.
func readUnits(op string, reqBody, respBody []byte) float64 {
	type keysAndAttrs struct {
		Keys           []map[string]any
		ConsistentRead bool
	}
	var in struct {
		ConsistentRead bool
		RequestItems   map[string]keysAndAttrs
	}
	var out struct {
		Item      map[string]any
		Items     []map[string]any
		Responses map[string][]map[string]any
	}
	_ = json.Unmarshal(reqBody, &in)
	_ = json.Unmarshal(respBody, &out)
	units := func(size float64, consistent bool) float64 {
		u := math.Max(1, math.Ceil(size/4096))
		if !consistent {
			u /= 2
		}
		return u
	}
	switch op {
	case "GetItem":
		return units(jsonItemSize(out.Item), in.ConsistentRead)
	case "BatchGetItem":
		var ru float64
		for table, req := range in.RequestItems {
			got := out.Responses[table]
			for _, item := range got {
				ru += units(jsonItemSize(item), req.ConsistentRead)
			}
			if missing := len(req.Keys) - len(got); missing > 0 {
				ru += float64(missing) * units(0, req.ConsistentRead)
			}
		}
		return ru
	}
	var size float64
	for _, item := range out.Items {
		size += jsonItemSize(item)
	}
	return units(size, in.ConsistentRead)
}

// jsonItemSize is itemSize for an item in DynamoDB's JSON wire form.
func jsonItemSize(item map[string]any) float64 {
	n := 0.0
	for k, v := range item {
		n += float64(len(k)) + jsonValueSize(v)
	}
	return n
}

func jsonValueSize(v any) float64 {
	av, _ := v.(map[string]any)
	for typ, x := range av {
		switch typ {
		case "S":
			s, _ := x.(string)
			return float64(len(s))
		case "N":
			s, _ := x.(string)
			return math.Ceil(float64(len(strings.TrimLeft(s, "-")))/2) + 1
		case "B":
			s, _ := x.(string)
			return float64(len(s)) * 3 / 4
		case "BOOL", "NULL":
			return 1
		case "SS", "NS", "BS":
			l, _ := x.([]any)
			n := 0.0
			for _, e := range l {
				s, _ := e.(string)
				n += float64(len(s))
			}
			return n
		case "L":
			l, _ := x.([]any)
			n := 3.0
			for _, e := range l {
				n += 1 + jsonValueSize(e)
			}
			return n
		case "M":
			mm, _ := x.(map[string]any)
			n := 3.0
			for k, e := range mm {
				n += 1 + float64(len(k)) + jsonValueSize(e)
			}
			return n
		}
	}
	return 0
}

func (m *Meter) record(kind string, base float64, gsi map[string]float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	total := base
	for name, u := range gsi {
		m.gsiWU[name] += u
		total += u
	}
	m.wu += total
	m.byWrite[kind] = append(m.byWrite[kind], total)
}

func (m *Meter) read(ctx context.Context, id string) (map[string]types.AttributeValue, error) {
	if id == "" {
		return nil, errors.New("no id")
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := m.reader.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      &m.table,
		Key:            map[string]types.AttributeValue{m.tableKey: &types.AttributeValueMemberS{Value: id}},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, err
	}
	return out.Item, nil
}

type write struct{ id, kind string }

// The kinds of write of a batch listing entry (its create, a later batch's
// append to it), and of an inline task's create that it lists (no listing
// key of the task's own).
const (
	kindListing = "listing entry"
	// kindStepItem is an operation of a history's spilled tail, an item of
	// its own; kindSpill the write that freezes the task's inline steps.
	kindStepItem          = "step item"
	kindSpill             = "spill"
	kindListingAppend     = "listing entry append"
	kindCreateBatchListed = "create (RUNNING, batch-listed)"
)

// parseWrite reads the item id and names the kind of a write from its
// request body.
func parseWrite(op string, body []byte, key string) write {
	var in struct {
		Key, Item           map[string]map[string]any
		UpdateExpression    string
		ConditionExpression string
	}
	_ = json.Unmarshal(body, &in)
	src := in.Key
	if op == "PutItem" {
		src = in.Item
	}
	id, _ := src[key]["S"].(string)
	kind := strings.ToLower(op)
	if op == "PutItem" {
		status, _ := in.Item["status"]["S"].(string)
		kind = "create (" + status + ")"
		if _, ok := in.Item["listed_in"]; ok {
			kind = kindCreateBatchListed
		}
		if _, ok := in.Item["list_ids"]; ok {
			kind = kindListing
		}
		if _, ok := in.Item["name"]; ok && status == "" {
			kind = kindStepItem
		}
		if _, ok := in.Item["items"]; ok {
			kind = "map page"
		}
		if _, ok := in.Item["seq"]; ok {
			kind = "map group (create or rewrite)"
		}
	}
	u := in.UpdateExpression
	switch {
	case op == "PutItem":
	case strings.Contains(u, "#list_ids = list_append"):
		kind = kindListingAppend
	case strings.Contains(u, "#seq["):
		kind = "map report"
	case strings.Contains(u, "#produced = :p"):
		kind = "map raise"
	case strings.Contains(u, "#stopped = :r"):
		kind = "map stop"
	case strings.Contains(u, "DELETE #idle"):
		kind = "map unpark"
	case strings.Contains(u, "ADD #waiters"):
		kind = "watch"
	case strings.Contains(u, "#steps = list_append"):
		kind = "checkpoint"
	case strings.Contains(u, "#spill_from = :n"):
		kind = kindSpill
	case strings.Contains(u, "ADD #ended") && strings.Contains(u, ":cancelled"):
		kind = "notify (cancels)"
	case strings.Contains(u, "ADD #ended"):
		kind = "notify"
	case strings.HasPrefix(u, "SET #beat_until = :now + #beat_timeout"):
		kind = "callback heartbeat"
	case strings.Contains(in.ConditionExpression, "#callback = :nonce"):
		kind = "end wait (callback or timeout)"
	case strings.Contains(u, "#wait = :wait"):
		kind = "suspend"
	case strings.Contains(u, "REMOVE #ended") && strings.Contains(u, "#status = :running"):
		kind = "resume and claim"
	case strings.Contains(u, "REMOVE #ended"):
		kind = "resume"
	case strings.Contains(u, "#status = :running"):
		kind = "claim"
	case strings.HasPrefix(u, "SET #lease_until"):
		kind = "renew"
	case strings.Contains(u, "#status = :status"):
		kind = "finish or release"
	case strings.HasPrefix(u, "SET #sweep_at = :next"):
		kind = "sweep mark"
	}
	return write{id: id, kind: kind}
}

// indexUnits prices one index's share of a write.
func indexUnits(ix Index, tableKey string, before, after map[string]types.AttributeValue) float64 {
	in := func(item map[string]types.AttributeValue) bool {
		if item == nil {
			return false
		}
		for _, k := range ix.Keys {
			if _, ok := item[k]; !ok {
				return false
			}
		}
		return true
	}
	wasIn, isIn := in(before), in(after)
	switch {
	case !wasIn && !isIn:
		return 0
	case !wasIn:
		return entryUnits(ix, tableKey, after)
	case !isIn:
		return entryUnits(ix, tableKey, before)
	}
	for _, k := range ix.Keys {
		if !sameValue(before[k], after[k]) {
			return entryUnits(ix, tableKey, before) + entryUnits(ix, tableKey, after)
		}
	}
	for _, a := range projected(ix, before, after) {
		if !sameValue(before[a], after[a]) {
			return entryUnits(ix, tableKey, after)
		}
	}
	return 0
}

// projected lists the non-key attributes ix projects.
func projected(ix Index, before, after map[string]types.AttributeValue) []string {
	switch ix.Projection {
	case types.ProjectionTypeInclude:
		return ix.Include
	case types.ProjectionTypeAll:
		var out []string
		for _, item := range []map[string]types.AttributeValue{before, after} {
			for k := range item {
				out = append(out, k)
			}
		}
		sort.Strings(out)
		return out
	}
	return nil
}

func entryUnits(ix Index, tableKey string, item map[string]types.AttributeValue) float64 {
	entry := map[string]types.AttributeValue{tableKey: item[tableKey]}
	for _, k := range ix.Keys {
		entry[k] = item[k]
	}
	for _, a := range projected(ix, item, nil) {
		if v, ok := item[a]; ok {
			entry[a] = v
		}
	}
	return math.Max(1, math.Ceil(ItemSize(entry)/1024))
}

func sameValue(a, b types.AttributeValue) bool {
	return valueKey(a) == valueKey(b)
}

func valueKey(v types.AttributeValue) string {
	if v == nil {
		return "<nil>"
	}
	b, _ := json.Marshal(v)
	return string(b) + typeName(v)
}

func typeName(v types.AttributeValue) string {
	switch v.(type) {
	case *types.AttributeValueMemberS:
		return "S"
	case *types.AttributeValueMemberN:
		return "N"
	case *types.AttributeValueMemberBOOL:
		return "BOOL"
	case *types.AttributeValueMemberL:
		return "L"
	case *types.AttributeValueMemberM:
		return "M"
	case *types.AttributeValueMemberB:
		return "B"
	case *types.AttributeValueMemberNULL:
		return "NULL"
	}
	return "?"
}

// ItemSize follows DynamoDB's item size rules closely enough for pricing:
// names and string bytes, numbers by their digits, 3 bytes of overhead per
// list or map plus one per element.
func ItemSize(item map[string]types.AttributeValue) float64 {
	n := 0.0
	for k, v := range item {
		n += float64(len(k)) + valueSize(v)
	}
	return n
}

func valueSize(v types.AttributeValue) float64 {
	switch x := v.(type) {
	case *types.AttributeValueMemberS:
		return float64(len(x.Value))
	case *types.AttributeValueMemberN:
		return math.Ceil(float64(len(strings.TrimLeft(x.Value, "-")))/2) + 1
	case *types.AttributeValueMemberB:
		return float64(len(x.Value))
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberSS:
		n := 0.0
		for _, e := range x.Value {
			n += float64(len(e))
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0.0
		for _, e := range x.Value {
			n += math.Ceil(float64(len(strings.TrimLeft(e, "-")))/2) + 1
		}
		return n
	case *types.AttributeValueMemberL:
		n := 3.0
		for _, e := range x.Value {
			n += 1 + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3.0
		for k, e := range x.Value {
			n += 1 + float64(len(k)) + valueSize(e)
		}
		return n
	}
	return 0
}
