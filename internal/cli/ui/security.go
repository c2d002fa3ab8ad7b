package ui

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"
)

// HeaderToken carries the session token for clients other than a browser.
const HeaderToken = "X-Leasehold-Token"

// formToken is the form field that carries the session token of an action.
const formToken = "token"

// maxForm bounds an action's body.
const maxForm = 1 << 20

const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

func newToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

func (s *Server) tokenOK(t string) bool {
	return t != "" && subtle.ConstantTimeCompare([]byte(t), []byte(s.token)) == 1
}

// hostAllowed reports whether host (a request's Host) names this server:
// one of the addresses it was told it listens on. With none (a server
// bound to every interface) any host passes and the token alone guards.
func (g gate) hostAllowed(host string) bool {
	if len(g.hosts) == 0 {
		return true
	}
	for _, h := range g.hosts {
		if strings.EqualFold(h, host) {
			return true
		}
	}
	return false
}

// sameOrigin reports whether a POST comes from a page of this server. A
// browser sends Origin with every POST; a client without it (curl with the
// token header) passes on the token alone.
func sameOrigin(r *http.Request) bool {
	if o := r.Header.Get("Origin"); o != "" {
		return o == "http://"+r.Host
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return false
	}
	return true
}

func securityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
}

// gate is one handler's view of who may call it: the Host values of its
// listener and the name of its session cookie.
type gate struct {
	s      *Server
	hosts  []string
	cookie string
}

// guard checks every request: the host, the session, and for an action
// its token and origin. A first visit with ?token= gets the cookie and is
// sent on to the same page without the token in its URL.
func (g gate) guard(next http.Handler) http.Handler {
	s := g.s
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		securityHeaders(w.Header())
		if !g.hostAllowed(r.Host) {
			http.Error(w, "forbidden: unexpected Host "+r.Host, http.StatusForbidden)
			return
		}
		if t := r.URL.Query().Get(formToken); t != "" && r.Method == http.MethodGet {
			if !s.tokenOK(t) {
				http.Error(w, "forbidden: wrong session token; open the URL `leasehold ui` printed", http.StatusForbidden)
				return
			}
			http.SetCookie(w, &http.Cookie{Name: g.cookie, Value: s.token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
			q := r.URL.Query()
			q.Del(formToken)
			http.Redirect(w, r, localURL(r.URL.Path, q), http.StatusSeeOther)
			return
		}
		authed := s.tokenOK(r.Header.Get(HeaderToken))
		if c, err := r.Cookie(g.cookie); err == nil && s.tokenOK(c.Value) {
			authed = true
		}
		if !authed {
			http.Error(w, "forbidden: no session; open the URL `leasehold ui` printed (it carries the session token)", http.StatusForbidden)
			return
		}
		switch r.Method {
		case http.MethodGet:
		case http.MethodPost:
			if !sameOrigin(r) {
				http.Error(w, "forbidden: cross-origin request", http.StatusForbidden)
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, maxForm)
			t := r.Header.Get(HeaderToken)
			if t == "" {
				t = r.PostFormValue(formToken)
			}
			if !s.tokenOK(t) {
				http.Error(w, "forbidden: the action carries no valid session token", http.StatusForbidden)
				return
			}
		default:
			// HEAD too: it would do a GET's reads for nothing.
			w.Header().Set("Allow", "GET, POST")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// hostsOf lists the Host values a browser may send to a listener on addr
// (host:port): the address itself and, for a loopback one, localhost's
// names. Nil for an unspecified address (every interface).
func hostsOf(addr string) []string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return []string{addr}
	}
	ip := net.ParseIP(host)
	switch {
	case ip != nil && ip.IsUnspecified():
		return nil
	case ip != nil && ip.IsLoopback(), host == "localhost":
		return []string{net.JoinHostPort("127.0.0.1", port), net.JoinHostPort("localhost", port), net.JoinHostPort("::1", port)}
	}
	return []string{addr}
}

// localURL is a redirect target on this server: path cleaned to one
// leading slash (so that //host/ cannot name another host) and no
// backslash (which browsers read as a slash), with query q.
func localURL(p string, q url.Values) string {
	p = path.Clean("/" + p)
	if strings.Contains(p, `\`) {
		p = "/"
	}
	u := url.URL{Path: p, RawQuery: q.Encode()}
	return u.RequestURI()
}
