package ui

import (
	"bytes"
	"cmp"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"maps"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/admin"
	"github.com/leasehold/leasehold/internal/cli/rules"
)

//go:embed assets
var assets embed.FS

// Tasks is what the inspector asks of a *leasehold.Client.
type Tasks interface {
	Get(ctx context.Context, id string) (leasehold.TaskInfo, error)
	List(ctx context.Context, o leasehold.ListOptions) (leasehold.Page, error)
	Cancel(ctx context.Context, id string) (leasehold.TaskInfo, error)
	Retry(ctx context.Context, id string, extraAttempts int) (leasehold.TaskInfo, error)
	ChildIDs(ctx context.Context, parent string) ([]string, error)
	OperatorComplete(ctx context.Context, waiting leasehold.TaskInfo, result any) (leasehold.TaskInfo, error)
	OperatorFail(ctx context.Context, waiting leasehold.TaskInfo, reason string) (leasehold.TaskInfo, error)
	Inbox(ctx context.Context, t leasehold.TaskInfo, max int) (leasehold.TaskInfo, error)
}

// Queues is what the inspector asks of an *admin.Admin.
type Queues interface {
	QueueURL(ctx context.Context, name string) (string, error)
	QueueStats(ctx context.Context, url string) (admin.QueueStats, error)
	Paused(ctx context.Context, url string) (bool, time.Time)
	Pause(ctx context.Context, url string, paused bool) (admin.PauseReport, error)
	PeekDeadLetters(ctx context.Context, url string, max int) ([]admin.DeadLetter, error)
	RedriveDeadLetter(ctx context.Context, dlqURL, toURL, messageID string) error
}

// Defaults of Config.
const (
	DefaultScan = 1200
	// DefaultPageTime keeps every page within about 2.5 s whatever the
	// table holds: 2 s of reading, then the answer with what was read.
	DefaultPageTime       = 2 * time.Second
	DefaultPageSize       = 50
	DefaultRequestTimeout = 30 * time.Second
	// DefaultSessionIdle ends a session after half an hour without a
	// request of the operator's; DefaultSessionLifetime ends it half a day
	// after it opened, whatever it did.
	DefaultSessionIdle     = 30 * time.Minute
	DefaultSessionLifetime = 12 * time.Hour
	// maxQueues bounds the queues the overview reads depths of.
	maxQueues = 20
)

// Config configures a Server.
type Config struct {
	Tasks  Tasks
	Queues Queues
	// WorkQueueURL is the default work queue (tasks that name no queue).
	WorkQueueURL string
	// Scan bounds the tasks the overview reads when it is loaded (default
	// DefaultScan): the newest Scan/6 (rounded up, at most
	// rules.MaxListLimit) of each of the six statuses, a page of PageSize
	// at a time.
	Scan int
	// PageTime bounds the reading of tasks by a page (default
	// DefaultPageTime): the task list and a bulk dry run answer with what
	// they read in that time and a link to go on; the overview reads each
	// status at once, each with that much time, and shows a status it
	// did not finish as "at least N".
	PageTime time.Duration
	// PageSize is the tasks a page of the task list shows (default
	// DefaultPageSize).
	PageSize int
	// RequestTimeout bounds the work of one request, every AWS call in it
	// included (each call also has the client's own timeout).
	RequestTimeout time.Duration
	// SessionIdle ends the session after that long without a request of
	// the operator's (a live refresh is none); SessionLifetime ends it that
	// long after it opened, and the start URL that long after New if it was
	// never used. Defaults DefaultSessionIdle and DefaultSessionLifetime.
	SessionIdle     time.Duration
	SessionLifetime time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Server is the inspector. Build it with New; serve it with Serve.
type Server struct {
	cfg Config
	// admin is the Admin whose verbs on tasks (Select, Bulk, ListFiltered)
	// the bulk actions and the filtered task list call, through cfg.Tasks;
	// it makes no AWS call of its own.
	admin *admin.Admin
	// base is the path every page of this run is under: "/" and 32 random
	// hex digits. The session cookie's Path is base, so a browser sends it
	// to no other server on another port of the same host.
	base string
	// auth is the one-time start token and the session it opens; apiToken
	// is the long-lived token of the HeaderToken header.
	auth     *sessions
	apiToken string
	pages    map[string]*template.Template
	static   http.Handler

	// workName is the name of the work queue (the last part of
	// WorkQueueURL): a task recorded with it (a raw inline token, a
	// redriven message) is of the default work queue, shown as one queue.
	workName string

	mu     sync.Mutex
	queues map[string]bool // queue names seen in listings, not workName
}

// New checks cfg and draws the base path, the start token and the API
// token.
func New(cfg Config) (*Server, error) {
	if cfg.Tasks == nil || cfg.Queues == nil {
		return nil, errors.New("ui: Tasks and Queues are required")
	}
	cfg.Scan = cmp.Or(cfg.Scan, DefaultScan)
	cfg.PageSize = cmp.Or(cfg.PageSize, DefaultPageSize)
	cfg.RequestTimeout = cmp.Or(cfg.RequestTimeout, DefaultRequestTimeout)
	cfg.PageTime = cmp.Or(cfg.PageTime, DefaultPageTime)
	cfg.SessionIdle = cmp.Or(cfg.SessionIdle, DefaultSessionIdle)
	cfg.SessionLifetime = cmp.Or(cfg.SessionLifetime, DefaultSessionLifetime)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Scan < 1 || cfg.PageSize < 1 || cfg.PageSize > rules.MaxListLimit || cfg.RequestTimeout < 0 || cfg.PageTime < 0 {
		return nil, fmt.Errorf("ui: scan %d, page size %d (1..%d) or request timeout %s out of range", cfg.Scan, cfg.PageSize, rules.MaxListLimit, cfg.RequestTimeout)
	}
	if cfg.SessionIdle < 0 || cfg.SessionLifetime < 0 {
		return nil, fmt.Errorf("ui: session idle limit %s and lifetime %s must be positive", cfg.SessionIdle, cfg.SessionLifetime)
	}
	var secrets [3]string
	for i := range secrets {
		t, err := newToken()
		if err != nil {
			return nil, fmt.Errorf("ui: draw tokens: %w", err)
		}
		secrets[i] = t
	}
	base := "/" + secrets[0][:32]
	pages, err := parsePages(base)
	if err != nil {
		return nil, err
	}
	static, err := fs.Sub(assets, "assets/static")
	if err != nil {
		return nil, err
	}
	return &Server{
		cfg: cfg, base: base, pages: pages, admin: admin.New(admin.Config{Tasks: cfg.Tasks}),
		auth:     &sessions{start: secrets[1], issued: cfg.Now(), idle: cfg.SessionIdle, lifetime: cfg.SessionLifetime},
		apiToken: secrets[2],
		static:   http.StripPrefix(base+"/static/", http.FileServerFS(static)),
		queues:   map[string]bool{},
		workName: workQueueName(cfg.WorkQueueURL),
	}, nil
}

// StartURL is the URL to open first, on host (the listener's host:port):
// the inspector's overview with the start token. Its first visit opens the
// session; any later one is refused.
func (s *Server) StartURL(host string) string {
	u := url.URL{Scheme: "http", Host: host, Path: s.base + "/", RawQuery: url.Values{queryToken: {s.auth.start}}.Encode()}
	return u.String()
}

// Base is the path every page is under (no trailing slash).
func (s *Server) Base() string { return s.base }

// APIToken is the token a client other than a browser sends in the
// HeaderToken header instead of a session cookie. It lasts as long as the
// server, needs no CSRF token, and no URL or page shows it; `leasehold ui`
// gives it to no one.
func (s *Server) APIToken() string { return s.apiToken }

// Handler serves the inspector, under Base, to requests whose Host is one
// of addr's (the listener's host:port; see hostsOf). Each handler keeps
// its own hosts and cookie name: one Server may serve several addresses,
// with one session.
func (s *Server) Handler(addr string) http.Handler {
	g := gate{s: s, hosts: hostsOf(addr), cookie: "leasehold_ui"}
	if _, port, err := net.SplitHostPort(addr); err == nil {
		// Cookies ignore ports: two inspectors on one host keep theirs apart.
		g.cookie = "leasehold_ui_" + port
	}
	// The patterns name the base, so that the mux's own redirects (of a
	// path to its clean form) stay under it.
	mux := http.NewServeMux()
	b := s.base
	mux.Handle("GET "+b+"/static/", s.static)
	mux.HandleFunc("GET "+b+"/{$}", s.overview)
	mux.HandleFunc("GET "+b+"/tasks", s.tasks)
	mux.HandleFunc("GET "+b+"/task", s.task)
	mux.HandleFunc("GET "+b+"/workflow", s.workflow)
	mux.HandleFunc("GET "+b+"/queues", s.queuesPage)
	mux.HandleFunc("GET "+b+"/dlq", s.deadLetters)
	mux.HandleFunc("POST "+b+"/dlq", s.deadLetters)
	mux.HandleFunc("POST "+b+"/action/{name}", s.action)
	mux.HandleFunc("POST "+b+"/bulk", s.bulk)
	return g.guard(mux)
}

// Serve serves the inspector on ln until ctx ends, then shuts the server
// down and returns: it waits up to 5 s for requests under way, then
// closes their connections.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.Handler(ln.Addr().String()),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      s.cfg.RequestTimeout + 10*time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(sctx)
	if err != nil {
		// Requests still under way: cut them off.
		_ = srv.Close()
	}
	if serr := <-done; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}

// refreshEvery is the seconds between live refreshes of each page with
// one: a task page reads one task and the queue pages read queue
// attributes; the task list and a workflow read up to a page of tasks or
// a tree, so they refresh less often.
var refreshEvery = map[string]int{
	"overview": 5,
	"queues":   5,
	"dlq":      5,
	"task":     2,
	"tasks":    10,
	"workflow": 10,
}

// view is what every page template gets.
type view struct {
	Title string
	Nav   string
	// sess is the request's session, whose key makes the forms' CSRF
	// tokens; nil for a client with the API token.
	sess *session
	// Live is the URL the page's data polls (under the base); empty for a
	// page without.
	// Every is the seconds between two polls (the script doubles it after
	// a failure, up to a minute).
	Live  string
	Every int
	Now   time.Time
	Data  any
}

// CSRF is the CSRF token of the form whose action is the URL action
// (relative to the base; its query is not part of what the token binds).
func (v view) CSRF(action string) string {
	if v.sess == nil {
		return ""
	}
	p, _, _ := strings.Cut(action, "?")
	return v.sess.csrfToken(p)
}

// parsePages parses the templates of a server whose pages are under base:
// their "at" function puts a URL relative to the base under it. Every
// link, form action and asset of a page goes through it.
func parsePages(base string) (map[string]*template.Template, error) {
	fm := maps.Clone(funcs)
	fm["at"] = func(u string) string { return base + u }
	tmpl, err := template.New("layout.html").Funcs(fm).ParseFS(assets, "assets/layout.html")
	if err != nil {
		return nil, fmt.Errorf("ui: templates: %w", err)
	}
	names, err := fs.Glob(assets, "assets/page_*.html")
	if err != nil {
		return nil, err
	}
	pages := map[string]*template.Template{}
	for _, n := range names {
		t, err := template.Must(tmpl.Clone()).ParseFS(assets, n)
		if err != nil {
			return nil, fmt.Errorf("ui: templates: %w", err)
		}
		name := strings.TrimSuffix(strings.TrimPrefix(n, "assets/page_"), ".html")
		pages[name] = t
	}
	return pages, nil
}

// render writes page name with data; for a live request (live=1), JSON
// whose html is the page's "live" template.
func (s *Server) render(w http.ResponseWriter, r *http.Request, code int, name, title string, data any) {
	t := s.pages[name]
	v := view{Title: title, Nav: name, sess: sessionOf(r.Context()), Now: s.cfg.Now().UTC(), Data: data}
	if t.Lookup("live") != nil {
		q := r.URL.Query()
		q.Set("live", "1")
		v.Live = r.URL.Path + "?" + q.Encode()
		v.Every = refreshEvery[name]
	}
	var buf bytes.Buffer
	if r.URL.Query().Get("live") == "1" && t.Lookup("live") != nil {
		if err := t.ExecuteTemplate(&buf, "live", v); err != nil {
			http.Error(w, "render: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(map[string]string{"html": buf.String(), "at": v.Now.Format(time.TimeOnly)})
		return
	}
	if err := t.ExecuteTemplate(&buf, "layout", v); err != nil {
		http.Error(w, "render: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

// fail renders err on the error page with the status it maps to.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	code := http.StatusInternalServerError
	var unreachable *leasehold.UnreachableError
	switch {
	case errors.Is(err, leasehold.ErrNotFound):
		code = http.StatusNotFound
	case errors.Is(err, leasehold.ErrInvalid), errors.As(err, new(badRequest)):
		code = http.StatusBadRequest
	case errors.Is(err, leasehold.ErrFinished), errors.Is(err, leasehold.ErrNotWaiting), errors.Is(err, admin.ErrDeadLetterSource):
		code = http.StatusConflict
	case errors.As(err, &unreachable), errors.As(err, new(*leasehold.MissingResourceError)), errors.Is(err, context.DeadlineExceeded):
		code = http.StatusBadGateway
	}
	s.render(w, r, code, "error", http.StatusText(code), err.Error())
}

// badRequest is a mistake in a request's parameters.
type badRequest string

func (b badRequest) Error() string { return string(b) }

// budget is the request's context bounded by RequestTimeout.
func (s *Server) budget(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
}

// stopBy is when a page's reading of tasks should have answered: PageTime
// from now (leasehold.ListOptions.StopBy). It is no deadline: the calls
// under way end, and the first is always made, so a page goes on however
// slow the table is.
func (s *Server) stopBy() time.Time { return time.Now().Add(s.cfg.PageTime) }

// cutOff is ctx bounded a quarter of PageTime past stopBy: a listing read
// still under way then (a table so slow that even a page's first read
// does not answer: the emulator with tens of thousands of tasks) is cut
// off, and the page answers with what the reads before it gave.
func (s *Server) cutOff(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.cfg.PageTime+s.cfg.PageTime/4)
}

// sawQueues remembers the queue names of listed tasks, for the queues page.
func (s *Server) sawQueues(tasks []leasehold.TaskInfo) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range tasks {
		if q := s.queueOf(t); q != "" && len(s.queues) < maxQueues {
			s.queues[q] = true
		}
	}
}

// queueOf is t's queue as the inspector shows it: "" for the default work
// queue, whether the task was recorded with "" or with its name.
func (s *Server) queueOf(t leasehold.TaskInfo) string {
	if t.Queue == s.workName {
		return ""
	}
	return t.Queue
}

// workQueueName is the last part of a queue URL's path: the queue's name.
func workQueueName(queueURL string) string {
	u, err := url.Parse(queueURL)
	if err != nil || strings.Trim(u.Path, "/") == "" {
		return ""
	}
	return path.Base(u.Path)
}
