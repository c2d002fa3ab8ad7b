package schedule

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/token"
)

func TestTaskIDIsAValidIDOfTheSlot(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 3, 11, 15, 0, 0, time.FixedZone("CET", 3600))
	id := TaskID("nightly.report", at)
	if id != "sched:nightly.report:2026-12-03T10:15:00Z" {
		t.Fatalf("TaskID = %q", id)
	}
	if err := lease.CheckID(id); err != nil {
		t.Fatal(err)
	}
	if err := lease.CheckID(IDPrefix + strings.Repeat("n", 64) + ":" + ScheduledTime); err != nil {
		t.Fatalf("the longest id template: %v", err)
	}
}

func TestInputAndBodyAreOneToken(t *testing.T) {
	t.Parallel()
	e, err := Parse("rate(1 minute)", AWS)
	if err != nil {
		t.Fatal(err)
	}
	// A payload holding the marker and the context attribute must come
	// through untouched.
	s := Spec{Name: "tick", Expr: e, Kind: "greet", Payload: []byte(`{"name":"@slot@ <aws.scheduler.scheduled-time>"}`), Queue: "leasehold-work"}
	in, err := s.Input()
	if err != nil {
		t.Fatal(err)
	}
	const wantIn = `{"v":1,"id":"sched:tick:<aws.scheduler.scheduled-time>","kind":"greet","payload":{"name":"@slot@ \u003caws.scheduler.scheduled-time\u003e"},"queue":"leasehold-work"}`
	if in != wantIn {
		t.Fatalf("Input =\n%s\nwant\n%s", in, wantIn)
	}
	slot := time.Date(2026, 12, 3, 10, 15, 0, 0, time.UTC)
	body, err := s.Body(slot)
	if err != nil {
		t.Fatal(err)
	}
	// What EventBridge sends: the Input with the attribute replaced.
	if want := strings.Replace(in, ScheduledTime, "2026-12-03T10:15:00Z", 1); body != want {
		t.Fatalf("Body =\n%s\nwant\n%s", body, want)
	}
	tok, err := token.Decode(body)
	if err != nil {
		t.Fatal(err)
	}
	if tok.ID != TaskID("tick", slot) || tok.Kind != "greet" || tok.Queue != "leasehold-work" {
		t.Fatalf("decoded %+v", tok)
	}
	back, ok := FromInput(in)
	if !ok || back.Name != "tick" || back.Kind != "greet" || string(back.Payload) != `{"name":"@slot@ \u003caws.scheduler.scheduled-time\u003e"}` || back.Queue != "leasehold-work" {
		t.Fatalf("FromInput = %+v, %v", back, ok)
	}
}

func TestFromInputRefusesOtherInputs(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		``, `not json`, `{"v":1,"id":"x"}`,
		`{"v":1,"kind":"k","id":"other:tick:<aws.scheduler.scheduled-time>"}`,
		`{"v":1,"kind":"k","id":"sched:tick:2026-12-03T10:15:00Z"}`,
		`{"v":1,"kind":"k","id":"sched:bad name:<aws.scheduler.scheduled-time>"}`,
	} {
		if s, ok := FromInput(in); ok {
			t.Errorf("FromInput(%q) = %+v, want not ours", in, s)
		}
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	e, _ := Parse("rate(1 minute)", AWS)
	cases := []struct {
		name string
		spec Spec
		want string
	}{
		{"ok", Spec{Name: "a-b_c.d", Expr: e, Kind: "k"}, ""},
		{"name", Spec{Name: "a b", Expr: e, Kind: "k"}, "schedule name"},
		{"long name", Spec{Name: strings.Repeat("a", 65), Expr: e, Kind: "k"}, "schedule name"},
		{"no kind", Spec{Name: "a", Expr: e}, `"kind"`},
		{"no expression", Spec{Name: "a", Kind: "k"}, "no expression"},
		{"bad payload", Spec{Name: "a", Expr: e, Kind: "k", Payload: []byte(`{`)}, "payload"},
		{"fifo queue", Spec{Name: "a", Expr: e, Kind: "k", Queue: "q.fifo"}, "FIFO"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.spec.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want ErrInvalid containing %q", err, tc.want)
			}
		})
	}
}

func TestParseCatchUp(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		want CatchUp
		err  bool
	}{
		{"", CatchUp{Mode: Latest}, false},
		{"latest", CatchUp{Mode: Latest}, false},
		{"none", CatchUp{Mode: None}, false},
		{"all", CatchUp{Mode: All}, false},
		{"all:3", CatchUp{Mode: All, Limit: 3}, false},
		{"latest,30m", CatchUp{Mode: Latest, MaxAge: 30 * time.Minute}, false},
		{"all:0", CatchUp{}, true},
		{"all:x", CatchUp{}, true},
		{"some", CatchUp{}, true},
		{"latest,-1m", CatchUp{}, true},
	}
	for _, tc := range cases {
		got, err := ParseCatchUp(tc.in)
		if tc.err {
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("ParseCatchUp(%q) = %+v, %v; want ErrInvalid", tc.in, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseCatchUp(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			continue
		}
		// String writes what ParseCatchUp reads.
		if again, err := ParseCatchUp(got.String()); err != nil || again.Mode != got.Mode || again.limit() != got.limit() || again.maxAge() != got.maxAge() {
			t.Errorf("ParseCatchUp(%q) = %+v, %v after String %q", tc.in, again, err, got.String())
		}
	}
}
