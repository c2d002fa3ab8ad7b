package ui

import (
	"cmp"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/admin"
	"github.com/leasehold/leasehold/internal/cli/rules"
)

const (
	// maxBulk bounds the tasks one bulk request acts on; a larger
	// selection is done by submitting again.
	maxBulk = 500
	// bulkConcurrency is how many tasks a bulk request changes at once.
	bulkConcurrency = 8
	// bulkShown bounds the ids a dry run of a filter lists.
	bulkShown = 20
	// maxSelected bounds the ids of one bulk request of selected rows (a
	// dry run lists them all): two pages of the task list at most.
	maxSelected = 2 * DefaultPageSize
)

// bulkData is what the bulk page shows: a dry run's count and sample with
// the form that confirms it, or what the action did.
type bulkData struct {
	F        filters
	Action   string // cancel or retry
	Verb     string // cancelled or retried
	Attempts int
	Statuses string
	IDs      []string // a dry run's first ids
	Count    int
	More     bool // more than maxBulk matched
	// Cursor is where this selection's reading started; Next where it
	// stopped when its PageTime ran out (empty once it read to the end),
	// with Scanned the tasks it read.
	Cursor, Next string
	Scanned      int
	Budget       time.Duration
	// Partial: the reading stopped before the selection's end; the next
	// submit goes on from Next. CutOff: a listing read still under way at
	// the page's time was cut off.
	Partial, CutOff bool
	Done            bool // acted, not a dry run
	Summary         string
	Errors          []string
	// Selected: the request named its tasks (the task list's selected
	// rows, scope=selected) rather than a filter; IDs are all of them.
	Selected bool
}

// bulk runs POST /bulk: cancel or retry every task the tasks page's
// filters select, as `leasehold cancel|retry --status ...` does (Admin.Select,
// Admin.Bulk). Without confirm=yes it is a dry run: it counts what the
// selection picks, lists the first ids and offers the form that confirms
// it; with it, it acts on up to maxBulk tasks and shows the summary.
func (s *Server) bulk(w http.ResponseWriter, r *http.Request) {
	f := filters{
		Status: strings.ToUpper(r.PostFormValue("status")), Kind: r.PostFormValue("kind"), Queue: r.PostFormValue("queue"),
		Since: r.PostFormValue("since"), Prefix: r.PostFormValue("prefix"),
	}
	d := bulkData{F: f, Action: r.PostFormValue("action"), Cursor: r.PostFormValue("cursor"), Budget: s.cfg.PageTime}
	var (
		allowed []leasehold.Status
		act     admin.Action
	)
	switch d.Action {
	case "cancel":
		allowed, act, d.Verb = admin.CancelStatuses, s.admin.CancelOne, "cancelled"
	case "retry":
		n, err := strconv.Atoi(cmp.Or(r.PostFormValue("attempts"), "1"))
		if err != nil || n < 1 || n > maxRetryAttempts {
			s.fail(w, r, badRequest(fmt.Sprintf("attempts: a number of 1..%d", maxRetryAttempts)))
			return
		}
		d.Attempts = n
		allowed, act, d.Verb = admin.RetryStatuses, s.admin.RetryOne(n), "retried"
	default:
		s.fail(w, r, badRequest("action: cancel or retry"))
		return
	}
	if r.PostFormValue("scope") == "selected" {
		s.bulkSelected(w, r, d, act, allowed)
		return
	}
	now := s.cfg.Now()
	sel := admin.Selection{Kind: f.Kind, Queue: f.Queue, Prefix: f.Prefix}
	if sel.Queue != "" && sel.Queue == s.workName {
		sel.Queue = "-" // the default work queue, recorded with "" or its name
	}
	if f.Status != "" {
		st, err := leasehold.ParseStatus(f.Status)
		if err != nil {
			s.fail(w, r, badRequest("status: "+err.Error()))
			return
		}
		sel.Statuses = []leasehold.Status{st}
	}
	since, err := sinceOf(f.Since, now)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if !since.IsZero() {
		sel.Since = max(now.Sub(since), 1)
	}
	sel, err = sel.Check(allowed)
	if err != nil {
		s.fail(w, r, badRequest(err.Error()))
		return
	}
	d.Statuses = rules.StatusNames(sel.Statuses)
	ctx, cancel := s.budget(r)
	defer cancel()
	sel.StopBy = s.stopBy()
	rctx, rcancel := s.cutOff(ctx)
	defer rcancel()
	got, err := s.admin.SelectPage(rctx, sel, d.Cursor, now, maxBulk)
	switch {
	case err != nil && rctx.Err() != nil && ctx.Err() == nil:
		// A read cut off: the next submit goes on from where it started.
		d.CutOff = true
	case err != nil:
		s.fail(w, r, err)
		return
	}
	ids := make([]string, len(got.Tasks))
	for i, t := range got.Tasks {
		ids[i] = t.ID
	}
	d.Count, d.More, d.Next, d.Scanned = len(ids), got.More, got.Next, got.Scanned
	d.Partial = got.Next != "" || d.CutOff
	if r.PostFormValue("confirm") != "yes" {
		d.IDs = ids[:min(len(ids), bulkShown)]
		s.render(w, r, http.StatusOK, "bulk", "Bulk "+d.Action, d)
		return
	}
	rep := s.admin.Bulk(ctx, ids, bulkConcurrency, act, nil)

	d.Done, d.Summary, d.Errors = true, rep.Summary(), rep.Errors
	if rep.Done < len(ids) {
		d.Summary += fmt.Sprintf("; %d not reached before the request's time ran out", len(ids)-rep.Done)
	}
	s.render(w, r, http.StatusOK, "bulk", "Bulk "+d.Action, d)
}

// bulkSelected runs POST /bulk with scope=selected: cancel or retry the
// tasks the form names (id, up to maxSelected), the task list's selected
// rows. The same rules as a filter's bulk hold: the session's CSRF token
// (checked by the gate), a dry run without confirm=yes that lists them and
// changes nothing, the confirmed form that acts. The dry run reads
// nothing: the action itself checks each id and refuses a task in a
// status it does not take (allowed), and the summary says so.
func (s *Server) bulkSelected(w http.ResponseWriter, r *http.Request, d bulkData, act admin.Action, allowed []leasehold.Status) {
	ids := r.PostForm["id"]
	switch {
	case len(ids) == 0:
		s.fail(w, r, badRequest("no row selected: tick the rows to act on, or choose \"select all matching the filter\""))
		return
	case len(ids) > maxSelected:
		s.fail(w, r, badRequest(fmt.Sprintf("%d rows selected: at most %d at once (or choose \"select all matching the filter\")", len(ids), maxSelected)))
		return
	}
	seen := make(map[string]bool, len(ids))
	unique := ids[:0:0]
	for _, id := range ids {
		if id == "" {
			s.fail(w, r, badRequest("id: an empty task id"))
			return
		}
		if !seen[id] {
			seen[id] = true
			unique = append(unique, id)
		}
	}
	d.Selected, d.IDs, d.Count, d.Statuses = true, unique, len(unique), rules.StatusNames(allowed)
	if r.PostFormValue("confirm") != "yes" {
		s.render(w, r, http.StatusOK, "bulk", "Bulk "+d.Action, d)
		return
	}
	ctx, cancel := s.budget(r)
	defer cancel()
	rep := s.admin.Bulk(ctx, unique, bulkConcurrency, act, nil)
	d.Done, d.Summary, d.Errors = true, rep.Summary(), rep.Errors
	if rep.Done < len(unique) {
		d.Summary += fmt.Sprintf("; %d not reached before the request's time ran out", len(unique)-rep.Done)
	}
	s.render(w, r, http.StatusOK, "bulk", "Bulk "+d.Action, d)
}
