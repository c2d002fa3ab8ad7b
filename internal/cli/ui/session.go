package ui

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/leasehold/leasehold/internal/cli/rules"
)

// Refusals of the session checks. Each says what happened and what to do:
// a run of the inspector opens one session, once, so every way out is the
// tab that has it or a new run.
const (
	msgNoSession  = "forbidden: no session; open the URL `leasehold ui` printed"
	msgWrongStart = "forbidden: wrong start token; open the URL `leasehold ui` printed"
	msgUsed       = "forbidden: this URL has already been used: it opens one session, once. " +
		"Use the browser tab that already has the session, or restart `leasehold ui` (Ctrl-C, then run it again) and open the new URL it prints"
	restartHint = "restart `leasehold ui` (Ctrl-C, then run it again) and open the new URL it prints"
)

// session is the one browser session of a run: the first visit with the
// start token opens it. Its id is the cookie's value and appears in no
// page; its csrfKey keys the forms' CSRF tokens.
type session struct {
	id      string
	csrfKey []byte
	created time.Time
	// seen is the last request that was not a live refresh; ended says why
	// the session ended, empty while it lasts. Both are guarded by
	// sessions.mu; id and csrfKey never change.
	seen  time.Time
	ended string
}

// csrfToken is the CSRF token of a form whose action is the path action
// (relative to the inspector's base, without a query): an HMAC of the path
// under the session's key. It reveals neither the session's id nor the
// start token, and one form's token is refused by every other action.
func (ss *session) csrfToken(action string) string {
	m := hmac.New(sha256.New, ss.csrfKey)
	m.Write([]byte("POST " + action))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// csrfOK reports whether t is the CSRF token of the action path action.
func (ss *session) csrfOK(action, t string) bool {
	return t != "" && hmac.Equal([]byte(t), []byte(ss.csrfToken(action)))
}

// sessions is the start token of a run and the session it opens: the
// token opens one, once, within lifetime of the run's start; the session
// ends after idle without a request (a live refresh is no request of the
// operator's) or lifetime after it opened, whichever comes first.
type sessions struct {
	start    string
	issued   time.Time
	idle     time.Duration
	lifetime time.Duration

	mu   sync.Mutex
	used bool
	cur  *session
}

// open trades the start token t for the session, at now. On a refusal the
// session is nil and the string says why.
func (a *sessions) open(t string, now time.Time) (*session, string) {
	if !same(t, a.start) {
		return nil, msgWrongStart
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.used:
		return nil, msgUsed
	case now.Sub(a.issued) > a.lifetime:
		return nil, fmt.Sprintf("forbidden: this URL has expired unused: it is good for %s after `leasehold ui` starts; %s", rules.FormatDuration(a.lifetime), restartHint)
	}
	id, err := newToken()
	if err != nil {
		return nil, "forbidden: no session: " + err.Error()
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, "forbidden: no session: " + err.Error()
	}
	a.used = true
	a.cur = &session{id: id, csrfKey: key, created: now, seen: now}
	return a.cur, ""
}

// session returns the session whose id is one of ids (the values of the
// request's cookies of that name), at now; active marks a request of the
// operator's, which restarts the idle time. A session past a limit ends
// there, for good. On a refusal the session is nil and the string says
// why.
func (a *sessions) session(ids []string, now time.Time, active bool) (*session, string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	cur := a.cur
	if cur == nil || !anySame(ids, cur.id) {
		return nil, msgNoSession
	}
	if cur.ended == "" {
		switch {
		case now.Sub(cur.created) > a.lifetime:
			cur.ended = "it is older than " + rules.FormatDuration(a.lifetime) + " (the session's limit)"
		case now.Sub(cur.seen) > a.idle:
			cur.ended = "no request for more than " + rules.FormatDuration(a.idle) + " (the limit when idle)"
		}
	}
	if cur.ended != "" {
		return nil, "forbidden: the session has expired: " + cur.ended + "; " + restartHint
	}
	if active {
		cur.seen = now
	}
	return cur, ""
}

// sessionKey keys the request's session in its context; nil for a client
// that used the API token.
type sessionKey struct{}

func sessionOf(ctx context.Context) *session {
	ss, _ := ctx.Value(sessionKey{}).(*session)
	return ss
}

// newToken draws 32 random bytes, hex-encoded.
func newToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// same compares a secret in constant time; an empty t never matches.
func same(t, secret string) bool {
	return t != "" && subtle.ConstantTimeCompare([]byte(t), []byte(secret)) == 1
}

func anySame(ts []string, secret string) bool {
	ok := false
	for _, t := range ts {
		ok = same(t, secret) || ok
	}
	return ok
}
