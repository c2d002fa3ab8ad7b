package ui_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/admin"
	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/internal/cli"
	"github.com/leasehold/leasehold/internal/cli/ui"
)

// envBigTable is the number of PENDING tasks TestBigTablePagesAnswerInTime
// seeds on the stack (it is skipped without it): the measure is
// 50000. Seeding that many takes minutes, so `make test` does not run it;
// the budget tests above cover the same code at a small size.
const envBigTable = "LEASEHOLD_UI_BIG_TABLE"

// maxPageTime is the answer time issue 39 asks of every page on a big
// table: the page's reading (2 s) and its rendering.
const maxPageTime = 3 * time.Second

// TestBigTablePagesAnswerInTime seeds a table of the stack with N PENDING
// tasks of one kind, one rare task older than all of them, and times
// every page of the inspector, a bulk dry run and `leasehold list --kind`
// on it: each answers in under 3 s, without an error.
func TestBigTablePagesAnswerInTime(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv(envBigTable))
	if n <= 0 {
		t.Skip(envBigTable + " is not set: the big table test is run by hand (e.g. " + envBigTable + "=50000)")
	}
	cfg := awstest.Config(t)
	table := awstest.NewTable(t, cfg)
	qs := awstest.NewQueues(t, cfg)
	c, err := leasehold.NewClient(leasehold.ClientConfig{AWS: cfg, Table: table, QueueURL: qs.Work})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	seed := time.Now()
	if _, err := c.Enqueue(ctx, leasehold.Submission{Kind: "rare", ID: "rare-1"}); err != nil {
		t.Fatal(err)
	}
	const batch = 1000
	for i := 0; i < n; i += batch {
		subs := make([]leasehold.Submission, 0, batch)
		for j := i; j < min(i+batch, n); j++ {
			subs = append(subs, leasehold.Submission{Kind: "common", ID: fmt.Sprintf("common-%06d", j)})
		}
		res, err := c.EnqueueMany(ctx, subs)
		if err != nil {
			t.Fatalf("seed from %d: %v", i, err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("seed %s: %v", r.Task.ID, r.Err)
			}
		}
	}
	t.Logf("seeded %d PENDING tasks and 1 rare one in %s", n, time.Since(seed).Round(time.Second))

	for _, limit := range []int{10, 50} {
		at := time.Now()
		page, err := c.List(ctx, leasehold.ListOptions{Status: leasehold.StatusPending, Limit: limit})
		t.Logf("one listing call of %d PENDING, no deadline: %d tasks in %s (%v)", limit, len(page.Tasks), time.Since(at).Round(time.Millisecond), err)
	}
	srv, h := serveWith(t, ui.Config{Tasks: c, Queues: admin.New(admin.Config{AWS: cfg}), WorkQueueURL: qs.Work})
	timed := func(what, method, target string, form url.Values) string {
		t.Helper()
		at := time.Now()
		w := request(t, h, srv, method, target, form)
		took := time.Since(at)
		t.Logf("%-45s %3d in %s", what, w.Code, took.Round(time.Millisecond))
		if w.Code != http.StatusOK {
			t.Errorf("%s: HTTP %d: %s", what, w.Code, w.Body)
		}
		if took > maxPageTime {
			t.Errorf("%s took %s, more than %s", what, took, maxPageTime)
		}
		return w.Body.String()
	}
	body := timed("overview", http.MethodGet, "/", nil)
	if !strings.Contains(body, "still counting") {
		t.Logf("overview: no status still counting")
	}
	for _, target := range []string{
		"/tasks", "/tasks?status=PENDING", "/tasks?status=FAILED", "/tasks?kind=common", "/tasks?kind=rare",
		"/tasks?status=PENDING&kind=rare", "/tasks?kind=nosuchkind", "/tasks?prefix=zzzz", "/tasks?prefix=rare",
	} {
		timed(target, http.MethodGet, target, nil)
	}
	timed("bulk dry run kind=nosuchkind", http.MethodPost, "/bulk", url.Values{"action": {"cancel"}, "kind": {"nosuchkind"}})
	timed("bulk dry run status=PENDING kind=rare", http.MethodPost, "/bulk", url.Values{"action": {"cancel"}, "status": {"PENDING"}, "kind": {"rare"}})

	// leasehold list --kind rare: the rare task, read from the listing by
	// kind, in time.
	env := map[string]string{cli.EnvTable: table, cli.EnvWorkQueueURL: qs.Work}
	getenv := func(k string) string {
		if v, ok := env[k]; ok {
			return v
		}
		return os.Getenv(k)
	}
	var out, errOut bytes.Buffer
	at := time.Now()
	code := cli.Main(ctx, []string{"list", "--kind", "rare"}, cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errOut, Getenv: getenv})
	took := time.Since(at)
	t.Logf("%-45s exit %d in %s: %s", "leasehold list --kind rare", code, took.Round(time.Millisecond), strings.TrimSpace(errOut.String()))
	if code != 0 || !strings.Contains(out.String(), "rare-1") || took > maxPageTime {
		t.Errorf("leasehold list --kind rare: exit %d in %s, stdout %q, stderr %q; want rare-1 in under %s", code, took, out.String(), errOut.String(), maxPageTime)
	}
}
