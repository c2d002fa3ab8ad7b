package ui

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"
)

// HeaderToken carries the API token (Server.APIToken) of a client other
// than a browser. It is not the start token of the printed URL, and no page
// shows it.
const HeaderToken = "X-Leasehold-Token"

// queryToken is the start URL's parameter that carries the start token.
const queryToken = "token"

// formCSRF is the form field that carries an action's CSRF token.
const formCSRF = "csrf"

// maxForm bounds an action's body.
const maxForm = 1 << 20

const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// hostAllowed reports whether host (a request's Host) names this server:
// one of the addresses it was told it listens on. With none (a server
// bound to every interface) any host passes and the session alone guards.
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
// API token) passes on the token alone.
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

// guard checks every request: the host, the base path, the session, and
// for an action its origin and CSRF token. A first visit with ?token= opens
// the session, sets its cookie and is sent on to the same page without the
// token in its URL; any later visit with the token is refused.
func (g gate) guard(next http.Handler) http.Handler {
	s := g.s
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		securityHeaders(w.Header())
		if !g.hostAllowed(r.Host) {
			http.Error(w, "forbidden: unexpected Host "+r.Host, http.StatusForbidden)
			return
		}
		if r.URL.Path == "/favicon.ico" && r.Method == http.MethodGet {
			// A browser asks for the icon at the root of the host, with no
			// cookie of the base's: it gets the inspector's icon, which
			// tells nothing, rather than a 404 in its console.
			serveIcon(w)
			return
		}
		rest, ok := strings.CutPrefix(r.URL.Path, s.base)
		if !ok || (rest != "" && rest[0] != '/') {
			http.Error(w, "not found: the inspector's pages are under the path of the URL `leasehold ui` printed", http.StatusNotFound)
			return
		}
		now := s.cfg.Now()
		if t := r.URL.Query().Get(queryToken); t != "" && r.Method == http.MethodGet {
			sess, refused := s.auth.open(t, now)
			if sess == nil {
				http.Error(w, refused, http.StatusForbidden)
				return
			}
			// Path: the browser sends the cookie to this run's base alone,
			// never to another server on another port of this host.
			http.SetCookie(w, &http.Cookie{Name: g.cookie, Value: sess.id, Path: s.base, HttpOnly: true, SameSite: http.SameSiteStrictMode})
			q := r.URL.Query()
			q.Del(queryToken)
			http.Redirect(w, r, s.localURL(rest, q), http.StatusSeeOther)
			return
		}
		var sess *session
		if !same(r.Header.Get(HeaderToken), s.apiToken) {
			var ids []string
			for _, c := range r.CookiesNamed(g.cookie) {
				ids = append(ids, c.Value)
			}
			var refused string
			if sess, refused = s.auth.session(ids, now, r.URL.Query().Get("live") != "1"); sess == nil {
				http.Error(w, refused, http.StatusForbidden)
				return
			}
		}
		switch r.Method {
		case http.MethodGet:
			if rest == "" {
				http.Redirect(w, r, s.localURL("/", r.URL.Query()), http.StatusSeeOther)
				return
			}
		case http.MethodPost:
			if !sameOrigin(r) {
				http.Error(w, "forbidden: cross-origin request", http.StatusForbidden)
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, maxForm)
			// A client with the API token needs none: a page of another
			// origin cannot send the header without a CORS preflight, which
			// this server never grants.
			if sess != nil && !sess.csrfOK(rest, r.PostFormValue(formCSRF)) {
				http.Error(w, "forbidden: the form carries no valid CSRF token for this action; reload the page it came from and submit again", http.StatusForbidden)
				return
			}
		default:
			// HEAD too: it would do a GET's reads for nothing.
			w.Header().Set("Allow", "GET, POST")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), sessionKey{}, sess)))
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

// localURL is a redirect target on this server, under its base: p (a path
// relative to the base) cleaned to one leading slash, so that no path
// names another host or leaves the base, and with no backslash (which
// browsers read as a slash); with query q.
func (s *Server) localURL(p string, q url.Values) string {
	p = path.Clean("/" + p)
	if strings.Contains(p, `\`) {
		p = "/"
	}
	u := url.URL{Path: s.base + p, RawQuery: q.Encode()}
	return u.RequestURI()
}

// serveIcon answers /favicon.ico with the icon the pages link to
// (assets/static/favicon.svg).
func serveIcon(w http.ResponseWriter) {
	icon, err := assets.ReadFile("assets/static/favicon.svg")
	if err != nil {
		http.Error(w, "no icon", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "image/svg+xml")
	w.Header().Set("Cache-Control", "max-age=86400")
	_, _ = w.Write(icon)
}
