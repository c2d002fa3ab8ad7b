package ui_test

import (
	"fmt"
	"net/url"
	"regexp"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/admin"
	"github.com/leasehold/leasehold/internal/cli/ui"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The icon a browser asks for at the host's root is served, without a
// session, and every page links to it: a normal visit logs no 404.
func TestFaviconIsServed(t *testing.T) {
	t.Parallel()
	f := setup(t, 0)
	r := httptest.NewRequest(http.MethodGet, "/favicon.ico", nil)
	r.Host = addr
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, r)
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "image/svg+xml" || !strings.Contains(w.Body.String(), "<svg") {
		t.Fatalf("GET /favicon.ico: %d %q %.80s", w.Code, w.Header().Get("Content-Type"), w.Body)
	}
	if page := f.get(t, "/"); !strings.Contains(page, `rel="icon" href="`+f.srv.Base()+`/static/favicon.svg"`) {
		t.Errorf("the overview links no icon under the base")
	}
	if w := f.do(t, http.MethodGet, "/static/favicon.svg", nil); w.Code != http.StatusOK {
		t.Errorf("GET the linked icon: %d", w.Code)
	}
}

// ctl is task text with an escape sequence, a carriage return and a NUL:
// the CLI prints it as ctlShown (rules.Escape), or as ctlLine on one line
// (rules.OneLine: the CR is white space), and so must every page.
const (
	ctl      = "bad \x1b[31mred\r\x00end"
	ctlShown = `bad \x1b[31mred\r\x00end`
	ctlLine  = `bad \x1b[31mred \x00end`
)

// Control characters in errors, reasons and bodies are shown escaped as
// the CLI escapes them, on every page that shows them: never raw, never
// as the U+FFFD the HTML escaper makes of a NUL.
func TestControlCharactersAreEscapedAsTheCLIDoes(t *testing.T) {
	t.Parallel()
	f := setup(t, 0)
	if _, err := f.env.Enqueue(leasehold.Submission{Kind: "boom", ID: "ctl-1", Payload: map[string]string{"Msg": ctl}}); err != nil {
		t.Fatal(err)
	}
	if err := f.env.Run(); err != nil {
		t.Fatal(err)
	}
	f.queues.mu.Lock()
	f.queues.letters = append(f.queues.letters, admin.DeadLetter{MessageID: "m-ctl", Body: "body " + ctl + "\nline 2", Reason: "reason " + ctl})
	f.queues.mu.Unlock()
	pages := map[string]string{
		"task page":    f.get(t, "/task?id=ctl-1"),
		"task list":    f.get(t, "/tasks?kind=boom"),
		"workflow":     f.get(t, "/workflow?id=ctl-1"),
		"dead letters": f.do(t, http.MethodPost, "/dlq", url.Values{"csrf": {ui.CSRFToken(f.srv, "/dlq")}}).Body.String(),
	}
	for name, body := range pages {
		if strings.ContainsAny(body, "\x1b\x00\r\ufffd") {
			t.Errorf("the %s shows a control character raw (or as U+FFFD)", name)
		}
	}
	for _, want := range []string{`<pre class="err" id="task-error">` + ctlShown + `</pre>`, `<span class="err">` + ctlLine + `</span>`} {
		if !strings.Contains(pages["task page"], want) {
			t.Errorf("the task page does not show %s", want)
		}
	}
	if !strings.Contains(pages["task list"], `<td class="err">`+ctlLine+`</td>`) {
		t.Errorf("the task list does not show the error escaped")
	}
	for _, want := range []string{"reason " + ctlLine, "body " + ctlShown + "\nline 2"} {
		if !strings.Contains(pages["dead letters"], want) {
			t.Errorf("the dead-letter page does not show %q", want)
		}
	}
}

// Times show beside their UTC stamp how long ago (or in how long) they
// are, and the list and the task page say how long a task took or has
// waited, all from the page's one now: here the injected clock, 2h3m10s
// after the fixture's tasks were made.
func TestRelativeTimesAndDurations(t *testing.T) {
	t.Parallel()
	f := setup(t, 0)
	// In steps the session outlives (it ends after 30 minutes idle).
	for _, d := range []time.Duration{25, 25, 25, 25, 23} {
		f.env.Clock().Advance(d * time.Minute)
		f.get(t, "/queues")
	}
	f.env.Clock().Advance(10 * time.Second)
	if _, err := f.env.Enqueue(leasehold.Submission{Kind: "ok", ID: "later-1", Delay: 90 * time.Second}); err != nil {
		t.Fatal(err)
	}
	cell := regexp.MustCompile(`<span class="ago">([^<]*)</span></td><td class="timing">([^<]*)</td>`)
	rows := map[string][]string{}
	list := f.get(t, "/tasks")
	for _, tr := range strings.Split(list, "<tr>") {
		id := regexp.MustCompile(`task\?id=([^"]+)"`).FindStringSubmatch(tr)
		if m := cell.FindStringSubmatch(tr); id != nil && m != nil {
			rows[id[1]] = m[1:]
		}
	}
	for id, want := range map[string][]string{
		"ok-1":    {"2h ago", "took 0s"},
		"hook-1":  {"2h ago", "waiting 2h3m10s"},
		"later-1": {"now", "due in 1m30s"},
	} {
		if got := rows[id]; strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("the list's row of %s shows %q, want %q", id, got, want)
		}
	}
	page := f.get(t, "/task?id=hook-1")
	for _, want := range []string{`<td id="task-timing">waiting 2h3m10s</td>`, `00:00:00Z <span class="ago">2h ago</span>`} {
		if !strings.Contains(page, want) {
			t.Errorf("the task page does not show %s", want)
		}
	}
	if page := f.get(t, "/task?id=later-1"); !strings.Contains(page, `02:04:40Z <span class="ago">in 1m</span>`) {
		t.Errorf("the delayed task's next run does not say it is in 1m")
	}
}

// The overview's per-minute charts have a labelled time axis (minutes
// ago, ending now) and a count axis from 0 to the tallest bar.
func TestChartHasLabelledAxes(t *testing.T) {
	t.Parallel()
	f := setup(t, 0)
	page := f.get(t, "/")
	for _, want := range []string{">minutes ago</text>", ">count</text>", ">now</text>", ">59</text>", ">30</text>", `text-anchor="end">0</text>`} {
		if strings.Count(page, want) != 2 {
			t.Errorf("the overview's two charts do not both show %s", want)
		}
	}
	if strings.Count(page, `<rect class="created"`) != 60 || strings.Count(page, `<rect class="finished"`) != 60 {
		t.Errorf("the charts do not have 60 bars each")
	}
}

// The task list selects rows (a checkbox each, feeding the bulk form)
// beside "select all matching the filter". A bulk request of selected
// rows keeps a filter's rules: the CSRF token, a dry run that lists the
// tasks and changes nothing, then the confirmed form; it takes at most
// 100 ids, and acts on those it names alone.
func TestBulkOfSelectedRows(t *testing.T) {
	t.Parallel()
	f := setup(t, 0)
	list := f.get(t, "/tasks")
	for _, want := range []string{`<input type="checkbox" name="id" value="hook-1" form="bulk"`, `id="select-all" checked> select all matching the filter`, `id="scope-selected"`, `id="select-page"`} {
		if !strings.Contains(list, want) {
			t.Fatalf("the task list has no %s", want)
		}
	}
	status := func(id string) leasehold.Status {
		t.Helper()
		info, err := f.env.Client().Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		return info.Status
	}
	bulk := func(want int, form url.Values, opts ...reqOpt) string {
		t.Helper()
		w := f.do(t, http.MethodPost, "/bulk", form, opts...)
		if w.Code != want {
			t.Fatalf("bulk %v: %d, want %d\n%s", form, w.Code, want, w.Body)
		}
		return w.Body.String()
	}
	form := func(ids ...string) url.Values {
		return url.Values{"csrf": {ui.CSRFToken(f.srv, "/bulk")}, "action": {"cancel"}, "scope": {"selected"}, "kind": {"hook"}, "id": ids}
	}
	dry := bulk(http.StatusOK, form("hook-1", "ok-1", "hook-1"))
	for _, want := range []string{"Dry run: the 2 selected task(s) would be cancelled", `<input type="hidden" name="scope" value="selected"><input type="hidden" name="id" value="hook-1"><input type="hidden" name="id" value="ok-1">`, `id="bulk-confirm"`} {
		if !strings.Contains(dry, want) {
			t.Fatalf("the dry run has no %s:\n%s", want, dry)
		}
	}
	if status("hook-1") != leasehold.StatusWaiting {
		t.Fatal("a dry run changed a task")
	}
	// No token, no row, too many rows: refused, nothing done.
	noToken := form("hook-1")
	noToken.Del("csrf")
	noToken.Set("confirm", "yes")
	bulk(http.StatusForbidden, noToken)
	bulk(http.StatusBadRequest, form())
	many := make([]string, 101)
	for i := range many {
		many[i] = fmt.Sprintf("hook-%d", i)
	}
	tooMany := form(many...)
	tooMany.Set("confirm", "yes")
	if body := bulk(http.StatusBadRequest, tooMany); !strings.Contains(body, "at most 100") {
		t.Errorf("too many rows: %s", body)
	}
	if status("hook-1") != leasehold.StatusWaiting {
		t.Fatal("a refused request changed a task")
	}
	done := form("hook-1", "ok-1")
	done.Set("confirm", "yes")
	body := bulk(http.StatusOK, done)
	if !strings.Contains(body, "2 task(s) selected") || !strings.Contains(body, "already ended 1, cancelled 1") {
		t.Fatalf("the confirmed cancel of hook-1 and ok-1:\n%s", body)
	}
	for id, want := range map[string]leasehold.Status{"hook-1": leasehold.StatusCancelled, "hook-2": leasehold.StatusWaiting, "ok-1": leasehold.StatusSucceeded} {
		if st := status(id); st != want {
			t.Errorf("%s is %s after the cancel of the selected rows, want %s", id, st, want)
		}
	}
}
