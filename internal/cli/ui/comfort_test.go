package ui_test

import (
	"net/url"

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
