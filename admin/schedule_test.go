package admin

import (
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/schedule"
)

func TestParseScheduleFields(t *testing.T) {
	t.Parallel()
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Skip(err)
	}
	s, err := ParseSchedule(ScheduleSpec{
		Name: "rep", Expression: "cron(0 2 * * ? *)", Location: paris, Kind: "report",
		Payload: []byte(`{"name":"a;b"}`), Queue: "leasehold-reports", CatchUp: "all:2,30m",
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	if s.spec.Expr.Period() != 0 || s.spec.Location.String() != "Europe/Paris" || s.spec.Queue != "leasehold-reports" ||
		string(s.spec.Payload) != `{"name":"a;b"}` ||
		s.spec.CatchUp != (schedule.CatchUp{Mode: schedule.All, Limit: 2, MaxAge: 30 * time.Minute}) {
		t.Fatalf("got %+v", s.spec)
	}
	if _, err := ParseSchedule(ScheduleSpec{Name: "tick", Expression: "rate(10 seconds)", Kind: "k"}, false); err == nil {
		t.Fatal("a rate in seconds was accepted for EventBridge")
	}
	tick, err := ParseSchedule(ScheduleSpec{Name: "tick", Expression: "rate(10 seconds)", Kind: "k"}, true)
	if err != nil || tick.spec.Expr.Period() != 10*time.Second {
		t.Fatalf("rate in seconds: %v, %+v", err, tick.spec)
	}
}
