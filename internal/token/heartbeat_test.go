package token

import (
	"errors"
	"testing"
)

// TestHeartbeatMessage: the heartbeat form decodes to the callback form
// marked Heartbeat; it takes neither a result nor an error, nor
// "callback" beside it.
func TestHeartbeatMessage(t *testing.T) {
	t.Parallel()
	cb := Callback{ID: "task-1", Fence: 2, Attempt: 1, Nonce: "ABCDEFGHIJKLMNOPQRSTUV"}.String()
	tok, err := Decode(HeartbeatMessage(cb))
	if err != nil || !tok.Heartbeat || !tok.IsCallback() || tok.Callback != cb || tok.Result != nil || tok.HasError {
		t.Fatalf("Decode(HeartbeatMessage) = %+v, %v", tok, err)
	}
	for name, body := range map[string]string{
		"result":         `{"v":1,"heartbeat":"` + cb + `","result":1}`,
		"error":          `{"v":1,"heartbeat":"` + cb + `","error":"no"}`,
		"callback too":   `{"v":1,"heartbeat":"` + cb + `","callback":"` + cb + `"}`,
		"not a token":    `{"v":1,"heartbeat":"lhcb1.zzz"}`,
		"with a task id": `{"v":1,"heartbeat":"` + cb + `","id":"x"}`,
	} {
		if _, err := Decode(body); !errors.Is(err, ErrInvalidField) {
			t.Errorf("%s: Decode = %v, want ErrInvalidField", name, err)
		}
	}
}
