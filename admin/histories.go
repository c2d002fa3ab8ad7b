package admin

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/dynamo"
	"github.com/leasehold/leasehold/internal/lease/query"
	"github.com/leasehold/leasehold/internal/replay"
)

// historyStatuses are the statuses of the tasks in flight, in the order
// Histories reads them: the waits first, where deploys meet workflows.
var historyStatuses = []leasehold.Status{leasehold.StatusWaiting, leasehold.StatusPending, leasehold.StatusRunning}

// historyCursor is what Histories' cursor encodes: the status it reads
// (an index in historyStatuses) and the listing's cursor in it.
type historyCursor struct {
	Status int    `json:"s"`
	Inner  string `json:"c,omitempty"`
}

// Histories reads the histories of the workflows in flight of kind (tasks
// PENDING, RUNNING or WAITING with a recorded operation or a wait, WAITING
// ones first), as the files `leasehold replay` writes and
// Handlers.Replay reads, from cursor ("" for the start). It stops once it
// has limit histories (1 to 1000) or has read 5,000 entries of the
// listing (ListFiltered's page), and returns the cursor to go on from, ""
// once the listing has ended. Its reads: the listing's queries (one
// per 1 MB of entries read), and one BatchGetItem per 100 tasks of kind
// (a read unit per 4 KB of each task's item); it writes nothing. A task
// started by another (a child, a chain's later link) has no listing entry
// of its own, so is not read here. With a payload bucket (Config's
// PayloadBucket), the values a history's payload and steps refer to there
// are read into the file too (one GetObject each; History.Blobs).
func (a *Admin) Histories(ctx context.Context, kind string, limit int, cursor string) ([][]byte, string, error) {
	if kind == "" {
		return nil, "", fmt.Errorf("histories: %w: no kind", leasehold.ErrInvalid)
	}
	if limit < 1 || limit > query.MaxListLimit {
		return nil, "", fmt.Errorf("histories: %w: limit %d is outside 1..%d", leasehold.ErrInvalid, limit, query.MaxListLimit)
	}
	var cur historyCursor
	if cursor != "" {
		b, err := base64.RawURLEncoding.DecodeString(cursor)
		if err != nil || json.Unmarshal(b, &cur) != nil || cur.Status < 0 || cur.Status >= len(historyStatuses) {
			return nil, "", fmt.Errorf("histories: %w: cursor %q is not one Histories returned", leasehold.ErrInvalid, cursor)
		}
	}
	store := dynamo.New(a.ddb, a.table, lease.Options{})
	var out [][]byte
	scanned := 0
	for cur.Status < len(historyStatuses) && len(out) < limit && scanned < maxFilterScan {
		page, err := a.ListFiltered(ctx, leasehold.ListOptions{Status: historyStatuses[cur.Status], Cursor: cur.Inner}, Filter{Kind: kind}, min(limit-len(out), 100))
		if err != nil {
			return out, "", err
		}
		scanned += page.Scanned
		ids := make([]string, len(page.Tasks))
		for i, t := range page.Tasks {
			ids[i] = t.ID
		}
		// A page holds at most 100 tasks: one BatchGetItem reads them whole.
		cctx, cancel := context.WithTimeout(ctx, a.callTimeout)
		tasks, err := store.GetMany(cctx, ids)
		cancel()
		if err != nil {
			return out, "", fmt.Errorf("read %d tasks: %w", len(ids), err)
		}
		now := time.Now()
		for _, t := range tasks {
			if !replay.InFlight(t) {
				continue
			}
			// A history past the task's item: the file holds it whole.
			if t.Steps, err = lease.ReadHistory(ctx, store, t, 0); err != nil {
				return out, "", err
			}
			// Values in the payload bucket go into the file with it.
			h := replay.Of(t, now)
			if err := h.Resolve(ctx, a.claims); err != nil {
				return out, "", err
			}
			b, err := h.Encode()
			if err != nil {
				return out, "", err
			}
			out = append(out, b)
		}
		if cur.Inner = page.Next; cur.Inner == "" {
			cur.Status++
		}
	}
	if cur.Status >= len(historyStatuses) {
		return out, "", nil
	}
	b, err := json.Marshal(cur)
	if err != nil {
		return out, "", err
	}
	return out, base64.RawURLEncoding.EncodeToString(b), nil
}
