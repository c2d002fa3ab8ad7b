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
