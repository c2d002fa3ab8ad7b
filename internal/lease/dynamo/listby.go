package dynamo

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/leasehold/leasehold/internal/lease/query"
)

// Index names of the listings by kind and by queue: (list_shard, kind_at)
// and (list_shard, queue_at), keys only. They hold what by_created holds
// (tasks with a list_shard, batch listing entries), each under its kind or
// queue: a task of the default work queue has no queue_at, so it costs
// by_queue nothing and is not in it (query.ListBy).
const (
	indexByKind  = "by_kind"
	indexByQueue = "by_queue"
)

// listSep ends the kind or queue in a listing's sort key. A control
// character: CheckKind refuses one in a kind, SQS in a queue name.
const listSep = "\x1f"

// listAtDigits is the width of the creation time in a listing's sort key:
// unix milliseconds, zero-padded so that the keys sort by time (13 digits
// last until the year 2286).
const listAtDigits = 13

// listSortKey is the sort key of a task created at (unix ms), or of a
// batch listing entry opened then, in the listing of sel, its kind or its
// queue's name.
func listSortKey(sel string, at int64) string { return sel + listSep + padAt(at) }

// padAt is at (unix ms) in listAtDigits digits.
func padAt(at int64) string {
	n := strconv.FormatInt(at, 10)
	if len(n) < listAtDigits {
		n = strings.Repeat("0", listAtDigits-len(n)) + n
	}
	return n
}

// listIndex is the listing List reads: by_created, or by_kind or by_queue
// narrowed to one kind or queue (the sort key's prefix).
type listIndex struct {
	name     string
	sortAttr string
	prefix   string // "" for by_created, whose sort key is created_at, a number
}

// indexFor picks the listing of by: its kind's (the queue, if also given,
// is filtered), else its queue's, else by_created.
func indexFor(by query.ListBy) listIndex {
	switch {
	case by.Kind != "":
		return listIndex{name: indexByKind, sortAttr: attrKindAt, prefix: by.Kind + listSep}
	case by.Queue != "":
		return listIndex{name: indexByQueue, sortAttr: attrQueueAt, prefix: by.Queue + listSep}
	}
	return listIndex{name: indexByCreated, sortAttr: attrCreatedAt}
}

// sortValue is the index's sort key of a position at (unix ms).
func (ix listIndex) sortValue(at int64) types.AttributeValue {
	if ix.prefix == "" {
		return avN(at)
	}
	return avS(ix.prefix + padAt(at))
}

// keyCondition is the Query's key condition on one shard of the index.
func (ix listIndex) keyCondition(shard string) (string, map[string]types.AttributeValue) {
	values := map[string]types.AttributeValue{":list_shard": avS(shard)}
	cond := "#list_shard = :list_shard"
	if ix.prefix != "" {
		cond += " AND begins_with(#" + ix.sortAttr + ", :prefix)"
		values[":prefix"] = avS(ix.prefix)
	}
	return cond, values
}

// positionAt reads the creation time (unix ms) of an index entry from its
// sort key.
func (ix listIndex) positionAt(d *decoder) int64 {
	if ix.prefix == "" {
		return d.num(attrCreatedAt)
	}
	v := d.str(ix.sortAttr)
	if !strings.HasPrefix(v, ix.prefix) || len(v) != len(ix.prefix)+listAtDigits {
		if d.err == nil {
			d.err = fmt.Errorf("%s: %q is not a sort key of %q", ix.sortAttr, v, ix.prefix)
		}
		return 0
	}
	at, err := strconv.ParseInt(v[len(ix.prefix):], 10, 64)
	if err != nil && d.err == nil {
		d.err = fmt.Errorf("%s: %w", ix.sortAttr, err)
	}
	return at
}

// entryKeys are the sort keys a batch listing entry of by's kind and queue
// carries, opened at (unix ms).
func entryKeys(item map[string]types.AttributeValue, by query.ListBy, at int64) {
	if by.Kind != "" {
		item[attrKindAt] = avS(listSortKey(by.Kind, at))
	}
	if by.Queue != "" {
		item[attrQueueAt] = avS(listSortKey(by.Queue, at))
	}
}

// indexUnready reports whether err says that the index name is missing
// from the table or still backfilling: DynamoDB answers a ValidationException
// naming it ("The table does not have the specified index", "Cannot read
// from backfilling global secondary index"), the emulator a
// ResourceNotFoundException ("Invalid index").
func indexUnready(err error, name string) bool {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return false
	}
	switch ae.ErrorCode() {
	case "ValidationException", "ResourceNotFoundException":
		return strings.Contains(ae.ErrorMessage(), name)
	}
	return false
}
