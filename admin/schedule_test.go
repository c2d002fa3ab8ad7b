package admin

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/schedule"
)

func TestParseScheduleFields(t *testing.T) {
	t.Parallel()
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Skip(err)
	}
	s, err := ScheduleSpec{
		Name: "rep", Expression: "cron(0 2 * * ? *)", Location: paris, Kind: "report",
		Payload: []byte(`{"name":"a;b"}`), Queue: "leasehold-reports", CatchUp: "all:2,30m",
	}.Parse(false)
	if err != nil {
		t.Fatal(err)
	}
	if s.spec.Expr.Period() != 0 || s.spec.Location.String() != "Europe/Paris" || s.spec.Queue != "leasehold-reports" ||
		string(s.spec.Payload) != `{"name":"a;b"}` ||
		s.spec.CatchUp != (schedule.CatchUp{Mode: schedule.All, Limit: 2, MaxAge: 30 * time.Minute}) {
		t.Fatalf("got %+v", s.spec)
	}
	if _, err := (ScheduleSpec{Name: "tick", Expression: "rate(10 seconds)", Kind: "k"}).Parse(false); err == nil {
		t.Fatal("a rate in seconds was accepted for EventBridge")
	}
	tick, err := ScheduleSpec{Name: "tick", Expression: "rate(10 seconds)", Kind: "k"}.Parse(true)
	if err != nil || tick.spec.Expr.Period() != 10*time.Second {
		t.Fatalf("rate in seconds: %v, %+v", err, tick.spec)
	}
}

// TestScheduleErrorsMatchTheClients: a schedule's errors match the client's
// sentinels (admin has none of its own) and keep the schedule package's
// message.
func TestScheduleErrorsMatchTheClients(t *testing.T) {
	t.Parallel()
	for _, s := range []ScheduleSpec{
		{Name: "tick", Expression: "rate(10 seconds)", Kind: "k"}, // an expression EventBridge refuses
		{Name: "tick", Expression: "rate(1 minute)"},              // no kind
	} {
		_, err := s.Parse(false)
		if !errors.Is(err, leasehold.ErrInvalid) || !strings.HasPrefix(err.Error(), "invalid schedule") {
			t.Errorf("Parse(%+v) = %v, want an invalid schedule matching leasehold.ErrInvalid", s, err)
		}
	}
	for _, c := range []struct {
		err, want error
	}{
		{schedule.ErrNotFound, leasehold.ErrNotFound},
		{schedule.ErrExists, leasehold.ErrConflict},
		{schedule.ErrExpression, leasehold.ErrInvalid},
	} {
		got := scheduleErr(fmt.Errorf("delete schedule x: %w", c.err))
		if !errors.Is(got, c.want) || !errors.Is(got, c.err) || got.Error() != "delete schedule x: "+c.err.Error() {
			t.Errorf("scheduleErr(%v) = %v, want it to match %v", c.err, got, c.want)
		}
	}
}
