package dynamo

import (
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/leasehold/leasehold/internal/lease"
)

// The ids a wait names are kept on the waiting task's item in compact
// forms, because every Notify is an UpdateItem of that item and DynamoDB
// prices a write by the larger of the item before and after it, in 1 KB
// units: with a wave of 50 children's full ids waited for and, as they
// end, ended, the item grew to 4-5 KB, and each child's notify cost 4-5
// write units. Task.WaitFor and Task.Ended always hold full ids; only the
// item's encoding is compact.
//
//   - attrWaitSpan holds a WaitFor that is a run of ids
//     ID/NAME/FROM, ID/NAME/FROM+1, ... (a task's own children, as
//     AllOf and Map name them: ChildIDIn) as "COUNT FROM /NAME/": a few
//     bytes whatever the wave's size. Any other WaitFor stays a list of
//     full ids in attrWaitFor.
//   - attrEndedSub holds the ended ids that start with the task's own id
//     and "/" (its children) without that prefix: "/NAME/17" rather than
//     the 30 to 60 bytes of a full id. Other ended ids (dependencies) stay
//     whole in attrEnded, as do those written before this form existed.
const (
	attrWaitSpan = "wait_span"
	attrEndedSub = "ended_sub"
)

// waitSpan returns ids as a span of task id's own children ("COUNT FROM
// /NAME/"), or "" when they are not one.
func waitSpan(id string, ids []string) string {
	if len(ids) < 2 || !strings.HasPrefix(ids[0], id+"/") {
		return ""
	}
	cut := strings.LastIndexByte(ids[0], '/')
	if cut <= len(id) {
		return ""
	}
	prefix := ids[0][:cut+1]
	from, err := strconv.Atoi(ids[0][cut+1:])
	if err != nil || from < 0 || strconv.Itoa(from) != ids[0][cut+1:] {
		return ""
	}
	for i, e := range ids {
		if len(e) <= len(prefix) || e[:len(prefix)] != prefix || e[len(prefix):] != strconv.Itoa(from+i) {
			return ""
		}
	}
	return strconv.Itoa(len(ids)) + " " + strconv.Itoa(from) + " " + prefix[len(id):]
}

// spanIDs expands a wait_span of task id; ok is false when span is not
// one.
func spanIDs(id, span string) (ids []string, ok bool) {
	count, rest, ok1 := strings.Cut(span, " ")
	from, rel, ok2 := strings.Cut(rest, " ")
	n, err1 := strconv.Atoi(count)
	f, err2 := strconv.Atoi(from)
	if !ok1 || !ok2 || err1 != nil || err2 != nil || n < 1 || n > lease.MaxChildren || f < 0 || !strings.HasPrefix(rel, "/") {
		return nil, false
	}
	ids = make([]string, n)
	for i := range ids {
		ids[i] = id + rel + strconv.Itoa(f+i)
	}
	return ids, true
}

// waitForValue is how WaitFor ids of task id are written: the attribute
// to set with its value, and the other form's attribute, to remove.
func waitForValue(id string, ids []string) (set string, v types.AttributeValue, remove string) {
	if span := waitSpan(id, ids); span != "" {
		return attrWaitSpan, avS(span), attrWaitFor
	}
	return attrWaitFor, avList(ids), attrWaitSpan
}

// endedEntry is how ended's id is added to the ended ids of task waiter:
// the attribute and the element.
func endedEntry(waiter, ended string) (attr, elem string) {
	if len(ended) > len(waiter)+1 && strings.HasPrefix(ended, waiter+"/") {
		return attrEndedSub, ended[len(waiter):]
	}
	return attrEnded, ended
}

// endedIDs merges the two forms of task id's ended ids, sorted.
func endedIDs(id string, whole, sub []string) []string {
	if len(sub) == 0 {
		return whole
	}
	out := slices.Clone(whole)
	for _, s := range sub {
		out = append(out, id+s)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// putWaitIDs writes t's WaitFor and Ended into item in their compact forms.
func putWaitIDs(item map[string]types.AttributeValue, t lease.Task) {
	if len(t.WaitFor) > 0 {
		name, v, _ := waitForValue(t.ID, t.WaitFor)
		item[name] = v
	}
	var whole, sub []string
	for _, e := range t.Ended {
		if attr, elem := endedEntry(t.ID, e); attr == attrEndedSub {
			sub = append(sub, elem)
		} else {
			whole = append(whole, elem)
		}
	}
	if len(whole) > 0 {
		item[attrEnded] = &types.AttributeValueMemberSS{Value: whole}
	}
	if len(sub) > 0 {
		item[attrEndedSub] = &types.AttributeValueMemberSS{Value: sub}
	}
}
