package token

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
)

// validateWorkflow checks the fields of the workflow forms: a child
// (parent), a dependent (after) and a callback.
func (t Token) validateWorkflow() error {
	if t.IsCallback() {
		switch {
		case t.ID != "" || t.Kind != "" || t.Payload != nil || t.MaxAttempts != 0 || t.Queue != "" || t.CreateToken != "" ||
			t.Parent != "" || len(t.After) > 0 || t.AfterAny || t.Wake || len(t.Then) > 0 || t.Prev != "":
			return &Error{Reason: ErrInvalidField, Detail: `a callback message has only "v", "callback" and "result" or "error"`}
		case t.HasError && t.Result != nil:
			return &Error{Reason: ErrInvalidField, Detail: `a callback has "result" or "error", not both`}
		case len(t.Result) > lease.MaxResultBytes:
			return &Error{Reason: ErrPayloadTooBig, Detail: fmt.Sprintf("callback result is %d bytes, the limit is %d", len(t.Result), lease.MaxResultBytes)}
		}
		if _, err := ParseCallback(t.Callback); err != nil {
			return err
		}
		return nil
	}
	if t.Wake && (t.Inline() || t.ID == "") {
		return &Error{Reason: ErrInvalidField, Detail: `"wake" is for a reference token`}
	}
	if t.Result != nil || t.HasError {
		return &Error{Reason: ErrMissingField, Detail: `"result" and "error" need "callback"`}
	}
	if (t.Parent != "" || len(t.After) > 0 || len(t.Then) > 0 || t.Prev != "") && t.ID == "" {
		return &Error{Reason: ErrMissingField, Detail: `"parent", "after", "then" and "prev" need "id"`}
	}
	if err := lease.CheckThen(t.ID, t.Then); err != nil {
		return &Error{Reason: ErrInvalidField, Detail: `"then": ` + err.Error()}
	}
	if t.Prev != "" {
		if err := checkID(t.Prev); err != nil {
			return &Error{Reason: ErrInvalidField, Detail: `"prev": ` + err.(*Error).Detail}
		}
		if t.Parent != "" || len(t.After) > 0 {
			return &Error{Reason: ErrInvalidField, Detail: `a chain link ("prev") has no "parent" and no "after"`}
		}
	}
	if t.Parent != "" {
		if err := checkID(t.Parent); err != nil {
			return &Error{Reason: ErrInvalidField, Detail: `"parent": ` + err.(*Error).Detail}
		}
		if len(t.After) > 0 {
			return &Error{Reason: ErrInvalidField, Detail: `a task has "parent" or "after", not both`}
		}
	}
	if t.AfterAny && len(t.After) == 0 {
		return &Error{Reason: ErrMissingField, Detail: `"after_any" needs "after"`}
	}
	if t.WaitTimeout != 0 && (len(t.After) == 0 || t.WaitTimeout < time.Second || t.WaitTimeout > MaxWaitTimeout) {
		return &Error{Reason: ErrInvalidField, Detail: fmt.Sprintf(`"wait_timeout_seconds" needs "after" and is 1..%d`, int64(MaxWaitTimeout/time.Second))}
	}
	if len(t.After) > lease.MaxAfter {
		return &Error{Reason: ErrInvalidField, Detail: fmt.Sprintf(`"after" names %d tasks, the limit is %d`, len(t.After), lease.MaxAfter)}
	}
	for i, id := range t.After {
		if err := checkID(id); err != nil {
			return &Error{Reason: ErrInvalidField, Detail: `"after": ` + err.(*Error).Detail}
		}
		if id == t.ID || slices.Contains(t.After[:i], id) {
			return &Error{Reason: ErrInvalidField, Detail: fmt.Sprintf(`"after" names %q twice or names the task itself`, id)}
		}
	}
	return nil
}

// MaxWaitTimeout bounds Token.WaitTimeout: a year.
const MaxWaitTimeout = 365 * 24 * time.Hour

// CallbackPrefix starts every callback token.
const CallbackPrefix = "lhcb1."

// Callback is what a callback token names: one waiting attempt.
type Callback struct {
	ID      string
	Fence   int64
	Attempt int
	Nonce   string
}

// String encodes c as a callback token: the prefix, then base64url of
// "fence.attempt.nonce.id" (the id last, as it may hold dots).
func (c Callback) String() string {
	raw := strconv.FormatInt(c.Fence, 10) + "." + strconv.Itoa(c.Attempt) + "." + c.Nonce + "." + c.ID
	return CallbackPrefix + base64.RawURLEncoding.EncodeToString([]byte(raw))
}

// ParseCallback decodes a callback token. It checks the form only; whether
// the token matches a waiting task is the store's to say.
func ParseCallback(s string) (Callback, error) {
	bad := func(why string) (Callback, error) {
		return Callback{}, &Error{Reason: ErrInvalidField, Detail: "callback token " + why}
	}
	rest, ok := strings.CutPrefix(strings.TrimSpace(s), CallbackPrefix)
	if !ok {
		return bad("does not start with " + CallbackPrefix)
	}
	raw, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil {
		return bad("is not base64url")
	}
	parts := bytes.SplitN(raw, []byte("."), 4)
	if len(parts) != 4 {
		return bad("is not fence.attempt.nonce.id")
	}
	fence, err1 := strconv.ParseInt(string(parts[0]), 10, 64)
	attempt, err2 := strconv.Atoi(string(parts[1]))
	c := Callback{ID: string(parts[3]), Fence: fence, Attempt: attempt, Nonce: string(parts[2])}
	switch {
	case err1 != nil || err2 != nil || fence < 1 || attempt < 1:
		return bad("has a bad fence or attempt")
	case len(c.Nonce) < 16 || !printableASCII(c.Nonce):
		return bad("has a bad nonce")
	case lease.CheckID(c.ID) != nil:
		return bad("names no valid task id")
	}
	return c, nil
}

// CallbackMessage encodes the callback form of a message: it completes the
// waiting task with result (JSON), or, when failed, fails it with reason.
func CallbackMessage(callback string, result json.RawMessage, failed bool, reason string) (string, error) {
	v := Version
	w := wire{V: &v, Callback: callback}
	if failed {
		w.Error = &reason
	} else {
		w.Result = result
	}
	b, err := json.Marshal(w)
	if err != nil {
		return "", &Error{Reason: ErrMalformed, Detail: err.Error()}
	}
	return string(b), nil
}

// HeartbeatMessage encodes the heartbeat form of a message: it keeps the
// wait the callback token names alive (Token.Heartbeat).
func HeartbeatMessage(callback string) string {
	v := Version
	b, _ := json.Marshal(wire{V: &v, Heartbeat: callback}) // strings only: it cannot fail
	return string(b)
}
