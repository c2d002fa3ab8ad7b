package durable

import "testing"

// A race's wait note says what ends the wait besides what it waits for:
// the timer, the receives (each from its message number on), the first
// child's end; and it reads back the same, field by field.
func TestRaceNote(t *testing.T) {
	cb := &AwaitCallbackError{Step: "callback:ok", Timer: true, Listen: "orders#2,cancels#1"}
	note := RaceNote(cb.Note())
	if string(note) != "leasehold:timer leasehold:recv:orders#2,cancels#1" || !note.Timer() || note.First() != "" {
		t.Fatalf("note %q: timer %v, first %q", note, note.Timer(), note.First())
	}
	for _, c := range []struct {
		topic string
		seq   int64
		want  bool
	}{{"orders", 1, false}, {"orders", 2, true}, {"orders", 3, true}, {"cancels", 1, true}, {"order", 2, false}, {"other", 9, false}} {
		if got := note.Listens(c.topic, c.seq); got != c.want {
			t.Errorf("Listens(%s, %d) = %v, want %v", c.topic, c.seq, got, c.want)
		}
	}
	if n := (&AwaitCallbackError{Timer: true, Listen: "orders#1"}).Note(); n != "" {
		t.Errorf("a callback wait that is not resumable: note %q, want none", n)
	}
	if n := (&AwaitCallbackError{Step: "callback:ok", Timer: true}).Note(); n != TimerNote {
		t.Errorf("a callback raced against a timer alone: note %q, want %q as before", n, TimerNote)
	}
	kids := RaceNote((&AwaitChildrenError{Listen: "orders#1", First: CombineAny}).RaceNote())
	if kids.Timer() || !kids.Listens("orders", 1) || kids.First() != CombineAny {
		t.Errorf("children's note %q: timer %v, listens %v, first %q", kids, kids.Timer(), kids.Listens("orders", 1), kids.First())
	}
	if n := (&AwaitChildrenError{Note: `{"map":"m"}`}).RaceNote(); n != "" {
		t.Errorf("a map's wait: race note %q, want none (its own note kept)", n)
	}
	if RaceNote(`{"map":"m","shape":"leasehold:timer"}`).Timer() {
		t.Errorf("a map's note read as a timer's")
	}
}
