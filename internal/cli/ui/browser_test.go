package ui_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/admin"
	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/internal/cli/ui"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/dynamo"
)

// Environment of the browser test.
const (
	// envChromium names the browser binary; by default chromium (or
	// Chrome) is looked up on PATH (scripts/chromium.sh installs it).
	envChromium = "LEASEHOLD_CHROMIUM"
	// envScreenshots=1 saves a screenshot of each page to docs/ui/.
	envScreenshots = "LEASEHOLD_UI_SCREENSHOTS"
	envRequire     = "LEASEHOLD_REQUIRE_STACK"
)

// chromiumNames are the browsers looked up on PATH, in order, as
// scripts/chromium.sh does.
var chromiumNames = []string{"chromium", "chromium-browser", "google-chrome-stable", "google-chrome"}

// chromium finds the browser: LEASEHOLD_CHROMIUM when set, else the first
// of chromiumNames on PATH. Without one the test is skipped, or fails
// under LEASEHOLD_REQUIRE_STACK=1 (make test runs scripts/chromium.sh, which
// installs it, as its first step).
func chromium(t *testing.T) string {
	t.Helper()
	var msg string
	if p := os.Getenv(envChromium); p != "" {
		if _, err := exec.LookPath(p); err == nil {
			return p
		}
		msg = envChromium + "=" + p + " is not an executable"
	} else {
		for _, name := range chromiumNames {
			if p, err := exec.LookPath(name); err == nil {
				return p
			}
		}
		msg = "none of " + strings.Join(chromiumNames, ", ") + " is on PATH (scripts/chromium.sh installs chromium; or set " + envChromium + ")"
	}
	if os.Getenv(envRequire) == "1" {
		t.Fatal("the browser test needs Chromium: " + msg + " [" + envRequire + "=1]")
	}
	t.Skip(msg)
	return ""
}

// browserStack is the test's own table and queues with a few tasks in
// known states.
type browserStack struct {
	client           *leasehold.Client
	work, dlq        string
	sqs              *sqs.Client
	pending, doomed  string    // PENDING tasks: one to cancel in the browser, one from outside
	failed           string    // FAILED, to retry
	picks            [2]string // PENDING, selected on the task list and cancelled
	dep, waiter      string    // waiter runs after dep (WAITING)
	deadBody, deadID string    // a dead letter on the work DLQ
	kind             string
	rare             string // the one task of kind "rare", older than browserCommon tasks of another
}

// browserCommon is how many tasks of kind "common" the browser test's
// table holds beside its rare task: more than the task list reads in its
// 2 s when it reads the listing by status.
const browserCommon = 200

func newBrowserStack(t *testing.T, cfg aws.Config) *browserStack {
	t.Helper()
	table := awstest.NewTable(t, cfg)
	qs := awstest.NewQueues(t, cfg)
	c, err := leasehold.NewClient(leasehold.ClientConfig{AWS: cfg, Table: table, QueueURL: qs.Work})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	b := &browserStack{client: c, work: qs.Work, dlq: qs.WorkDLQ, sqs: sqs.NewFromConfig(cfg), kind: "browse"}
	enqueue := func(name string, s leasehold.Submission) string {
		s.ID = name + "-" + fmt.Sprint(time.Now().UnixNano())
		s.Kind, s.Payload = b.kind, map[string]string{"name": name, "note": "<b>not bold</b>"}
		if _, err := c.Enqueue(ctx, s); err != nil {
			t.Fatalf("enqueue %s: %v", name, err)
		}
		return s.ID
	}
	// A rare kind among many: its task the oldest of the table.
	b.rare = "rare-" + fmt.Sprint(time.Now().UnixNano())
	if _, err := c.Enqueue(ctx, leasehold.Submission{Kind: "rare", ID: b.rare}); err != nil {
		t.Fatalf("enqueue %s: %v", b.rare, err)
	}
	common := make([]leasehold.Submission, browserCommon)
	for i := range common {
		common[i] = leasehold.Submission{Kind: "common", ID: fmt.Sprintf("common-%d-%d", i, time.Now().UnixNano())}
	}
	res, err := c.EnqueueMany(ctx, common)
	if err != nil {
		t.Fatalf("enqueue the common tasks: %v", err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("enqueue %s: %v", r.Task.ID, r.Err)
		}
	}
	b.pending = enqueue("pending", leasehold.Submission{})
	b.doomed = enqueue("doomed", leasehold.Submission{})
	b.failed = enqueue("failed", leasehold.Submission{MaxAttempts: 1})
	b.picks = [2]string{enqueue("pick-a", leasehold.Submission{}), enqueue("pick-b", leasehold.Submission{})}
	b.dep = enqueue("dep", leasehold.Submission{})
	b.waiter = enqueue("waiter", leasehold.Submission{After: []string{b.dep}})
	// The pending task's inbox: two approvals and a note, none received.
	for i, topic := range []string{"approve", "approve", "note"} {
		if _, err := c.SendOnce(ctx, b.pending, topic, fmt.Sprintf("m-%d", i), map[string]any{"n": i, "note": "<b>not bold</b>"}); err != nil {
			t.Fatalf("send to %s: %v", b.pending, err)
		}
	}

	// Fail one through the store, as a worker whose handler failed would.
	store := dynamo.New(dynamodb.NewFromConfig(cfg), table, lease.Options{})
	held := awstest.Claim(t, ctx, store, b.failed, "browser-test")
	awstest.Release(t, ctx, store, held.LeaseOf(), lease.Release{Status: lease.StatusFailed, Error: "boom: <i>handler failed</i> \x1b[31mred\r\x00"})

	b.deadBody = `{"not":"a token"} ` + fmt.Sprint(time.Now().UnixNano())
	out, err := b.sqs.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl: aws.String(qs.WorkDLQ), MessageBody: aws.String(b.deadBody),
		MessageAttributes: map[string]sqstypes.MessageAttributeValue{
			"leasehold-reason": {DataType: aws.String("String"), StringValue: aws.String("token: unknown version <x>")},
		},
	})
	if err != nil {
		t.Fatalf("send dead letter: %v", err)
	}
	b.deadID = aws.ToString(out.MessageId)
	return b
}

// serve starts the inspector on a free loopback port and returns its
// start URL (with the token); the server stops when the test ends.
func serve(t *testing.T, b *browserStack, adm *admin.Admin) string {
	t.Helper()
	srv, err := ui.New(ui.Config{Tasks: b.client, Queues: adm, WorkQueueURL: b.work, Scan: 200, RequestTimeout: awstest.Scale(30 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return srv.StartURL(ln.Addr().String())
}

func TestBrowser(t *testing.T) {
	cfg := awstest.Config(t)
	browser := chromium(t)
	b := newBrowserStack(t, cfg)
	start := serve(t, b, admin.New(admin.Config{AWS: cfg}))
	base := strings.SplitN(start, "/?", 2)[0] // http://127.0.0.1:PORT/BASE
	su, err := url.Parse(start)
	if err != nil {
		t.Fatal(err)
	}
	basePath, startToken := strings.TrimSuffix(su.Path, "/"), su.Query().Get("token")
	// spy is another web server on this host, on another port: it records
	// the cookies the browser sends it.
	var (
		spyMu   sync.Mutex
		spied   []string
		spyHits int
	)
	spy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		spyMu.Lock()
		defer spyMu.Unlock()
		spyHits++
		for _, c := range r.Cookies() {
			spied = append(spied, c.Name)
		}
		_, _ = io.WriteString(w, "<!doctype html><title>other server</title><p>another server on this host")
	}))
	defer spy.Close()

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1280, 900))
	// The browser lives no longer than this bound.
	life, cancelLife := context.WithTimeout(t.Context(), awstest.Scale(10*time.Minute))
	defer cancelLife()
	actx, cancelAlloc := chromedp.NewExecAllocator(life, opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	// The first run starts the browser; it must not carry a step's timeout.
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start %s: %v", browser, err)
	}

	// The main tab's console errors, uncaught exceptions and failed
	// responses, and the icon responses it got: a normal visit of every
	// page must log none of the first three.
	var (
		consoleMu sync.Mutex
		problems  []string
		icons     int
	)
	if err := chromedp.Listen(bctx, func(ev any) {
		consoleMu.Lock()
		defer consoleMu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError {
				problems = append(problems, "console.error")
			}
		case *runtime.EventExceptionThrown:
			problems = append(problems, "exception: "+e.ExceptionDetails.Text)
		case *cdplog.EventEntryAdded:
			if e.Entry.Level == cdplog.EntryLevelError {
				problems = append(problems, "log: "+e.Entry.Text+" "+e.Entry.URL)
			}
		case *network.EventResponseReceived:
			if strings.Contains(e.Response.URL, "favicon") {
				icons++
			}
			if e.Response.Status >= 400 {
				problems = append(problems, fmt.Sprintf("HTTP %d %s", e.Response.Status, e.Response.URL))
			}
		}
	}); err != nil {
		t.Fatalf("listen to the console: %v", err)
	}
	// quiet fails the test if the main tab logged a problem since the last
	// call, and forgets them.
	quiet := func(what string) {
		t.Helper()
		consoleMu.Lock()
		defer consoleMu.Unlock()
		if len(problems) > 0 {
			t.Errorf("%s logged %d problem(s) in the console: %q", what, len(problems), problems)
		}
		problems = nil
	}
	// iconLoaded waits until the browser got an answer for the page's icon.
	iconLoaded := chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		for {
			consoleMu.Lock()
			n := icons
			consoleMu.Unlock()
			if n > 0 {
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("no answer for the page's icon: %w", ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
	})

	// step runs browser actions with a bounded time; the conditions inside
	// wait, never a fixed sleep.
	step := func(name string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		ctx, cancel := context.WithTimeout(bctx, awstest.Scale(90*time.Second))
		defer cancel()
		if err := chromedp.Do(ctx, actions...); err != nil {
			dctx, dcancel := context.WithTimeout(bctx, awstest.Scale(10*time.Second))
			defer dcancel()
			page, _ := chromedp.Run(dctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
			t.Fatalf("%s: %v; the page:\n%s", name, err, page)
		}
	}
	dir := filepath.Join("..", "..", "..", "docs", "ui")
	shots := os.Getenv(envScreenshots) == "1"
	if shots {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	shot := func(name string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			if !shots {
				return nil
			}
			png, err := chromedp.FullScreenshot(100)(ctx, tg)
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644)
		})
	}
	// has waits until the element matched by sel contains text.
	has := func(sel, text string) chromedp.Action[chromedp.Void] {
		js := fmt.Sprintf(`(() => { const e = document.querySelector(%q); return !!e && e.textContent.includes(%q); })()`, sel, text)
		return chromedp.Poll[chromedp.Void](js, chromedp.WithPollingInterval(200*time.Millisecond), chromedp.WithPollingTimeout(0))
	}
	visible := func(sel string) chromedp.Action[chromedp.Void] { return chromedp.WaitVisible(chromedp.CSS(sel)) }
	// submit clicks a button that navigates, and waits until the answer
	// has loaded.
	submit := func(button string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
			_, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(button)))
			return err
		})
	}
	confirmAndSubmit := func(form string) chromedp.Action[chromedp.Void] {
		return chromedp.Steps(chromedp.Click(chromedp.CSS(form+` input[name="confirm"]`)), submit(form+` button`))
	}
	text := func(sel string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(bctx, awstest.Scale(30*time.Second))
		defer cancel()
		// One evaluation: the live refresh replaces the nodes under #live.
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`(document.querySelector(%q) || {textContent: ""}).textContent`, sel)))
		if err != nil {
			t.Fatalf("read %s: %v", sel, err)
		}
		return s
	}
	taskPage := func(id string) string { return base + "/task?id=" + url.QueryEscape(id) }

	step("overview", chromedp.Navigate(start), visible(`#by-status`),
		has(`#by-status`, "PENDING"), has(`#queues`, "(work queue)"),
		// The per-minute charts' axes are labelled.
		has(`svg.chart`, "minutes ago"), has(`svg.chart`, "count"), has(`svg.chart`, "now"), shot("overview"))

	// The session's cookie: HttpOnly, SameSite=Strict, and sent under the
	// run's base path alone.
	var session *network.Cookie
	step("the session cookie", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		res, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{base + "/"}})
		if err != nil {
			return err
		}
		for _, c := range res.Cookies {
			if strings.HasPrefix(c.Name, "leasehold_ui") {
				session = c
			}
		}
		return nil
	}))
	if session == nil || session.Path != basePath || !session.HTTPOnly || session.SameSite != network.CookieSameSiteStrict || session.Value == "" {
		t.Fatalf("session cookie %+v, want HttpOnly, SameSite Strict, Path %s", session, basePath)
	}
	if session.Value == startToken || strings.Contains(start, session.Value) {
		t.Fatal("the session cookie carries the start token")
	}
	// inTab runs fn in a new tab of the browser (its cookies too), so that
	// the main tab stays on the inspector's pages.
	inTab := func(name string, fn func(ctx context.Context) error) {
		t.Helper()
		tab, closeTab := chromedp.NewContext(bctx)
		defer closeTab()
		ctx, cancel := context.WithTimeout(tab, awstest.Scale(90*time.Second))
		defer cancel()
		if err := fn(ctx); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	// visit opens u and returns its HTTP status and its text.
	visit := func(ctx context.Context, u string) (int64, string, error) {
		resp, err := chromedp.Run(ctx, chromedp.NavigateResponse(u))
		if err != nil {
			return 0, "", err
		}
		body, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
		return resp.Status, body, err
	}
	// Another server on this host, on another port, gets no cookie of the
	// inspector's: neither at its root nor at a path of the inspector's.
	inTab("another local server", func(ctx context.Context) error {
		for _, page := range []string{spy.URL + "/", spy.URL + "/tasks"} {
			if code, _, err := visit(ctx, page); err != nil || code != http.StatusOK {
				return fmt.Errorf("GET %s: HTTP %d, %v", page, code, err)
			}
		}
		return nil
	})
	spyMu.Lock()
	if spyHits < 2 || len(spied) != 0 {
		t.Errorf("the other server had %d request(s), with cookies %v; want none of the inspector's", spyHits, spied)
	}
	spyMu.Unlock()

	// The start URL works once: a second visit (the printed link clicked
	// again) is refused, with a message that says what to do.
	inTab("start URL used twice", func(ctx context.Context) error {
		code, body, err := visit(ctx, start)
		if err == nil && (code != http.StatusForbidden || !strings.Contains(body, "already been used") || !strings.Contains(body, "restart `leasehold ui`")) {
			err = fmt.Errorf("second visit of the start URL: HTTP %d: %s", code, body)
		}
		return err
	})

	// A normal visit of every page: no console error, no failed request
	// (the icon included), no exception.
	step("a normal visit", iconLoaded,
		chromedp.Navigate(base+"/tasks"), visible(`#task-list`),
		chromedp.Navigate(taskPage(b.failed)), visible(`#task-status`),
		chromedp.Navigate(base+"/workflow?id="+url.QueryEscape(b.waiter)), visible(`#tree`),
		chromedp.Navigate(base+"/queues"), visible(`#queues`),
		chromedp.Navigate(base+"/dlq"), has(`#dlq-depth`, "message(s)"),
		chromedp.Navigate(base+"/"), visible(`#by-status`))
	quiet("a normal visit of every page")

	step("tasks filtered by kind and prefix",
		chromedp.Navigate(base+"/tasks"), visible(`#filters`),
		chromedp.SetValue(chromedp.CSS(`#filters input[name="kind"]`), b.kind),
		chromedp.SetValue(chromedp.CSS(`#filters input[name="prefix"]`), "pending-"),
		submit(`#apply`),
		has(`#task-list`, b.pending))
	if list := text(`#task-list`); strings.Contains(list, b.doomed) {
		t.Fatalf("the prefix filter let %s through: %s", b.doomed, list)
	}
	step("tasks of the kind", chromedp.Navigate(base+"/tasks?kind="+b.kind), has(`#task-list`, b.waiter),
		// Relative times beside the UTC ones, and how long each waited.
		has(`#task-list`, " ago"), has(`#task-list`, "waiting "), shot("tasks"))

	// A rare kind among many: the list by kind reads the listing of the
	// kind, so it shows the oldest task of the table on its first page,
	// with no partial page or link to go on (reading the listing by status
	// would have read past the common tasks first).
	step("tasks of a rare kind", chromedp.Navigate(base+"/tasks?kind=rare"), has(`#task-list`, b.rare))
	if n, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll("#continue").length`)); err != nil || n != 0 {
		t.Fatalf("the list of a rare kind has %d links to go on (%v); it should read only the kind's task:\n%s", n, err, text(`#task-list`))
	}

	// Two rows selected on the task list, cancelled with the bulk form's
	// dry run and confirmation; the filter's other tasks are left alone.
	row := func(id string) string { return fmt.Sprintf(`#task-list input[name="id"][value=%q]`, id) }
	step("select two rows", chromedp.Navigate(base+"/tasks?kind="+b.kind+"&prefix=pick-"), has(`#task-list`, b.picks[1]),
		chromedp.Click(chromedp.CSS(row(b.picks[0]))), chromedp.Click(chromedp.CSS(row(b.picks[1]))),
		has(`#selected-count`, "2"), visible(`#scope-selected:checked`),
		// A live refresh of the list keeps the rows ticked.
		has(`#updated`, "live: updated"), visible(row(b.picks[0])+`:checked`), visible(row(b.picks[1])+`:checked`),
		has(`#selected-count`, "2"),
		submit(`#bulk-cancel`), has(`#bulk-count`, "the 2 selected task(s) would be cancelled"),
		confirmAndSubmit(`#bulk-confirm`), has(`#bulk-result`, "cancelled 2"))
	for _, id := range b.picks {
		if info, err := b.client.Get(t.Context(), id); err != nil || info.Status != leasehold.StatusCancelled {
			t.Fatalf("%s after the cancel of the selected rows: %s %v", id, info.Status, err)
		}
	}
	if info, err := b.client.Get(t.Context(), b.dep); err != nil || info.Status != leasehold.StatusPending {
		t.Fatalf("%s, not selected, is %s %v", b.dep, info.Status, err)
	}

	step("workflow", chromedp.Navigate(base+"/workflow?id="+url.QueryEscape(b.waiter)),
		visible(`#tree`), has(`#tree`, b.dep), has(`#tree`, "WAITING"),
		has(`#tree`, "waits for: "), has(`#tree`, " so far"), has(`#tree`, "created "), shot("workflow"))

	step("task page", chromedp.Navigate(taskPage(b.pending)),
		has(`#task-status`, "PENDING"), has(`#task-payload`, "not bold"), has(`#task-timing`, "waiting "),
		visible(`#inbox-topics`), has(`#inbox-messages`, "m-2"), has(`#events-none`, "no event"), shot("task"))
	// Its inbox: per topic, delivered and waiting.
	ctx, cancel := context.WithTimeout(bctx, awstest.Scale(30*time.Second))
	counts, err := chromedp.Run(ctx, chromedp.Evaluate[string](`[...document.querySelectorAll('#inbox-topics tr')].map(r => [...r.cells].map(c => c.textContent).join(' ')).join('; ')`))
	cancel()
	if err != nil {
		t.Fatalf("read the inbox counts: %v", err)
	}
	if got, want := counts, "topic delivered waiting; approve 0 2; note 0 1"; got != want {
		t.Errorf("the task page's inbox counts read %q, want %q", got, want)
	}
	// Its form carries a CSRF token of its own, and the page's HTML holds
	// neither the session's id nor the start token.
	ctx, cancel = context.WithTimeout(bctx, awstest.Scale(30*time.Second))
	page, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[document.querySelector('#cancel input[name="csrf"]').value, document.documentElement.outerHTML]`))
	cancel()
	if err != nil || len(page) != 2 {
		t.Fatalf("read the task page: %v", err)
	}
	if csrf := page[0]; csrf == "" || csrf == session.Value || csrf == startToken || strings.Contains(page[1], session.Value) || strings.Contains(page[1], startToken) {
		t.Fatalf("the cancel form's CSRF token %q is empty or the session's, or the page shows the session id or start token", csrf)
	}
	step("cancel from the page", confirmAndSubmit(`#cancel`), has(`#result`, "CANCELLED"))
	if res := text(`#result`); strings.Contains(res, "lease renewal") {
		t.Errorf("the cancel of a PENDING task speaks of a lease renewal: %s", res)
	}
	step("cancelled task", chromedp.Navigate(taskPage(b.pending)), has(`#task-status`, "CANCELLED"))

	// A change made elsewhere shows without a reload: the live refresh.
	step("live refresh", chromedp.Navigate(taskPage(b.doomed)), has(`#task-status`, "PENDING"),
		chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
			_, err := b.client.Cancel(ctx, b.doomed)
			return err
		}),
		has(`#task-status`, "CANCELLED"))

	// A failed refresh doubles the wait (2 s, then 4 s, then 8 s), and a
	// success brings it back: the task page's refreshes are blocked, then
	// let through.
	blockLive := func(on bool) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
			var p []*network.BlockPattern
			if on {
				p = []*network.BlockPattern{{URLPattern: "*://*:*/*/task?*", Block: true}}
			}
			_, err := chromedp.Call(ctx, network.SetBlockedURLs, network.SetBlockedURLsParams{URLPatterns: p})
			return err
		})
	}
	step("live refresh backs off", chromedp.Navigate(taskPage(b.doomed)), has(`#task-status`, "CANCELLED"),
		blockLive(true), has(`#updated`, "next try in 4 s"), has(`#updated`, "next try in 8 s"),
		blockLive(false), has(`#updated`, "every 2 s"))

	step("retry a failed task", chromedp.Navigate(taskPage(b.failed)),
		has(`#task-status`, "FAILED"), has(`#task-error`, "<i>handler failed</i>"),
		// Its error's controls, escaped as the CLI prints them.
		has(`#task-error`, `failed</i> \x1b[31mred\r\x00`), has(`#history`, `failed</i> \x1b[31mred \x00`),
		confirmAndSubmit(`#retry`), has(`#result`, "PENDING"))

	step("pause", chromedp.Navigate(base+"/queues"), visible(`#queues`),
		confirmAndSubmit(`#pause-work`), has(`#result`, "is paused"),
		chromedp.Navigate(base+"/queues"), has(`#queues`, "paused since"), shot("queues"))
	step("resume", confirmAndSubmit(`#pause-work`), has(`#result`, "not paused"))

	// Reading the dead letters is a POST (the read button); the page's GET
	// reads only the depth.
	// A receive whose answer the stack lost hides the dead letter for the
	// read's visibility (10 s): read again until it shows, within a bound.
	deadline := time.Now().Add(awstest.Scale(2 * time.Minute))
	for attempt := 1; ; attempt++ {
		step("dead letters", chromedp.Navigate(base+"/dlq"), has(`#dlq-depth`, "message(s)"),
			submit(`#read-dlq button`), visible(`#dead-letters`))
		if strings.Contains(text(`#dead-letters`), b.deadID) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("dead letter %s not shown after %d reads", b.deadID, attempt)
		}
	}
	step("dead letter escaped", has(`#dead-letters`, "unknown version <x>"), shot("dlq"))
	for attempt := 1; ; attempt++ {
		step("redrive", chromedp.Navigate(base+"/dlq"), visible(`#read-dlq`),
			submit(`#read-dlq button`), visible(`#dead-letters`))
		if strings.Contains(text(`#dead-letters`), b.deadID) {
			form := fmt.Sprintf(`#dead-letters form:has(input[value=%q])`, b.deadID)
			step("redrive it", confirmAndSubmit(form))
			if strings.Contains(text(`main`), "sent back") {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("redrive of %s did not succeed after %d tries: %s", b.deadID, attempt, text(`main`))
		}
	}
	// The message is back on the work queue.
	got := awstest.ReceiveN(t, b.sqs, b.work, 1, awstest.Scale(time.Minute), 5, awstest.Bodies(b.deadBody))
	if len(got.Records) != 1 {
		t.Fatalf("redriven message not on the work queue: %d", len(got.Records))
	}
}
