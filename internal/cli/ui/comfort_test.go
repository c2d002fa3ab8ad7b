package ui_test

import (
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
