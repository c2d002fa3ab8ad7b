package ui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/cli/ui"
)

// countingTasks counts the List calls of the inspector; block makes each
// List wait for its context to end.
type countingTasks struct {
	ui.Tasks
	mu    sync.Mutex
	lists []leasehold.ListOptions
	block bool
}

func (c *countingTasks) List(ctx context.Context, o leasehold.ListOptions) (leasehold.Page, error) {
	c.mu.Lock()
	c.lists = append(c.lists, o)
	c.mu.Unlock()
	if c.block {
		<-ctx.Done()
		return leasehold.Page{}, ctx.Err()
	}
	return c.Tasks.List(ctx, o)
}

func (c *countingTasks) calls() []leasehold.ListOptions {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]leasehold.ListOptions(nil), c.lists...)
}

func serveWith(t *testing.T, cfg ui.Config) (*ui.Server, http.Handler) {
	t.Helper()
	srv, err := ui.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return srv, srv.Handler(addr)
}

func request(t *testing.T, h http.Handler, srv *ui.Server, method, target string, form url.Values) *httptest.ResponseRecorder {
	t.Helper()
	var r *http.Request
	if form != nil {
		r = httptest.NewRequest(method, srv.Base()+target, strings.NewReader(form.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.Header.Set("Origin", "http://"+addr)
	} else {
		r = httptest.NewRequest(method, srv.Base()+target, nil)
	}
	r.Host = addr
	r.Header.Set(ui.HeaderToken, srv.APIToken())
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// The overview scans the tasks when it is loaded, one List call per
// status, newest Scan/6 each; its live refresh lists nothing.
func TestOverviewLiveRefreshListsNoTasks(t *testing.T) {
	t.Parallel()
	f := setup(t, 0)
	tasks := &countingTasks{Tasks: f.env.Client()}
	srv, h := serveWith(t, ui.Config{Tasks: tasks, Queues: f.queues, WorkQueueURL: workURL, Scan: 12, Now: f.env.Clock().Now})
	w := request(t, h, srv, http.MethodGet, "/", nil)
	if w.Code != http.StatusOK {
		t.Fatalf("overview: %d %s", w.Code, w.Body)
	}
	calls := tasks.calls()
	if len(calls) != len(leasehold.Statuses()) {
		t.Fatalf("the overview made %d List calls, want one per status: %+v", len(calls), calls)
	}
	seen := map[leasehold.Status]bool{}
	for i, o := range calls {
		if seen[o.Status] || o.Status == "" || o.Limit != 2 || o.Cursor != "" {
			t.Errorf("List call %d: %+v, want one per status, limit 2", i, o)
		}
		seen[o.Status] = true
	}
	body := w.Body.String()
	for _, want := range []string{"newest 2 tasks of each status", `id="rescan"`, `data-every="5"`} {
		if !strings.Contains(body, want) {
			t.Errorf("overview lacks %q", want)
		}
	}
	// 7 ok tasks and parent-1 succeeded: the scan read 2 of them, and says
	// there are more.
	if !strings.Contains(body, "2+") {
		t.Errorf("overview does not mark a status with more tasks than it read:\n%s", body)
	}

	w = request(t, h, srv, http.MethodGet, "/?live=1", nil)
	var live struct{ HTML string }
	if err := json.Unmarshal(w.Body.Bytes(), &live); err != nil || w.Code != http.StatusOK {
		t.Fatalf("live overview: %d %v %s", w.Code, err, w.Body)
	}
	if n := len(tasks.calls()); n != len(calls) {
		t.Errorf("the live refresh made %d List call(s)", n-len(calls))
	}
	if !strings.Contains(live.HTML, `id="queues"`) || strings.Contains(live.HTML, "by-status") {
		t.Errorf("live overview is not the queue table alone:\n%s", live.HTML)
	}
}

// A scan whose every listing call outlasts the request's time shows the
// page, each status marked as still counting: the statuses are read at
// once, so every one got its call.
func TestOverviewScanHasATimeBudget(t *testing.T) {
	t.Parallel()
	f := setup(t, 0)
	tasks := &countingTasks{Tasks: f.env.Client(), block: true}
	srv, h := serveWith(t, ui.Config{Tasks: tasks, Queues: f.queues, WorkQueueURL: workURL, RequestTimeout: 50 * time.Millisecond})
	w := request(t, h, srv, http.MethodGet, "/", nil)
	if w.Code != http.StatusOK {
		t.Fatalf("overview: %d %s", w.Code, w.Body)
	}
	if n := strings.Count(w.Body.String(), "at least 0, still counting"); n != len(leasehold.Statuses()) {
		t.Errorf("%d status(es) marked still counting, want all %d:\n%s", n, len(leasehold.Statuses()), w.Body)
	}
	if n := len(tasks.calls()); n != len(leasehold.Statuses()) {
		t.Errorf("%d List calls, want one per status", n)
	}
}

// bigMap is a task with a map of 100,000 children; it counts the reads.
type bigMap struct {
	ui.Tasks
	mu    sync.Mutex
	gets  map[string]int
	idsOf map[string]int
}

const bigChildren = 100_000

func (b *bigMap) Get(_ context.Context, id string) (leasehold.TaskInfo, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.gets[id]++
	if id == "root" {
		return leasehold.TaskInfo{ID: id, Kind: "fan", Status: leasehold.StatusSucceeded, Steps: []string{"map:all"}}, nil
	}
	if !strings.HasPrefix(id, "root/") {
		return leasehold.TaskInfo{}, leasehold.ErrNotFound
	}
	return leasehold.TaskInfo{ID: id, Kind: "leaf", Status: leasehold.StatusSucceeded, Parent: "root"}, nil
}

func (b *bigMap) ChildIDs(_ context.Context, id string) ([]string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.idsOf[id]++
	if id != "root" {
		return nil, nil
	}
	ids := make([]string, bigChildren)
	for i := range ids {
		ids[i] = fmt.Sprintf("root/%d", i)
	}
	return ids, nil
}

// The workflow page reads only the children it shows, each once, and
// says how many it left out.
func TestWorkflowCutsBeforeReading(t *testing.T) {
	t.Parallel()
	tasks := &bigMap{gets: map[string]int{}, idsOf: map[string]int{}}
	srv, h := serveWith(t, ui.Config{Tasks: tasks, Queues: &fakeQueues{}, WorkQueueURL: workURL})
	w := request(t, h, srv, http.MethodGet, "/workflow?id="+url.QueryEscape("root/7"), nil)
	if w.Code != http.StatusOK {
		t.Fatalf("workflow: %d %s", w.Code, w.Body)
	}
	const shown = 199 // 200 tasks with the root
	total := 0
	for id, n := range tasks.gets {
		if n > 1 {
			t.Errorf("%s read %d times", id, n)
		}
		total += n
	}
	if total > shown+2 {
		t.Errorf("%d Gets for a tree of %d tasks", total, shown+1)
	}
	if len(tasks.idsOf) != 1 || tasks.idsOf["root"] != 1 {
		t.Errorf("ChildIDs calls: %v, want one, of root (the leaves have no children)", tasks.idsOf)
	}
	body := w.Body.String()
	left := fmt.Sprint(bigChildren - shown)
	if !strings.Contains(body, left+" more child task(s) not shown") || !strings.Contains(body, left+" child task(s) not shown") {
		t.Errorf("the page does not say %s children were left out:\n%s", left, body)
	}
	if !strings.Contains(body, "root/198") || strings.Contains(body, "root/199<") {
		t.Error("the page does not show the first 199 children alone")
	}
}

// Reading dead letters is a POST; the page's GET and its live refresh
// only read the depth.
func TestDeadLettersAreReadOnlyOnPost(t *testing.T) {
	t.Parallel()
	f := setup(t, 0)
	for _, target := range []string{"/dlq", "/dlq?live=1", "/dlq?queue="} {
		if body := f.get(t, target); strings.Contains(body, "m-1") {
			t.Errorf("GET %s shows a dead letter", target)
		}
	}
	if f.queues.peeks != 0 {
		t.Fatalf("GETs read the dead letters %d time(s)", f.queues.peeks)
	}
	if !strings.Contains(f.get(t, "/dlq"), `<form method="post" action="`+f.srv.Base()+`/dlq?queue=" class="action" id="read-dlq">`) {
		t.Error("the dead-letter page has no read button")
	}
	w := f.do(t, http.MethodPost, "/dlq?queue=", url.Values{"csrf": {ui.CSRFToken(f.srv, "/dlq")}})
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "m-1") || f.queues.peeks != 1 {
		t.Fatalf("POST /dlq: %d, %d read(s)\n%s", w.Code, f.queues.peeks, w.Body)
	}
	// Its live refresh is a GET.
	if !strings.Contains(w.Body.String(), `data-live="`+f.srv.Base()+`/dlq?live=1&amp;queue="`) {
		t.Errorf("the read page's live URL is not a GET of the depth:\n%s", w.Body)
	}
}

// The first visit's redirect stays on this server, under its base,
// whatever its path; outside the base there is no redirect at all.
func TestFirstVisitRedirectStaysLocal(t *testing.T) {
	t.Parallel()
	for target, want := range map[string]string{
		"//evil.example/?token=":      "/evil.example",
		"///evil.example/x?token=":    "/evil.example/x",
		"/\\evil.example/?token=":     "/",
		"/../../evil.example?token=":  "/evil.example",
		"/tasks/../task?id=a&token=":  "/task?id=a",
		"/workflow?id=%2F%2Fx&token=": "/workflow?id=%2F%2Fx",
		"?token=":                     "/",
	} {
		// A server each: the start token opens one session.
		srv, h := serveWith(t, ui.Config{Tasks: &bigMap{}, Queues: &fakeQueues{}, WorkQueueURL: workURL})
		start, err := url.Parse(srv.StartURL(addr))
		if err != nil {
			t.Fatal(err)
		}
		p, q, _ := strings.Cut(target, "?")
		for _, under := range []bool{false, true} {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.URL = &url.URL{Path: p, RawQuery: q + start.Query().Get("token")}
			if under {
				r.URL.Path = srv.Base() + p
			}
			r.RequestURI = r.URL.RequestURI()
			r.Host = addr
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			switch {
			case under && (w.Code != http.StatusSeeOther || w.Header().Get("Location") != srv.Base()+want):
				t.Errorf("%s under the base: %d, Location %q, want %q", target, w.Code, w.Header().Get("Location"), srv.Base()+want)
			case !under && (w.Code != http.StatusNotFound || w.Header().Get("Location") != ""):
				t.Errorf("%s outside the base: %d, Location %q, want 404", target, w.Code, w.Header().Get("Location"))
			}
		}
	}
}

// Each handler of one server keeps its own hosts and cookie.
func TestHandlersKeepTheirOwnState(t *testing.T) {
	t.Parallel()
	f := setup(t, 0)
	other := f.srv.Handler("127.0.0.1:9001")
	for _, c := range []struct {
		h      http.Handler
		host   string
		cookie string
		want   int
	}{
		{f.h, addr, "leasehold_ui_8123", http.StatusOK},
		{other, "127.0.0.1:9001", "leasehold_ui_9001", http.StatusOK},
		{f.h, "127.0.0.1:9001", "leasehold_ui_8123", http.StatusForbidden},
		{other, addr, "leasehold_ui_9001", http.StatusForbidden},
		{f.h, addr, "leasehold_ui_9001", http.StatusForbidden},
	} {
		r := httptest.NewRequest(http.MethodGet, f.srv.Base()+"/queues", nil)
		r.Host = c.host
		r.AddCookie(&http.Cookie{Name: c.cookie, Value: f.cookie.Value})
		w := httptest.NewRecorder()
		c.h.ServeHTTP(w, r)
		if w.Code != c.want {
			t.Errorf("Host %s, cookie %s: %d, want %d", c.host, c.cookie, w.Code, c.want)
		}
	}
}
