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
	return fmt.Errorf("redrive message %s: dead letter not found: %w", id, leasehold.ErrNotFound)
}

type fixture struct {
	env    *leaseholdtest.Env
	srv    *ui.Server
	h      http.Handler
	queues *fakeQueues
	// cookie is the session's, set by the first visit of the start URL.
	cookie *http.Cookie
}

// newFixture serves srv on addr and opens its session with the start URL.
func newFixture(t *testing.T, env *leaseholdtest.Env, srv *ui.Server, q *fakeQueues) *fixture {
	t.Helper()
	f := &fixture{env: env, srv: srv, h: srv.Handler(addr), queues: q}
	f.cookie = firstVisit(t, f.h, srv)
	return f
}

// startTarget is the path and query of srv's start URL.
func startTarget(t *testing.T, srv *ui.Server) string {
	t.Helper()
	u, err := url.Parse(srv.StartURL(addr))
	if err != nil {
		t.Fatal(err)
	}
	return u.RequestURI()
}

// firstVisit opens the start URL on h and returns the session cookie.
func firstVisit(t *testing.T, h http.Handler, srv *ui.Server) *http.Cookie {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, startTarget(t, srv), nil)
	r.Host = addr
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	c := w.Result().Cookies()
	if w.Code != http.StatusSeeOther || len(c) != 1 {
		t.Fatalf("first visit: %d, cookies %v: %s", w.Code, c, w.Body)
	}
	return c[0]
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
		if _, err := workflow.All(ctx, "kids", workflow.Child{Kind: "ok", Payload: 1}, workflow.Child{Kind: "ok", Payload: 2}); err != nil {
			return nil, err
		}
		return "done", nil
	})
	leasehold.Handle(hs, "hook", func(ctx context.Context, _ *leasehold.Task[json.RawMessage]) (any, error) {
		answer, err := workflow.WaitForCallback[json.RawMessage](ctx, "hook", time.Hour, func(context.Context, string) error { return nil })
		var refused *workflow.CallbackFailedError
		if errors.As(err, &refused) {
			return nil, leasehold.Fail(err) // a refusal ends the task
		}
		return answer, err
	})
	env := leaseholdtest.New(t, hs)
	for i := range 7 {
		if _, err := env.Enqueue(leasehold.Submission{Kind: "ok", Payload: i, ID: fmt.Sprintf("ok-%d", i)}); err != nil {
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
		if _, err := env.Enqueue(leasehold.Submission{Kind: e.kind, Payload: e.p, ID: e.id}); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.Run(); err != nil {
		t.Fatal(err)
	}
	// Run moves the clock to a wait's deadline once nothing else is due:
	// the callback task gets one delivery, and waits.
	for _, id := range []string{"hook-1", "hook-2"} {
		if _, err := env.Enqueue(leasehold.Submission{Kind: "hook", ID: id}); err != nil {
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
	return newFixture(t, env, srv, q)
}

type reqOpt func(*http.Request)

func noCookie(r *http.Request) { r.Header.Del("Cookie") }

func header(k, v string) reqOpt { return func(r *http.Request) { r.Header.Set(k, v) } }

// do sends a request for target (relative to the base) with the session's
// cookie.
func (f *fixture) do(t *testing.T, method, target string, form url.Values, opts ...reqOpt) *httptest.ResponseRecorder {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	r := httptest.NewRequest(method, f.srv.Base()+target, body)
	r.Host = addr
	if form != nil {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.Header.Set("Origin", "http://"+addr)
	}
	r.AddCookie(&http.Cookie{Name: f.cookie.Name, Value: f.cookie.Value})
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

// action is the form of /action/name with its CSRF token, confirmed.
func (f *fixture) action(name string, fields ...string) url.Values {
	v := url.Values{"csrf": {ui.CSRFToken(f.srv, "/action/"+name)}, "confirm": {"yes"}}
	for i := 0; i+1 < len(fields); i += 2 {
		v.Set(fields[i], fields[i+1])
	}
	return v
}

func TestSessionAndActionsNeedTheToken(t *testing.T) {
	t.Parallel()
	f := setup(t, 0)
	cancelForm := f.action("cancel", "id", "hook-1")
	withCSRF := func(v string) url.Values {
		form := f.action("cancel", "id", "hook-1")
		form.Set("csrf", v)
		return form
	}
	noCSRF := f.action("cancel", "id", "hook-1")
	noCSRF.Del("csrf")
	readDLQ := url.Values{"csrf": {ui.CSRFToken(f.srv, "/dlq")}}
	cases := []struct {
		name   string
		method string
		target string
		form   url.Values
		opts   []reqOpt
		want   int
	}{
		{"page without session", http.MethodGet, "/", nil, []reqOpt{noCookie}, http.StatusForbidden},
		{"page with wrong cookie", http.MethodGet, "/", nil, []reqOpt{noCookie, header("Cookie", f.cookie.Name+"=nope")}, http.StatusForbidden},
		{"wrong token in URL", http.MethodGet, "/?token=nope", nil, []reqOpt{noCookie}, http.StatusForbidden},
		{"API token in URL", http.MethodGet, "/?token=" + f.srv.APIToken(), nil, []reqOpt{noCookie}, http.StatusForbidden},
		{"session id in header", http.MethodGet, "/", nil, []reqOpt{noCookie, header(ui.HeaderToken, f.cookie.Value)}, http.StatusForbidden},
		{"other Host (DNS rebinding)", http.MethodGet, "/", nil, []reqOpt{func(r *http.Request) { r.Host = "evil.example:8123" }}, http.StatusForbidden},
		{"action without CSRF token", http.MethodPost, "/action/cancel", noCSRF, nil, http.StatusForbidden},
		{"action with wrong CSRF token", http.MethodPost, "/action/cancel", withCSRF(strings.Repeat("A", 43)), nil, http.StatusForbidden},
		{"action with another form's CSRF token", http.MethodPost, "/action/cancel", withCSRF(ui.CSRFToken(f.srv, "/action/retry")), nil, http.StatusForbidden},
		{"action with the session id as CSRF token", http.MethodPost, "/action/cancel", withCSRF(f.cookie.Value), nil, http.StatusForbidden},
		{"action without session", http.MethodPost, "/action/cancel", cancelForm, []reqOpt{noCookie}, http.StatusForbidden},
		{"cross-origin action", http.MethodPost, "/action/cancel", cancelForm, []reqOpt{header("Origin", "http://evil.example")}, http.StatusForbidden},
		{"other port's action", http.MethodPost, "/action/cancel", cancelForm, []reqOpt{header("Origin", "http://127.0.0.1:3000")}, http.StatusForbidden},
		{"cross-site fetch", http.MethodPost, "/action/cancel", cancelForm, []reqOpt{func(r *http.Request) { r.Header.Del("Origin"); r.Header.Set("Sec-Fetch-Site", "cross-site") }}, http.StatusForbidden},
		{"action not confirmed", http.MethodPost, "/action/cancel", url.Values{"csrf": {ui.CSRFToken(f.srv, "/action/cancel")}, "id": {"hook-1"}}, nil, http.StatusBadRequest},
		{"action as GET", http.MethodGet, "/action/cancel?id=hook-1", nil, nil, http.StatusMethodNotAllowed},
		{"PUT", http.MethodPut, "/", nil, nil, http.StatusMethodNotAllowed},
		{"HEAD", http.MethodHead, "/dlq", nil, nil, http.StatusMethodNotAllowed},
		{"read dead letters without CSRF token", http.MethodPost, "/dlq", url.Values{}, nil, http.StatusForbidden},
		{"read dead letters with an action's CSRF token", http.MethodPost, "/dlq", url.Values{"csrf": {ui.CSRFToken(f.srv, "/action/redrive")}}, nil, http.StatusForbidden},
		{"read dead letters cross-origin", http.MethodPost, "/dlq", readDLQ, []reqOpt{header("Origin", "http://evil.example")}, http.StatusForbidden},
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
	// The same forms with their tokens pass.
	if w := f.do(t, http.MethodPost, "/dlq", readDLQ); w.Code != http.StatusOK {
		t.Fatalf("read dead letters with the page's CSRF token: %d %s", w.Code, w.Body)
	}
	if w := f.do(t, http.MethodPost, "/action/cancel", cancelForm); w.Code != http.StatusOK {
		t.Fatalf("cancel with the page's CSRF token: %d %s", w.Code, w.Body)
	}
}

// The start URL opens the session once: the first visit gets the cookie
// (under the base path alone) and is sent on without the token; any later
// visit with it is refused with a message that says what to do, cookie or
// not.
func TestStartURLWorksOnce(t *testing.T) {
	t.Parallel()
	f := setup(t, 0)
	c := f.cookie
	if c.Path != f.srv.Base() || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Domain != "" {
		t.Fatalf("cookie: %+v, want HttpOnly, SameSite=Strict, host-only, Path %s", c, f.srv.Base())
	}
	if len(f.srv.Base()) < 33 || strings.Contains(startTarget(t, f.srv), c.Value) || c.Value == f.srv.APIToken() {
		t.Fatalf("base %q, cookie %q: the session id must be new, and the base unguessable", f.srv.Base(), c.Value)
	}
	second := httptest.NewRequest(http.MethodGet, startTarget(t, f.srv), nil)
	second.Host = addr
	for _, withCookie := range []bool{false, true} {
		if withCookie {
			second.AddCookie(&http.Cookie{Name: c.Name, Value: c.Value})
		}
		w := httptest.NewRecorder()
		f.h.ServeHTTP(w, second)
		body := w.Body.String()
		if w.Code != http.StatusForbidden || len(w.Result().Cookies()) != 0 ||
			!strings.Contains(body, "already been used") || !strings.Contains(body, "restart `leasehold ui`") || !strings.Contains(body, "browser tab that already has the session") {
			t.Errorf("start URL used again (cookie %t): %d %v %q", withCookie, w.Code, w.Result().Cookies(), body)
		}
	}
	// The session it opened goes on.
	f.get(t, "/tasks")
}

// Nothing outside the base is served, the start URL included, and the
// base without its slash leads to the overview.
func TestOutsideTheBaseIsNotServed(t *testing.T) {
	t.Parallel()
	f := setup(t, 0)
	for _, target := range []string{"/", "/tasks", "/static/app.js", "/?token=x", f.srv.Base() + "x/", "/x" + f.srv.Base() + "/"} {
		r := httptest.NewRequest(http.MethodGet, target, nil)
		r.Host = addr
		r.AddCookie(&http.Cookie{Name: f.cookie.Name, Value: f.cookie.Value})
		w := httptest.NewRecorder()
		f.h.ServeHTTP(w, r)
		if w.Code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", target, w.Code)
		}
	}
	fresh, err := ui.New(ui.Config{Tasks: f.env.Client(), Queues: f.queues, WorkQueueURL: workURL})
	if err != nil {
		t.Fatal(err)
	}
	h := fresh.Handler(addr)
	r := httptest.NewRequest(http.MethodGet, strings.TrimPrefix(startTarget(t, fresh), fresh.Base()), nil)
	r.Host = addr
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusNotFound || len(w.Result().Cookies()) != 0 {
		t.Fatalf("start token outside the base: %d %v", w.Code, w.Result().Cookies())
	}
	// That did not use the token up.
	firstVisit(t, h, fresh)
	if w := f.do(t, http.MethodGet, "", nil); w.Code != http.StatusSeeOther || w.Header().Get("Location") != f.srv.Base()+"/" {
		t.Errorf("GET of the base: %d, Location %q", w.Code, w.Header().Get("Location"))
	}
}

func TestFirstVisitTradesTheTokenForACookie(t *testing.T) {
	t.Parallel()
	f := setup(t, 0)
	fresh, err := ui.New(ui.Config{Tasks: f.env.Client(), Queues: f.queues, WorkQueueURL: workURL})
	if err != nil {
		t.Fatal(err)
	}
	start, err := url.Parse(fresh.StartURL(addr))
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodGet, fresh.Base()+"/tasks?status=FAILED&"+start.RawQuery, nil)
	r.Host = addr
	w := httptest.NewRecorder()
	fresh.Handler(addr).ServeHTTP(w, r)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != fresh.Base()+"/tasks?status=FAILED" {
		t.Fatalf("first visit: %d, Location %q", w.Code, w.Header().Get("Location"))
	}
	c := w.Result().Cookies()
	if len(c) != 1 || c[0].Value == "" || !c[0].HttpOnly || c[0].SameSite != http.SameSiteStrictMode || c[0].Path != fresh.Base() {
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
	if strings.Contains(page.Body.String(), "<script>") || !strings.Contains(page.Body.String(), `<script src="`+f.srv.Base()+`/static/app.js" defer></script>`) {
		t.Error("the page has inline script, or lacks the embedded one")
	}
}

// hrefs finds every URL a page names in an attribute.
var hrefs = regexp.MustCompile(`(?:href|action|src|data-live)="([^"]*)"`)

// The pages' links, forms, assets and live URLs are all under the base.
func TestEveryURLIsUnderTheBase(t *testing.T) {
	t.Parallel()
	f := setup(t, 3)
	pages := map[string]string{}
	for _, target := range []string{"/", "/tasks?status=SUCCEEDED", "/tasks?status=SUCCEEDED&cursor=", "/task?id=boom-1", "/task?id=hook-1", "/task?id=parent-1",
		"/workflow?id=parent-1", "/queues", "/dlq", "/task?id=nosuch"} {
		pages[target] = f.do(t, http.MethodGet, target, nil).Body.String()
	}
	pages["POST /dlq"] = f.do(t, http.MethodPost, "/dlq", url.Values{"csrf": {ui.CSRFToken(f.srv, "/dlq")}}).Body.String()
	pages["POST /bulk"] = f.do(t, http.MethodPost, "/bulk", url.Values{"csrf": {ui.CSRFToken(f.srv, "/bulk")}, "action": {"cancel"}, "kind": {"hook"}}).Body.String()
	pages["POST /action/retry"] = f.do(t, http.MethodPost, "/action/retry", f.action("retry", "id", "boom-1")).Body.String()
	seen := 0
	for name, body := range pages {
		for _, m := range hrefs.FindAllStringSubmatch(body, -1) {
			seen++
			if !strings.HasPrefix(m[1], f.srv.Base()+"/") {
				t.Errorf("%s names %q, outside the base", name, m[1])
			}
		}
	}
	if seen < 50 {
		t.Fatalf("only %d URLs in the pages", seen)
	}
}

// Each form carries the CSRF token of its own action, and no page shows
// the session's id, the start token or the API token.
func TestFormsCarryTheirOwnCSRFToken(t *testing.T) {
	t.Parallel()
	f := setup(t, 0)
	secrets := map[string]string{"session id": f.cookie.Value, "API token": f.srv.APIToken(), "start token": strings.SplitN(startTarget(t, f.srv), "token=", 2)[1]}
	forms := regexp.MustCompile(`<form method="post" action="([^"?]*)[^"]*"[^>]*>[\s\S]*?<input type="hidden" name="csrf" value="([^"]*)">`)
	tokens := map[string]string{}
	for _, target := range []string{"/task?id=boom-1", "/task?id=hook-1", "/task?id=ok-1", "/queues", "/tasks", "/", "/dlq?live=1"} {
		body := f.get(t, target)
		for name, v := range secrets {
			if strings.Contains(body, v) {
				t.Errorf("%s shows the %s", target, name)
			}
		}
		for _, m := range forms.FindAllStringSubmatch(body, -1) {
			action := strings.TrimPrefix(m[1], f.srv.Base())
			if want := ui.CSRFToken(f.srv, action); m[2] != want || m[2] == "" {
				t.Errorf("%s: the form of %s carries %q, want %q", target, action, m[2], want)
			}
			tokens[action] = m[2]
		}
	}
	w := f.do(t, http.MethodPost, "/dlq", url.Values{"csrf": {ui.CSRFToken(f.srv, "/dlq")}})
	for _, m := range forms.FindAllStringSubmatch(w.Body.String(), -1) {
		tokens[strings.TrimPrefix(m[1], f.srv.Base())] = m[2]
	}
	for _, action := range []string{"/action/cancel", "/action/retry", "/action/complete", "/action/fail", "/action/pause", "/bulk", "/dlq", "/action/redrive"} {
		if tokens[action] == "" {
			t.Errorf("no form of %s found", action)
		}
	}
	distinct := map[string]bool{}
	for _, v := range tokens {
		distinct[v] = true
		for name, secret := range secrets {
			if v == secret {
				t.Errorf("a CSRF token is the %s", name)
			}
		}
	}
	if len(distinct) != len(tokens) {
		t.Errorf("%d actions share %d CSRF tokens", len(tokens), len(distinct))
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
	w := f.do(t, http.MethodPost, "/dlq", url.Values{"csrf": {ui.CSRFToken(f.srv, "/dlq")}})
	if body := w.Body.String(); w.Code != http.StatusOK || strings.Contains(body, xss) || !strings.Contains(body, "not JSON &lt;script&gt;") {
		t.Errorf("the dead-letter page does not show the escaped reason: %d\n%s", w.Code, body)
	}
}

var taskLink = regexp.MustCompile(`href="/[0-9a-f]{32}/task\?id=([^"]+)"`)

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
			target = strings.TrimPrefix(strings.ReplaceAll(m[1], "&amp;", "&"), f.srv.Base())
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
	// The complete form names the wait its page showed: an answer for
	// another attempt's wait is refused.
	m := regexp.MustCompile(`name="fence" value="(\d+)"><input type="hidden" name="attempt" value="(\d+)"><button>Complete`).FindStringSubmatch(f.get(t, "/task?id=hook-1"))
	if m == nil {
		t.Fatal("hook-1's complete form names no wait (fence and attempt)")
	}
	if w := f.do(t, http.MethodPost, "/action/complete", f.action("complete", "id", "hook-1", "fence", m[1]+"9", "attempt", m[2], "result", `1`)); w.Code == http.StatusOK || get("hook-1").Status != leasehold.StatusWaiting {
		t.Fatalf("complete of another fence's wait: %d %s; hook-1 %s", w.Code, w.Body, get("hook-1").Status)
	}
	post("complete", "id", "hook-1", "fence", m[1], "attempt", m[2], "result", `{"ok":true}`)
	if st := get("hook-1").Status; st == leasehold.StatusWaiting {
		t.Fatalf("hook-1 still waiting after complete")
	}
	post("fail", "id", "hook-2", "reason", "rejected by "+xss)
	// The handler reads the refusal when it runs again, and fails.
	f.env.SetMaxDeliveries(100)
	if err := f.env.Run(); err != nil {
		t.Fatal(err)
	}
	if info := get("hook-2"); info.Status != leasehold.StatusFailed || !strings.Contains(info.Error, "rejected by") {
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
	for _, want := range []string{`id="by-status"`, "SUCCEEDED", `<rect class="created"`, "(work queue)", `href="` + f.srv.Base() + `/dlq?queue="`} {
		if !strings.Contains(over, want) {
			t.Errorf("overview lacks %q", want)
		}
	}
	tree := f.get(t, "/workflow?id="+url.QueryEscape(workflow.ChildIDIn("parent-1", "kids", 1)))
	for _, want := range []string{"parent-1", workflow.ChildIDIn("parent-1", "kids", 0), workflow.ChildIDIn("parent-1", "kids", 1), `class="focus"`} {
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
	if !strings.Contains(queues, `action="`+f.srv.Base()+`/action/pause"`) {
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
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+f.srv.Base()+"/tasks", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(ui.HeaderToken, f.srv.APIToken())
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
	// One delivery each: the snooze and the failure, then Run stops at
	// its bound with both tasks PENDING.
	env.SetMaxDeliveries(2)
	for _, kind := range []string{"nap", "shaky"} {
		if _, err := env.Enqueue(leasehold.Submission{Kind: kind, ID: kind + "-1", MaxAttempts: 3}); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.Run(); err != nil && !errors.Is(err, leaseholdtest.ErrTooManyDeliveries) {
		t.Fatal(err)
	}
	for _, kind := range []string{"nap", "shaky"} {
		if st, err := env.Task(kind + "-1"); err != nil || st.Status != leasehold.StatusPending || st.Error == "" || st.Attempt != 1 && kind == "shaky" {
			t.Fatalf("%s: %+v %v, want PENDING with an error or reason after one run", kind, st, err)
		}
	}
	srv, err := ui.New(ui.Config{Tasks: env.Client(), Queues: &fakeQueues{}, WorkQueueURL: workURL, Now: env.Clock().Now})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, env, srv, nil)
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
	f = newFixture(t, env, again, nil)
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
