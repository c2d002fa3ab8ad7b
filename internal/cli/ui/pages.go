package ui

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/admin"
	"github.com/leasehold/leasehold/internal/cli/rules"
)

var funcs = template.FuncMap{
	"pretty": prettyJSON,
	"stamp": func(t time.Time) string {
		if t.IsZero() {
			return "–"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"taskURL":     taskURL,
	"earlierRuns": earlierRuns,
	"workflowURL": workflowURL,
	"dlqURL":      dlqURL,
	"lower":       func(s any) string { return strings.ToLower(fmt.Sprint(s)) },
	"queueName":   queueName,
	// Task text (ids, kinds, errors, reasons, bodies: anything a handler
	// or a sender wrote) is shown escaped as the CLI prints it
	// (rules.Escape): a control character shows as \x1b, \r or \x00,
	// never as a missing glyph or a character the browser drops. Form
	// values and URLs carry the text unescaped.
	"esc":   rules.Escape,
	"line":  rules.OneLine,
	"lines": rules.EscapeLines,
	"id":    rules.DisplayID,
	"clip": func(s string, n int) string {
		if r := []rune(s); len(r) > n {
			return string(r[:n-1]) + "…"
		}
		return s
	},
	"contains": slices.Contains[[]string],
	"sub":      func(a, b int) int { return a - b },
	// The task page heads a handed-back attempt's reason apart from an
	// error (rules.HandedBack).
	"handedBack": rules.HandedBack,
	"ago":        ago,
	"timing":     timing,
	"duration":   duration,
}

func taskURL(id string) string     { return "/task?" + url.Values{"id": {id}}.Encode() }
func workflowURL(id string) string { return "/workflow?" + url.Values{"id": {id}}.Encode() }
func dlqURL(queue string) string   { return "/dlq?" + url.Values{"queue": {queue}}.Encode() }

// queueName shows a task's queue: "" is the default work queue.
func queueName(q string) string {
	if q == "" {
		return "(work queue)"
	}
	return rules.Escape(q)
}

// prettyJSON indents a JSON document for display, with the <, > and &
// that Go's encoder stored as \u003c, \u003e and \u0026 shown as
// themselves; anything else is shown as it is. The template escapes the
// text either way.
func prettyJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var buf bytes.Buffer
	if json.Indent(&buf, raw, "", "  ") != nil {
		return rules.EscapeLines(string(raw))
	}
	return unescapeHTMLSafe(buf.String())
}

// unescapeHTMLSafe turns the escapes \u003c, \u003e and \u0026 of valid
// JSON back into the characters; every other escape stays.
func unescapeHTMLSafe(s string) string {
	if !strings.Contains(s, `\u00`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		if s[i+1] == 'u' && i+6 <= len(s) {
			switch strings.ToLower(s[i+2 : i+6]) {
			case "003c":
				b.WriteByte('<')
				i += 5
				continue
			case "003e":
				b.WriteByte('>')
				i += 5
				continue
			case "0026":
				b.WriteByte('&')
				i += 5
				continue
			}
		}
		b.WriteString(s[i : i+2]) // an escape: the backslash and what it escapes
		i++
	}
	return b.String()
}

// ---- overview

type count struct {
	Name string
	N    int
}

type bar struct {
	X, Y, H int
	Label   string
}

type queueRow struct {
	Name      string // "" for the work queue
	URL       string
	Stats     admin.QueueStats
	DeadDepth int
	HasDead   bool
	Paused    bool
	Since     time.Time
	Err       string
}

// statusCount is one status's line of the overview: how many of its
// newest tasks the scan read, and whether it has more.
type statusCount struct {
	Name string
	N    int
	More bool // the status has more tasks than the scan reads
	// Counting: the status's time ran out before its listing ended or
	// reached PerStatus; N is a lower bound ("at least N, still counting").
	Counting bool
	NotRead  string // why the scan read none of it (an error)
}

// overviewScan is the overview's task scan: the newest PerStatus tasks of
// each status, read once per load of the page.
type overviewScan struct {
	PerStatus int
	Scanned   int
	ByStatus  []statusCount
	ByKind    []count
	ByQueue   []count
	Created   chart
	Finished  chart
	MaxPerMin int
}

type overviewData struct {
	// Scan is nil on a live refresh, which reads only the queues.
	Scan   *overviewScan
	Queues []queueRow
}

// perStatus is the tasks of each status the overview reads: Scan shared
// among the statuses, rounded up, at most one listing page.
func (s *Server) perStatus() int {
	n := len(leasehold.Statuses())
	return min((s.cfg.Scan+n-1)/n, rules.MaxListLimit)
}

// scan reads the newest perStatus tasks of each status, all statuses at
// once, each a page of PageSize at a time with PageTime of its own: a
// large status, or a rare one whose listing reads past many tasks of
// others, runs out of its own time, and the others' counts stand.
func (s *Server) scan(ctx context.Context) *overviewScan {
	d := &overviewScan{PerStatus: s.perStatus()}
	statuses := leasehold.Statuses()
	d.ByStatus = make([]statusCount, len(statuses))
	read := make([][]leasehold.TaskInfo, len(statuses))
	var wg sync.WaitGroup
	for i, st := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.ByStatus[i], read[i] = s.countStatus(ctx, st, d.PerStatus)
		}()
	}
	wg.Wait()
	tasks := slices.Concat(read...)
	s.sawQueues(tasks)
	d.Scanned = len(tasks)
	byKind, byQueue := map[string]int{}, map[string]int{}
	now := s.cfg.Now()
	var created, finished [60]int
	minute := func(t time.Time) int {
		age := now.Sub(t)
		if t.IsZero() || age < 0 || age >= time.Hour {
			return -1
		}
		return 59 - int(age/time.Minute)
	}
	for _, t := range tasks {
		byKind[t.Kind]++
		byQueue[queueName(s.queueOf(t))]++
		if i := minute(t.CreatedAt); i >= 0 {
			created[i]++
		}
		if i := minute(t.FinishedAt); i >= 0 {
			finished[i]++
		}
	}
	d.ByKind, d.ByQueue = counts(byKind), counts(byQueue)
	d.MaxPerMin = max(slices.Max(created[:]), slices.Max(finished[:]), 1)
	d.Created = newChart(created, d.MaxPerMin, now, "created", "tasks created per minute")
	d.Finished = newChart(finished, d.MaxPerMin, now, "finished", "tasks finished per minute")
	return d
}

// countStatus reads up to most of the newest tasks of status st within
// PageTime, and cuts off a call still under way a quarter of PageTime
// later: the six statuses share the table's throughput, and on a slow one
// (the emulator) even their first calls would not fit together.
func (s *Server) countStatus(ctx context.Context, st leasehold.Status, most int) (statusCount, []leasehold.TaskInfo) {
	ctx, cancel := s.cutOff(ctx)
	defer cancel()
	row := statusCount{Name: string(st)}
	var tasks []leasehold.TaskInfo
	o := leasehold.ListOptions{Status: st, StopBy: s.stopBy()}
	var slowest time.Duration
	for {
		o.Limit = min(s.cfg.PageSize, most-len(tasks))
		at := time.Now()
		page, err := s.cfg.Tasks.List(ctx, o)
		switch {
		case err != nil && ctx.Err() != nil:
			// Out of time inside a call: what was read stands.
			row.N, row.Counting = len(tasks), true
			return row, tasks
		case err != nil:
			row.NotRead = "not read: " + err.Error()
			return row, nil
		}
		slowest = max(slowest, time.Since(at))
		tasks = append(tasks, page.Tasks...)
		o.Cursor = page.Next
		row.N = len(tasks)
		switch {
		case page.Next == "":
			return row, tasks
		case len(tasks) >= most:
			row.More = true
			return row, tasks
		case time.Until(o.StopBy) < slowest:
			row.Counting = true
			return row, tasks
		}
	}
}

func counts(m map[string]int) []count {
	out := make([]count, 0, len(m))
	for k, n := range m {
		out = append(out, count{k, n})
	}
	slices.SortFunc(out, func(a, b count) int { return cmp.Or(b.N-a.N, strings.Compare(a.Name, b.Name)) })
	return out
}

// overview scans the tasks on a load of the page; its live refresh reads
// only the queues' attributes.
func (s *Server) overview(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.budget(r)
	defer cancel()
	var d overviewData
	if r.URL.Query().Get("live") != "1" {
		d.Scan = s.scan(ctx)
	}
	d.Queues = s.queueRows(ctx)
	s.render(w, r, http.StatusOK, "overview", "Overview", d)
}

// queueRows reads the depths and pause state of the work queue and the
// named queues seen in listings.
func (s *Server) queueRows(ctx context.Context) []queueRow {
	s.mu.Lock()
	names := slices.Sorted(maps.Keys(s.queues))
	s.mu.Unlock()
	rows := make([]queueRow, 0, len(names)+1)
	for _, name := range append([]string{""}, names...) {
		row := queueRow{Name: name, URL: s.cfg.WorkQueueURL}
		var err error
		if name != "" {
			row.URL, err = s.cfg.Queues.QueueURL(ctx, name)
		}
		if err == nil {
			row.Stats, err = s.cfg.Queues.QueueStats(ctx, row.URL)
		}
		if err == nil && row.Stats.DeadLetterURL != "" {
			var dead admin.QueueStats
			dead, err = s.cfg.Queues.QueueStats(ctx, row.Stats.DeadLetterURL)
			row.HasDead, row.DeadDepth = true, dead.Visible+dead.InFlight+dead.Delayed
		}
		if err != nil {
			row.Err = err.Error()
		} else {
			row.Paused, row.Since = s.cfg.Queues.Paused(ctx, row.URL)
		}
		rows = append(rows, row)
	}
	return rows
}

func (s *Server) queuesPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.budget(r)
	defer cancel()
	if name := r.URL.Query().Get("queue"); name != "" {
		// Another queue by name: look it up, then list it.
		if err := rules.CheckQueueName(name); err != nil {
			s.fail(w, r, badRequest("queue: "+err.Error()))
			return
		}
		if _, err := s.cfg.Queues.QueueURL(ctx, name); err != nil {
			s.fail(w, r, err)
			return
		}
		s.mu.Lock()
		if name != s.workName && len(s.queues) < maxQueues {
			s.queues[name] = true
		}
		s.mu.Unlock()
	}
	s.render(w, r, http.StatusOK, "queues", "Queues", s.queueRows(ctx))
}

// ---- task list

type filters struct {
	Status, Kind, Queue, Since, Prefix, Cursor string
}

type tasksData struct {
	F        filters
	Statuses []leasehold.Status
	Tasks    []leasehold.TaskInfo
	Scanned  int
	Next     string // URL of the next page; empty on the last
	First    string // URL of the first page; empty on it
	// Partial: the page stopped reading before it was full (its PageTime
	// or the filter's bounds ran out); Next goes on from where it stopped.
	Partial bool
	Budget  time.Duration
	// CutOff: a listing read was still under way when the page's time was
	// up, and was cut off.
	CutOff bool
	// MaxSelected bounds the rows one bulk request of selected rows takes.
	MaxSelected int
}

// Query is the filters (without the cursor) as a URL query.
func (f filters) Query() string {
	f.Cursor = ""
	return f.values().Encode()
}

// URL is the tasks page with the filters (without the cursor). A page
// names it whole: a query put after a literal "?" in a template would be
// escaped as one value.
func (f filters) URL() string {
	if q := f.Query(); q != "" {
		return "/tasks?" + q
	}
	return "/tasks"
}

func (f filters) values() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"status": f.Status, "kind": f.Kind, "queue": f.Queue, "since": f.Since, "prefix": f.Prefix, "cursor": f.Cursor} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

// sinceOf reads the time filter: a duration back from now (90m, 2h) or an
// RFC 3339 time.
func sinceOf(s string, now time.Time) (time.Time, error) {
	t, err := rules.ParseSince(s, now)
	if err != nil {
		return time.Time{}, badRequest(err.Error())
	}
	return t, nil
}

func (s *Server) tasks(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := filters{
		Status: strings.ToUpper(q.Get("status")), Kind: q.Get("kind"), Queue: q.Get("queue"),
		Since: q.Get("since"), Prefix: q.Get("prefix"), Cursor: q.Get("cursor"),
	}
	d := tasksData{F: f, Statuses: leasehold.Statuses(), MaxSelected: maxSelected}
	fq := f.Queue
	if fq != "" && fq == s.workName {
		fq = "-" // the default work queue, recorded with "" or its name
	}
	since, err := sinceOf(f.Since, s.cfg.Now())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	o := leasehold.ListOptions{Cursor: f.Cursor}
	if f.Status != "" {
		st, err := leasehold.ParseStatus(f.Status)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		o.Status = st
	}
	ctx, cancel := s.budget(r)
	defer cancel()
	o.StopBy = s.stopBy()
	rctx, rcancel := s.cutOff(ctx)
	defer rcancel()
	page, err := s.admin.ListFiltered(rctx, o, admin.Filter{Kind: f.Kind, Queue: fq, Prefix: f.Prefix, Since: since}, s.cfg.PageSize)
	switch {
	case err != nil && rctx.Err() != nil && ctx.Err() == nil:
		// A read cut off: what the reads before it gave stands, and the
		// page goes on from the last cursor it had (or this one again).
		page.Next = cmp.Or(page.Next, f.Cursor)
		d.Partial, d.CutOff = true, true
		if page.Next == "" {
			d.Next = f.URL()
		}
	case err != nil:
		s.fail(w, r, err)
		return
	}
	s.sawQueues(page.Tasks)
	d.Tasks, d.Scanned, d.Budget = page.Tasks, page.Scanned, s.cfg.PageTime
	if page.Next != "" {
		nf := f
		nf.Cursor = page.Next
		d.Next = "/tasks?" + nf.values().Encode()
		d.Partial = d.Partial || len(page.Tasks) < s.cfg.PageSize
	}
	if f.Cursor != "" {
		ff := f
		ff.Cursor = ""
		d.First = "/tasks?" + ff.values().Encode()
	}
	s.render(w, r, http.StatusOK, "tasks", "Tasks", d)
}

// ---- one task

type taskData struct {
	T         leasehold.TaskInfo
	CanCancel bool
	CanRetry  bool
	Callback  bool
	// T.Inbox is the task's inbox and events, read when the page loads (a
	// live refresh reads the task only); InboxErr says why it could not be.
	InboxErr string
	MaxInbox int
}

// maxInbox bounds the waiting messages, and the events, a task page reads:
// with the inbox's state item, at most 1 + 2×maxInbox reads a load.
const maxInbox = 20

// named reads the task the request's id parameter names.
func (s *Server) named(ctx context.Context, r *http.Request) (leasehold.TaskInfo, error) {
	id := r.URL.Query().Get("id")
	if id == "" {
		return leasehold.TaskInfo{}, badRequest("id: give a task id (" + r.URL.Path + "?id=ID)")
	}
	return s.cfg.Tasks.Get(ctx, id)
}

func (s *Server) task(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.budget(r)
	defer cancel()
	t, err := s.named(ctx, r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	d := taskData{
		T:         t,
		CanCancel: t.Status == leasehold.StatusPending || t.Status == leasehold.StatusRunning || t.Status == leasehold.StatusWaiting,
		CanRetry:  t.Status == leasehold.StatusFailed || t.Status == leasehold.StatusCancelled,
		Callback:  t.Status == leasehold.StatusWaiting && t.Wait == "callback",
		MaxInbox:  maxInbox,
	}
	if r.URL.Query().Get("live") != "1" {
		if d.T, err = s.cfg.Tasks.Inbox(ctx, t, maxInbox); err != nil {
			d.InboxErr = err.Error()
		}
	}
	s.render(w, r, http.StatusOK, "task", "Task", d)
}

// ---- workflow tree

// Bounds of a workflow page.
const (
	maxAncestors = 20
	maxDepth     = 5
	maxNodes     = 200
)

type node struct {
	T     leasehold.TaskInfo
	Focus bool
	// Took is how long it ran from its creation to its end; Age, for a
	// task not ended, how long since its creation.
	Took, Age string
	// Kids is its children's count (read or not), KidsEnded how many of
	// them ended; Waiting the children or dependencies a WAITING task
	// still waits for (its reason), as read.
	Kids, KidsEnded int
	Waiting         []ref
	Children        []*node
	// Omitted counts its children not shown: past a bound, or unreadable.
	Omitted int
	// Deps are the tasks it waits for that are not its children; Waiters
	// the tasks told when it ends; Then its chain's later links.
	Deps, Waiters, Then []ref
}

type ref struct {
	ID     string
	Status leasehold.Status
	Err    string
}

type workflowData struct {
	Root      *node
	Focus     string
	Ancestors int
	Omitted   int  // children not shown, over the whole tree
	Cut       bool // the tree hit a bound
}

// workflow shows the tree of the task the request names. It reads each
// task once: the tree's tasks (at most maxNodes), for each the list of
// its children's ids (one read of it), and the tasks its relations name
// (at most maxNodes more). A node's children are cut before they are
// read: a map of 100,000 children costs the reads of those shown.
func (s *Server) workflow(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.budget(r)
	defer cancel()
	t, err := s.named(ctx, r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	id := t.ID
	d := workflowData{Focus: id}
	read := map[string]leasehold.TaskInfo{t.ID: t}
	get := func(id string) (leasehold.TaskInfo, error) {
		if t, ok := read[id]; ok {
			return t, nil
		}
		t, err := s.cfg.Tasks.Get(ctx, id)
		if err == nil {
			read[id] = t
		}
		return t, err
	}
	for t.Parent != "" && d.Ancestors < maxAncestors {
		p, err := get(t.Parent)
		if err != nil {
			break // a parent gone from the table: the tree starts here
		}
		t = p
		d.Ancestors++
	}
	nodes := 1 // the root
	refs := map[string]ref{}
	refOf := func(id string) ref {
		if r, ok := refs[id]; ok {
			return r
		}
		r := ref{ID: id}
		if t, ok := read[id]; ok {
			r.Status = t.Status
		} else if len(refs) >= maxNodes {
			d.Cut = true
			return r
		} else if t, err := get(id); err != nil {
			r.Err = err.Error()
		} else {
			r.Status = t.Status
		}
		refs[id] = r
		return r
	}
	now := s.cfg.Now()
	var grow func(t leasehold.TaskInfo, parent string, depth int) *node
	grow = func(t leasehold.TaskInfo, parent string, depth int) *node {
		n := &node{T: t, Focus: t.ID == id}
		switch {
		case t.Status.Terminal() && !t.FinishedAt.IsZero() && !t.CreatedAt.IsZero():
			n.Took = duration(t.FinishedAt.Sub(t.CreatedAt))
		case !t.Status.Terminal() && !t.CreatedAt.IsZero():
			n.Age = duration(now.Sub(t.CreatedAt))
		}
		var err error
		var kids []string
		if mayHaveChildren(t) {
			// A read of t again, for the ids (its steps' results).
			if kids, err = s.cfg.Tasks.ChildIDs(ctx, t.ID); err != nil {
				kids = nil
			}
		}
		isChild := map[string]bool{}
		for _, k := range kids {
			isChild[k] = true
		}
		room := min(len(kids), maxNodes-nodes)
		if depth >= maxDepth {
			room = 0
		}
		nodes += room
		for _, k := range kids[:room] {
			c, err := get(k)
			switch {
			case errors.Is(err, leasehold.ErrNotFound):
				// Its item expired, as Client.Children shows it.
				n.Children = append(n.Children, &node{T: leasehold.TaskInfo{ID: k, Status: "EXPIRED"}})
			case err != nil:
				n.Omitted++
				d.Omitted++
				d.Cut = true
			default:
				n.Children = append(n.Children, grow(c, t.ID, depth+1))
			}
		}
		n.Kids = len(kids)
		for _, c := range n.Children {
			if c.T.Status.Terminal() || c.T.Status == "EXPIRED" {
				n.KidsEnded++
			}
		}
		if t.Status == leasehold.StatusWaiting && t.Wait == "children" && len(t.WaitFor) > 0 {
			// Its own record of which ended, read with it: exact even for
			// the children not shown.
			n.Kids, n.KidsEnded = len(t.WaitFor), len(t.Ended)
		}
		if t.Status == leasehold.StatusWaiting {
			for _, w := range t.WaitFor {
				if slices.Contains(t.Ended, w) {
					continue
				}
				if len(n.Waiting) == maxWaitingShown {
					break
				}
				n.Waiting = append(n.Waiting, refOf(w))
			}
		}
		if left := len(kids) - room; left > 0 {
			n.Omitted += left
			d.Omitted += left
			d.Cut = true
		}
		for _, dep := range t.WaitFor {
			if !isChild[dep] {
				n.Deps = append(n.Deps, refOf(dep))
			}
		}
		for _, w := range t.Waiters {
			if w == parent {
				continue // the tree shows it: the node is under it
			}
			n.Waiters = append(n.Waiters, refOf(w))
		}
		for _, l := range t.Then {
			n.Then = append(n.Then, refOf(l))
		}
		return n
	}
	d.Root = grow(t, "", 0)
	s.render(w, r, http.StatusOK, "workflow", "Workflow", d)
}

// maxWaitingShown bounds the unended tasks a waiting node names.
const maxWaitingShown = 10

// mayHaveChildren reports whether t may have started tasks that
// Client.ChildIDs lists: the children of its All and Map awaits (steps
// named children:… and map:…), of the children await it is in, and its
// chain's later links. For any other task ChildIDs is an empty list, and
// not worth a read.
func mayHaveChildren(t leasehold.TaskInfo) bool {
	if len(t.Then) > 0 || (t.Wait == "children" && len(t.WaitFor) > 0) {
		return true
	}
	return slices.ContainsFunc(t.Steps, func(s string) bool {
		return strings.HasPrefix(s, "map:") || strings.HasPrefix(s, "children:")
	})
}

// ---- dead letters

type deadData struct {
	Queue string
	DLQ   string
	Depth int
	// Read: the page was asked to read the messages (a POST); Letters are
	// what it read.
	Read    bool
	Letters []admin.DeadLetter
	Max     int
}

const maxPeek = 50

// deadLetters shows the depth of a queue's dead-letter queue; a POST (the
// "read dead letters" button) also reads its messages. Reading is an SQS
// receive, which hides the messages for a moment and counts a receive on
// each: a GET never does it.
func (s *Server) deadLetters(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.budget(r)
	defer cancel()
	name := r.URL.Query().Get("queue")
	_, dlq, err := s.deadLetterQueue(ctx, name)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	d := deadData{Queue: name, DLQ: dlq, Max: maxPeek, Read: r.Method == http.MethodPost}
	st, err := s.cfg.Queues.QueueStats(ctx, dlq)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	d.Depth = st.Visible + st.InFlight + st.Delayed
	if d.Read {
		if d.Letters, err = s.cfg.Queues.PeekDeadLetters(ctx, dlq, maxPeek); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	s.render(w, r, http.StatusOK, "dlq", "Dead letters", d)
}

// deadLetterQueue returns the URL of the queue called name ("" for the
// work queue) and of its dead-letter queue.
func (s *Server) deadLetterQueue(ctx context.Context, name string) (src, dlq string, err error) {
	src = s.cfg.WorkQueueURL
	if name != "" {
		if err := rules.CheckQueueName(name); err != nil {
			return "", "", badRequest("queue: " + err.Error())
		}
		if src, err = s.cfg.Queues.QueueURL(ctx, name); err != nil {
			return "", "", err
		}
	}
	st, err := s.cfg.Queues.QueueStats(ctx, src)
	if err != nil {
		return "", "", err
	}
	if st.DeadLetterURL == "" {
		return "", "", badRequest("queue " + queueName(name) + " has no dead-letter queue (no redrive policy)")
	}
	return src, st.DeadLetterURL, nil
}

// runLink is an ended run of a workflow: its number and id.
type runLink struct {
	N  int
	ID string
}

// earlierRuns are the ended runs of the workflow id in its run (from 1)
// that its page links, newest first: the 10 before it, and the first.
func earlierRuns(id string, run int) []runLink {
	var out []runLink
	for n := run - 1; n >= 1 && n >= run-10; n-- {
		out = append(out, runLink{n, rules.RunID(id, n)})
	}
	if run > 11 {
		out = append(out, runLink{1, rules.RunID(id, 1)})
	}
	return out
}
