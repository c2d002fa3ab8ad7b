package ui_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/admin"
	"github.com/leasehold/leasehold/internal/cli/ui"
	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/workflow"
)

const (
	addr    = "127.0.0.1:8123"
	workURL = "https://sqs.test.invalid/000000000000/work"
	deadURL = "https://sqs.test.invalid/000000000000/work-dlq"
	xss     = `<script>alert("x")</script>`
)

// fakeQueues stands in for admin.Admin: one work queue with a dead-letter
// queue.
type fakeQueues struct {
	mu       sync.Mutex
	peeks    int
	paused   bool
	letters  []admin.DeadLetter
	redriven []string
}

func (f *fakeQueues) QueueURL(_ context.Context, name string) (string, error) {
	return "https://sqs.test.invalid/000000000000/" + name, nil
}

func (f *fakeQueues) QueueStats(_ context.Context, u string) (admin.QueueStats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if u == workURL {
		return admin.QueueStats{URL: u, Visible: 4, InFlight: 1, DeadLetterURL: deadURL}, nil
	}
	return admin.QueueStats{URL: u, Visible: len(f.letters)}, nil
}

func (f *fakeQueues) Paused(context.Context, string) (bool, time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.paused, time.Time{}
}

func (f *fakeQueues) Pause(_ context.Context, u string, paused bool) (admin.PauseReport, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.paused = paused
	return admin.PauseReport{QueueURL: u, Paused: paused}, nil
}

func (f *fakeQueues) PeekDeadLetters(context.Context, string, int) ([]admin.DeadLetter, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.peeks++
	return append([]admin.DeadLetter(nil), f.letters...), nil
}

func (f *fakeQueues) RedriveDeadLetter(_ context.Context, dlq, to, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, l := range f.letters {
		if l.MessageID == id && dlq == deadURL && to == workURL {
			f.letters = append(f.letters[:i], f.letters[i+1:]...)
			f.redriven = append(f.redriven, id)
			return nil
		}
	}
	return admin.ErrDeadLetterNotFound
}

type fixture struct {
	env    *leaseholdtest.Env
	srv    *ui.Server
	h      http.Handler
	queues *fakeQueues
}

// setup runs a few tasks in an in-memory Env: succeeded "ok" tasks, a
// failed "boom" whose payload and error carry markup, a parent with two
// children and one waiting for a callback.
func setup(t *testing.T, pageSize int) *fixture {
	t.Helper()
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "ok", func(_ context.Context, t *leasehold.Task[json.RawMessage]) (json.RawMessage, error) {
		return t.Payload, nil
	})
	leasehold.Handle(hs, "boom", func(_ context.Context, t *leasehold.Task[struct{ Msg string }]) (any, error) {
		return nil, leasehold.Fail(errors.New(t.Payload.Msg))
	})
	leasehold.Handle(hs, "parent", func(ctx context.Context, _ *leasehold.Task[json.RawMessage]) (any, error) {
		if _, ok := workflow.Children(ctx); !ok {
			return nil, workflow.AwaitChildren(workflow.Child{Kind: "ok", Payload: 1}, workflow.Child{Kind: "ok", Payload: 2})
		}
		return "done", nil
	})
	leasehold.Handle(hs, "hook", func(ctx context.Context, _ *leasehold.Task[json.RawMessage]) (any, error) {
		if _, err := workflow.CallbackToken(ctx); err != nil {
			return nil, err
		}
		return nil, workflow.AwaitCallback(time.Hour)
	})
	env := leaseholdtest.New(t, hs)
	for i := range 7 {
		if _, err := env.Enqueue("ok", i, leasehold.ID(fmt.Sprintf("ok-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range []struct {
		id, kind string
		p        any
	}{
		{"boom-1", "boom", map[string]string{"Msg": "bad " + xss, "Note": xss}},
		{"parent-1", "parent", nil},
	} {
		if _, err := env.Enqueue(e.kind, e.p, leasehold.ID(e.id)); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.Run(); err != nil {
		t.Fatal(err)
	}
	// Run moves the clock to a wait's deadline once nothing else is due:
	// the callback task gets one delivery, and waits.
	for _, id := range []string{"hook-1", "hook-2"} {
		if _, err := env.Enqueue("hook", nil, leasehold.ID(id)); err != nil {
			t.Fatal(err)
		}
	}
	env.SetMaxDeliveries(2)
	if err := env.Run(); err != nil && !errors.Is(err, leaseholdtest.ErrTooManyDeliveries) {
		t.Fatal(err)
	}
	for _, id := range []string{"hook-1", "hook-2"} {
		if st, err := env.Task(id); err != nil || st.Status != leasehold.StatusWaiting {
			t.Fatalf("%s: %+v %v", id, st, err)
		}
	}
	q := &fakeQueues{letters: []admin.DeadLetter{{MessageID: "m-1", Body: xss, Reason: "not JSON " + xss}}}
	srv, err := ui.New(ui.Config{Tasks: env.Client(), Queues: q, WorkQueueURL: workURL, PageSize: pageSize, Now: env.Clock().Now})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{env: env, srv: srv, h: srv.Handler(addr), queues: q}
}

type reqOpt func(*http.Request)

func noCookie(r *http.Request) { r.Header.Del("Cookie") }

func header(k, v string) reqOpt { return func(r *http.Request) { r.Header.Set(k, v) } }

func (f *fixture) do(t *testing.T, method, target string, form url.Values, opts ...reqOpt) *httptest.ResponseRecorder {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	r := httptest.NewRequest(method, target, body)
	r.Host = addr
	if form != nil {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.Header.Set("Origin", "http://"+addr)
	}
	r.AddCookie(&http.Cookie{Name: "leasehold_ui_8123", Value: f.srv.Token()})
	for _, o := range opts {
		o(r)
	}
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, r)
	return w
}

func (f *fixture) get(t *testing.T, target string) string {
	t.Helper()
	w := f.do(t, http.MethodGet, target, nil)
	if w.Code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", target, w.Code, w.Body)
	}
	return w.Body.String()
}

func (f *fixture) action(name string, fields ...string) url.Values {
	v := url.Values{"token": {f.srv.Token()}, "confirm": {"yes"}}
	for i := 0; i+1 < len(fields); i += 2 {
		v.Set(fields[i], fields[i+1])
	}
	return v
}

func TestSessionAndActionsNeedTheToken(t *testing.T) {
	t.Parallel()
	f := setup(t, 0)
	cancelForm := f.action("cancel", "id", "hook-1")
	wrongToken := f.action("cancel", "id", "hook-1")
	wrongToken.Set("token", strings.Repeat("0", 64))
	noToken := f.action("cancel", "id", "hook-1")
	noToken.Del("token")
	cases := []struct {
		name   string
		method string
		target string
		form   url.Values
		opts   []reqOpt
		want   int
	}{
		{"page without session", http.MethodGet, "/", nil, []reqOpt{noCookie}, http.StatusForbidden},
		{"page with wrong cookie", http.MethodGet, "/", nil, []reqOpt{noCookie, header("Cookie", "leasehold_ui_8123=nope")}, http.StatusForbidden},
		{"wrong token in URL", http.MethodGet, "/?token=nope", nil, []reqOpt{noCookie}, http.StatusForbidden},
		{"other Host (DNS rebinding)", http.MethodGet, "/", nil, []reqOpt{func(r *http.Request) { r.Host = "evil.example:8123" }}, http.StatusForbidden},
		{"action without token", http.MethodPost, "/action/cancel", noToken, nil, http.StatusForbidden},
		{"action with wrong token", http.MethodPost, "/action/cancel", wrongToken, nil, http.StatusForbidden},
		{"action without session", http.MethodPost, "/action/cancel", cancelForm, []reqOpt{noCookie}, http.StatusForbidden},
		{"cross-origin action", http.MethodPost, "/action/cancel", cancelForm, []reqOpt{header("Origin", "http://evil.example")}, http.StatusForbidden},
		{"cross-site fetch", http.MethodPost, "/action/cancel", cancelForm, []reqOpt{func(r *http.Request) { r.Header.Del("Origin"); r.Header.Set("Sec-Fetch-Site", "cross-site") }}, http.StatusForbidden},
		{"action not confirmed", http.MethodPost, "/action/cancel", url.Values{"token": {f.srv.Token()}, "id": {"hook-1"}}, nil, http.StatusBadRequest},
		{"action as GET", http.MethodGet, "/action/cancel?id=hook-1", nil, nil, http.StatusMethodNotAllowed},
		{"PUT", http.MethodPut, "/", nil, nil, http.StatusMethodNotAllowed},
		{"HEAD", http.MethodHead, "/dlq", nil, nil, http.StatusMethodNotAllowed},
		{"read dead letters without token", http.MethodPost, "/dlq", url.Values{}, nil, http.StatusForbidden},
		{"read dead letters cross-origin", http.MethodPost, "/dlq", url.Values{"token": {f.srv.Token()}}, []reqOpt{header("Origin", "http://evil.example")}, http.StatusForbidden},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := f.do(t, c.method, c.target, c.form, c.opts...)
			if w.Code != c.want {
				t.Fatalf("%s %s: got %d, want %d: %s", c.method, c.target, w.Code, c.want, w.Body)
			}
		})
	}
	if f.queues.peeks != 0 {
		t.Errorf("refused requests read the dead letters %d time(s)", f.queues.peeks)
	}
	// None of them changed the task.
	if info, err := f.env.Client().Get(t.Context(), "hook-1"); err != nil || info.Status != leasehold.StatusWaiting {
		t.Fatalf("hook-1 after refused actions: %v %v", info.Status, err)
	}
}

func TestFirstVisitTradesTheTokenForACookie(t *testing.T) {
	t.Parallel()
	f := setup(t, 0)
	w := f.do(t, http.MethodGet, "/tasks?status=FAILED&token="+f.srv.Token(), nil, noCookie)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/tasks?status=FAILED" {
		t.Fatalf("first visit: %d, Location %q", w.Code, w.Header().Get("Location"))
	}
	c := w.Result().Cookies()
	if len(c) != 1 || c[0].Value != f.srv.Token() || !c[0].HttpOnly || c[0].SameSite != http.SameSiteStrictMode {
		t.Fatalf("cookie: %+v", c)
	}
	page := f.do(t, http.MethodGet, "/", nil)
	for k, want := range map[string]string{
		"X-Frame-Options":         "DENY",
		"Content-Security-Policy": "script-src 'self'",
	} {
		if !strings.Contains(page.Header().Get(k), want) {
			t.Errorf("%s = %q, want %q in it", k, page.Header().Get(k), want)
		}
	}
	if strings.Contains(page.Body.String(), "<script>") || !strings.Contains(page.Body.String(), `<script src="/static/app.js" defer></script>`) {
		t.Error("the page has inline script, or lacks the embedded one")
	}
}

func TestTaskTextIsEscaped(t *testing.T) {
	t.Parallel()
	f := setup(t, 0)
	for _, target := range []string{"/task?id=boom-1", "/tasks?status=FAILED", "/tasks?status=FAILED&live=1", "/workflow?id=boom-1"} {
		body := f.get(t, target)
		if strings.Contains(body, xss) || strings.Contains(body, `<script>alert`) {
			t.Errorf("%s renders the markup unescaped", target)
		}
	}
	body := f.get(t, "/task?id=boom-1")
	if !strings.Contains(body, "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;") {
		t.Errorf("the task page does not show the escaped payload/error:\n%s", body)
	}
	w := f.do(t, http.MethodPost, "/dlq", url.Values{"token": {f.srv.Token()}})
	if body := w.Body.String(); w.Code != http.StatusOK || strings.Contains(body, xss) || !strings.Contains(body, "not JSON &lt;script&gt;") {
		t.Errorf("the dead-letter page does not show the escaped reason: %d\n%s", w.Code, body)
	}
}

var taskLink = regexp.MustCompile(`href="/task\?id=([^"]+)"`)

func ids(body string) []string {
	var out []string
	for _, m := range taskLink.FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

var nextLink = regexp.MustCompile(`href="([^"]+)" id="next"`)

func TestTaskListFiltersAndPages(t *testing.T) {
	t.Parallel()
	f := setup(t, 3)
	// 7 ok tasks and 1 parent succeeded (the children are listed under it).
	var seen []string
	target := "/tasks?status=succeeded&kind=ok"
	for pages := 0; target != ""; pages++ {
		if pages > 5 {
			t.Fatal("paging does not end")
		}
		body := f.get(t, target)
		got := ids(body)
		if len(got) == 0 || len(got) > 3 {
			t.Fatalf("%s: %d tasks: %v", target, len(got), got)
		}
		seen = append(seen, got...)
		target = ""
		if m := nextLink.FindStringSubmatch(body); m != nil {
			target = strings.ReplaceAll(m[1], "&amp;", "&")
		}
	}
	if len(seen) != 7 {
		t.Fatalf("paged through %d ok tasks, want 7: %v", len(seen), seen)
	}
	for i, id := range seen {
		if !strings.HasPrefix(id, "ok-") || (i > 0 && id == seen[i-1]) {
			t.Fatalf("unexpected listing %v", seen)
		}
	}
	for _, c := range []struct {
		target string
		want   []string
	}{
		{"/tasks?status=FAILED", []string{"boom-1"}},
		{"/tasks?prefix=par", []string{"parent-1"}},
		{"/tasks?kind=hook", []string{"hook-1", "hook-2"}},
		{"/tasks?queue=nosuch", nil},
		{"/tasks?prefix=ok-6&since=1h", []string{"ok-6"}},
	} {
		if got := ids(f.get(t, c.target)); strings.Join(got, ",") != strings.Join(c.want, ",") {
			t.Errorf("%s: %v, want %v", c.target, got, c.want)
		}
	}
	for _, bad := range []string{"/tasks?status=nope", "/tasks?since=yesterday", "/tasks?cursor=xyz"} {
		if w := f.do(t, http.MethodGet, bad, nil); w.Code != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", bad, w.Code)
		}
	}
}

func TestActions(t *testing.T) {
	t.Parallel()
	f := setup(t, 0)
	post := func(name string, fields ...string) string {
		t.Helper()
		w := f.do(t, http.MethodPost, "/action/"+name, f.action(name, fields...))
		if w.Code != http.StatusOK {
			t.Fatalf("%s: %d %s", name, w.Code, w.Body)
		}
		return w.Body.String()
	}
	get := func(id string) leasehold.TaskInfo {
		info, err := f.env.Client().Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		return info
	}
	if body := post("retry", "id", "boom-1", "attempts", "2"); !strings.Contains(body, "PENDING") || get("boom-1").Status != leasehold.StatusPending {
		t.Fatalf("retry: %s", body)
	}
	post("complete", "id", "hook-1", "result", `{"ok":true}`)
	if st := get("hook-1").Status; st == leasehold.StatusWaiting {
		t.Fatalf("hook-1 still waiting after complete")
	}
	post("fail", "id", "hook-2", "reason", "rejected by "+xss)
	if info := get("hook-2"); info.Status == leasehold.StatusWaiting || !strings.Contains(info.Error, "rejected by") {
		t.Fatalf("hook-2 after fail: %s %q", info.Status, info.Error)
	}
	if body := post("pause", "queue", ""); !strings.Contains(body, "is paused") || strings.Contains(body, "event source") {
		t.Fatalf("pause: %s", body)
	}
	if body := post("resume", "queue", ""); !strings.Contains(body, "not paused") {
		t.Fatalf("resume: %s", body)
	}
	if body := post("redrive", "queue", "", "message", "m-1"); !strings.Contains(body, "sent back") || len(f.queues.redriven) != 1 {
		t.Fatalf("redrive: %s", body)
	}
	if w := f.do(t, http.MethodPost, "/action/cancel", f.action("cancel", "id", "ok-1")); w.Code != http.StatusConflict {
		t.Fatalf("cancel of a finished task: %d, want 409", w.Code)
	}
	if w := f.do(t, http.MethodPost, "/action/complete", f.action("complete", "id", "ok-1", "result", "{")); w.Code != http.StatusBadRequest {
		t.Fatalf("complete with bad JSON: %d, want 400", w.Code)
	}
}

func TestPages(t *testing.T) {
	t.Parallel()
	f := setup(t, 0)
	over := f.get(t, "/")
	for _, want := range []string{`id="by-status"`, "SUCCEEDED", `<rect class="created"`, "(work queue)", `href="/dlq?queue="`} {
		if !strings.Contains(over, want) {
			t.Errorf("overview lacks %q", want)
		}
	}
	tree := f.get(t, "/workflow?id="+url.QueryEscape(workflow.ChildID("parent-1", 1)))
	for _, want := range []string{"parent-1", workflow.ChildID("parent-1", 0), workflow.ChildID("parent-1", 1), `class="focus"`} {
		if !strings.Contains(tree, want) {
			t.Errorf("workflow page lacks %q", want)
		}
	}
	var live struct{ HTML, At string }
	w := f.do(t, http.MethodGet, "/task?id=hook-1&live=1", nil)
	if err := json.Unmarshal(w.Body.Bytes(), &live); err != nil || !strings.Contains(live.HTML, `id="task-status"`) {
		t.Fatalf("live task data: %v %s", err, w.Body)
	}
	if !strings.Contains(f.get(t, "/task?id=hook-1"), `id="complete"`) {
		t.Error("a task waiting for a callback has no complete form")
	}
	if w := f.do(t, http.MethodGet, "/task?id=nosuch", nil); w.Code != http.StatusNotFound {
		t.Errorf("unknown task: %d, want 404", w.Code)
	}
	queues := f.get(t, "/queues")
	if !strings.Contains(queues, `action="/action/pause"`) {
		t.Error("queues page lacks the pause form")
	}
	// The pause tag is the one pause mechanism: no box to toggle the
	// Lambda event source mappings (docs/operations.md, "Pausing a queue").
	if strings.Contains(queues, `name="lambda"`) || strings.Contains(queues, "Lambda too") {
		t.Error("queues page still offers to toggle the Lambda event source mappings")
	}
	if w := f.do(t, http.MethodGet, "/static/app.js", nil); w.Code != http.StatusOK {
		t.Errorf("app.js: %d", w.Code)
	}
}

func TestPayloadShowsMarkupAsText(t *testing.T) {
	t.Parallel()
	f := setup(t, 0)
	body := f.get(t, "/task?id=boom-1")
	// The payload was stored as Go encodes it (\u003cscript\u003e); the
	// page shows the characters, escaped for HTML.
	if !strings.Contains(body, `&#34;Note&#34;: &#34;&lt;script&gt;alert(\&#34;x\&#34;)&lt;/script&gt;&#34;`) {
		t.Errorf("payload not shown as escaped text:\n%s", body)
	}
}

func TestServeStopsWhenItsContextEnds(t *testing.T) {
	t.Parallel()
	f := setup(t, 0)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- f.srv.Serve(ctx, ln) }()
	base := "http://" + ln.Addr().String()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/tasks", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(ui.HeaderToken, f.srv.Token())
	client := &http.Client{Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /tasks over the network: %d", resp.StatusCode)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
}

// A task whose attempt was handed back (a snooze here) shows the reason it
// waits, not an error; a task waiting to retry a failed attempt shows the
// error.
func TestHandedBackReasonIsNotAnError(t *testing.T) {
	t.Parallel()
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "nap", func(context.Context, *leasehold.Task[json.RawMessage]) (any, error) {
		return nil, leasehold.Snooze(time.Hour)
	})
	leasehold.Handle(hs, "shaky", func(context.Context, *leasehold.Task[json.RawMessage]) (any, error) {
		return nil, errors.New("shaky failed")
	})
	env := leaseholdtest.New(t, hs)
	env.SetMaxDeliveries(1)
	for _, kind := range []string{"nap", "shaky"} {
		if _, err := env.Enqueue(kind, nil, leasehold.ID(kind+"-1"), leasehold.MaxAttempts(3)); err != nil {
			t.Fatal(err)
		}
		if err := env.Run(); err != nil && !errors.Is(err, leaseholdtest.ErrTooManyDeliveries) {
			t.Fatal(err)
		}
		if st, err := env.Task(kind + "-1"); err != nil || st.Status != leasehold.StatusPending || st.Error == "" {
			t.Fatalf("%s: %+v %v, want PENDING with an error or reason", kind, st, err)
		}
	}
	srv, err := ui.New(ui.Config{Tasks: env.Client(), Queues: &fakeQueues{}, WorkQueueURL: workURL, Now: env.Clock().Now})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{env: env, srv: srv, h: srv.Handler(addr)}
	if body := f.get(t, "/task?id=nap-1"); !strings.Contains(body, `<h2>Waits because</h2><pre id="task-reason">`) || strings.Contains(body, `id="task-error"`) {
		t.Errorf("the snoozed task's page does not head its reason as such:\n%s", body)
	}
	if body := f.get(t, "/task?id=shaky-1"); !strings.Contains(body, `id="task-error">shaky failed`) || strings.Contains(body, `id="task-reason"`) {
		t.Errorf("the retrying task's page does not show its error:\n%s", body)
	}
	// The snoozed task as it reads once claimed again: RUNNING at the
	// attempt number it handed back.
	again, err := ui.New(ui.Config{Tasks: claimedAgain{env.Client()}, Queues: &fakeQueues{}, WorkQueueURL: workURL, Now: env.Clock().Now})
	if err != nil {
		t.Fatal(err)
	}
	f = &fixture{env: env, srv: again, h: again.Handler(addr)}
	if body := f.get(t, "/task?id=nap-1"); !strings.Contains(body, `<h2>Waited because</h2><pre id="task-reason">`) {
		t.Errorf("the task running again after its snooze does not head the reason as past:\n%s", body)
	}
}

// claimedAgain shows every task RUNNING at the attempt number of its last
// history entry, as a task claimed again after a hand-back reads.
type claimedAgain struct{ ui.Tasks }

func (c claimedAgain) Get(ctx context.Context, id string) (leasehold.TaskInfo, error) {
	t, err := c.Tasks.Get(ctx, id)
	if n := len(t.History); err == nil && n > 0 {
		t.Status, t.Attempt = leasehold.StatusRunning, t.History[n-1].Attempt
	}
	return t, err
}
