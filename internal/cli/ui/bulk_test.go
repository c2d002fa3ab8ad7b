package ui_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/cli/ui"
)

// The tasks page offers bulk cancel and retry of what its filter selects.
// A bulk POST without confirm is a dry run that counts and lists the tasks
// and changes nothing; confirmed, it acts on them and says what it did. A
// status the action does not take is refused, and a bulk POST needs the
// session token like any action.
func TestBulkActions(t *testing.T) {
	t.Parallel()
	f := setup(t, 0)
	if body := f.get(t, "/tasks?kind=hook"); !strings.Contains(body, `id="bulk"`) || !strings.Contains(body, `name="kind" value="hook"`) {
		t.Fatalf("the tasks page has no bulk form carrying its filter:\n%s", body)
	}
	status := func(id string) leasehold.Status {
		t.Helper()
		info, err := f.env.Client().Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		return info.Status
	}
	bulk := func(want int, fields ...string) string {
		t.Helper()
		form := url.Values{"csrf": {ui.CSRFToken(f.srv, "/bulk")}}
		for i := 0; i+1 < len(fields); i += 2 {
			form.Set(fields[i], fields[i+1])
		}
		w := f.do(t, http.MethodPost, "/bulk", form)
		if w.Code != want {
			t.Fatalf("bulk %v: %d, want %d\n%s", fields, w.Code, want, w.Body)
		}
		return w.Body.String()
	}

	dry := bulk(http.StatusOK, "action", "cancel", "kind", "hook")
	if !strings.Contains(dry, "Dry run: 2 task(s) would be cancelled") || !strings.Contains(dry, "hook-1") || !strings.Contains(dry, `id="bulk-confirm"`) {
		t.Fatalf("dry run:\n%s", dry)
	}
	// Its link back names the tasks page with the filter.
	if back := `href="` + f.srv.Base() + `/tasks?kind=hook" id="back"`; !strings.Contains(dry, back) {
		t.Fatalf("the dry run has no link %s:\n%s", back, dry)
	}
	if status("hook-1") != leasehold.StatusWaiting || status("hook-2") != leasehold.StatusWaiting {
		t.Fatal("a dry run changed a task")
	}
	done := bulk(http.StatusOK, "action", "cancel", "kind", "hook", "confirm", "yes")
	if !strings.Contains(done, "2 task(s) selected") || !strings.Contains(done, "cancelled 2") {
		t.Fatalf("confirmed cancel:\n%s", done)
	}
	for _, id := range []string{"hook-1", "hook-2"} {
		if st := status(id); st != leasehold.StatusCancelled {
			t.Errorf("%s is %s after the bulk cancel", id, st)
		}
	}
	if st := status("ok-1"); st != leasehold.StatusSucceeded {
		t.Errorf("ok-1, outside the filter, is %s", st)
	}

	retried := bulk(http.StatusOK, "action", "retry", "status", "FAILED", "prefix", "boom", "attempts", "2", "confirm", "yes")
	if !strings.Contains(retried, "retried 1") || status("boom-1") != leasehold.StatusPending {
		t.Fatalf("confirmed retry of boom-1:\n%s", retried)
	}
	if none := bulk(http.StatusOK, "action", "retry", "kind", "nothing-like-it"); !strings.Contains(none, "Dry run: 0 task(s)") || strings.Contains(none, `id="bulk-confirm"`) {
		t.Fatalf("a dry run that selects nothing:\n%s", none)
	}
	bulk(http.StatusBadRequest, "action", "retry", "status", "RUNNING")
	bulk(http.StatusBadRequest, "action", "delete")
	if w := f.do(t, http.MethodPost, "/bulk", url.Values{"action": {"cancel"}, "kind": {"ok"}, "confirm": {"yes"}}); w.Code != http.StatusForbidden {
		t.Fatalf("bulk without the CSRF token: %d, want 403", w.Code)
	}
}
