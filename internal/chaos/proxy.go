package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Faults says what a Proxy does to the requests it forwards. Rates are
// probabilities in [0, 1], drawn independently for every request.
type Faults struct {
	// ResetBefore: the client connection is reset (RST) before the request
	// is forwarded; the emulator never sees it.
	ResetBefore float64
	// ResetAfter: the request is forwarded, the emulator applies it and
	// answers, and the answer is thrown away: the client connection is reset
	// instead. The client cannot tell this apart from ResetBefore.
	ResetAfter float64
	// Delay: the request waits a uniform random time in [0, MaxDelay]
	// before it is forwarded.
	Delay    float64
	MaxDelay time.Duration
}

// Validate rejects rates outside [0, 1] and a negative delay.
func (f Faults) Validate() error {
	for _, r := range []float64{f.ResetBefore, f.ResetAfter, f.Delay} {
		if r < 0 || r > 1 {
			return fmt.Errorf("chaos: fault rate %v outside [0, 1]", r)
		}
	}
	if f.MaxDelay < 0 {
		return errors.New("chaos: negative max delay")
	}
	return nil
}

// Exchange is one request the proxy forwarded, as the proxy saw it. The
// emulator applied the request at some instant in [Forwarded, Answered].
type Exchange struct {
	Target    string // X-Amz-Target, e.g. "DynamoDB_20120810.UpdateItem"
	UserAgent string
	Received  time.Time
	Forwarded time.Time
	Answered  time.Time
	Status    int // upstream HTTP status; 0 when the upstream call failed
	// Dropped: the answer never reached the client (ResetAfter).
	Dropped  bool
	Request  []byte
	Response []byte
}

// ProxyStats counts what a proxy did.
type ProxyStats struct {
	Requests, ResetsBefore, ResetsAfter, Delayed, UpstreamErrors int64
}

// Proxy is a fault-injecting HTTP reverse proxy on 127.0.0.1 in front of one
// upstream endpoint (an AWS emulator). It reads each request whole, forwards
// it, reads the answer whole, and hands the pair to Observe before the answer
// is written back or dropped.
type Proxy struct {
	upstream *url.URL
	faults   Faults
	client   *http.Client
	observe  func(Exchange)

	ln       net.Listener
	srv      *http.Server
	done     chan struct{}  // closed when Serve has returned
	handlers sync.WaitGroup // ServeHTTP calls in progress

	requests, resetsBefore, resetsAfter, delayed, upstreamErrors atomic.Int64

	mu  sync.Mutex
	rng *rand.Rand
}

// Limits of the proxy.
const (
	// maxBody bounds a request or response body the proxy buffers.
	maxBody = 8 << 20
	// upstreamTimeout bounds one forwarded call (an SQS long poll is at
	// most 20s).
	upstreamTimeout = 45 * time.Second
)

// StartProxy listens on 127.0.0.1 (a free port) and forwards to upstream,
// which must be an http URL on 127.0.0.1 or localhost. observe may be nil;
// it is called from request goroutines, concurrently.
func StartProxy(upstream string, faults Faults, seed uint64, observe func(Exchange)) (*Proxy, error) {
	if err := faults.Validate(); err != nil {
		return nil, err
	}
	u, err := url.Parse(upstream)
	if err != nil {
		return nil, fmt.Errorf("chaos: upstream %q: %w", upstream, err)
	}
	if u.Scheme != "http" || (u.Hostname() != "127.0.0.1" && u.Hostname() != "localhost") {
		return nil, fmt.Errorf("chaos: upstream %q must be http on 127.0.0.1", upstream)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("chaos: listen: %w", err)
	}
	p := &Proxy{
		upstream: u,
		faults:   faults,
		client: &http.Client{
			Timeout: upstreamTimeout,
			Transport: &http.Transport{
				Proxy:               nil, // never an environment proxy: 127.0.0.1 only
				DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
				MaxIdleConnsPerHost: 64,
				IdleConnTimeout:     30 * time.Second,
				DisableCompression:  true, // pass bodies through untouched
			},
		},
		observe: observe,
		ln:      ln,
		done:    make(chan struct{}),
		rng:     rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
	}
	p.srv = &http.Server{
		Handler:           p,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      upstreamTimeout + 15*time.Second,
		IdleTimeout:       60 * time.Second,
	}
	go func() {
		defer close(p.done)
		_ = p.srv.Serve(ln) // returns http.ErrServerClosed on Close/Shutdown
	}()
	return p, nil
}

// URL is the proxy's endpoint, for AWS_ENDPOINT_URL_*.
func (p *Proxy) URL() string { return "http://" + p.ln.Addr().String() }

// Stats returns the counters so far.
func (p *Proxy) Stats() ProxyStats {
	return ProxyStats{
		Requests:       p.requests.Load(),
		ResetsBefore:   p.resetsBefore.Load(),
		ResetsAfter:    p.resetsAfter.Load(),
		Delayed:        p.delayed.Load(),
		UpstreamErrors: p.upstreamErrors.Load(),
	}
}

// Close stops the proxy: it waits up to timeout for requests in flight, then
// closes every connection, and returns once the server goroutine and every
// request handler have ended (a handler still waiting for the upstream ends
// within upstreamTimeout), so Observe is never called after Close.
func (p *Proxy) Close(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := p.srv.Shutdown(ctx)
	if err != nil {
		err = errors.Join(err, p.srv.Close())
	}
	<-p.done
	p.handlers.Wait()
	p.client.CloseIdleConnections()
	return err
}

// plan is the faults drawn for one request.
type plan struct {
	resetBefore, resetAfter bool
	delay                   time.Duration
}

func (p *Proxy) draw() plan {
	p.mu.Lock()
	defer p.mu.Unlock()
	var pl plan
	pl.resetBefore = p.rng.Float64() < p.faults.ResetBefore
	pl.resetAfter = !pl.resetBefore && p.rng.Float64() < p.faults.ResetAfter
	if p.faults.MaxDelay > 0 && p.rng.Float64() < p.faults.Delay {
		pl.delay = time.Duration(p.rng.Int64N(int64(p.faults.MaxDelay) + 1))
	}
	return pl
}

// hopHeaders are not forwarded (RFC 9110 section 7.6.1).
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.handlers.Add(1)
	defer p.handlers.Done()
	p.requests.Add(1)
	ex := Exchange{Target: r.Header.Get("X-Amz-Target"), UserAgent: r.Header.Get("User-Agent"), Received: time.Now()}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil || len(body) > maxBody {
		http.Error(w, "chaos proxy: cannot read request body", http.StatusBadRequest)
		return
	}
	ex.Request = body
	pl := p.draw()

	if pl.resetBefore {
		p.resetsBefore.Add(1)
		reset(w)
		return
	}
	if pl.delay > 0 {
		p.delayed.Add(1)
		t := time.NewTimer(pl.delay)
		select {
		case <-t.C:
		case <-r.Context().Done(): // the client gave up
			t.Stop()
			return
		}
	}

	out := &url.URL{Scheme: p.upstream.Scheme, Host: p.upstream.Host, Path: r.URL.Path, RawQuery: r.URL.RawQuery}
	// The upstream call is not tied to the client's connection: once
	// forwarded, the request completes even if the client went away (as a
	// real service would), and Observe learns its outcome.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), upstreamTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, r.Method, out.String(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, "chaos proxy: "+err.Error(), http.StatusBadGateway)
		return
	}
	req.Header = r.Header.Clone()
	for _, h := range hopHeaders {
		req.Header.Del(h)
	}
	req.Host = r.Host // the client signed this host
	req.ContentLength = int64(len(body))

	ex.Forwarded = time.Now()
	resp, err := p.client.Do(req)
	var respBody []byte
	if err == nil {
		respBody, err = io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
		_ = resp.Body.Close()
		if err == nil && len(respBody) > maxBody {
			err = errors.New("response body over the proxy's limit")
		}
	}
	ex.Answered = time.Now()
	if err != nil {
		p.upstreamErrors.Add(1)
		if p.observe != nil {
			p.observe(ex)
		}
		reset(w)
		return
	}
	ex.Status = resp.StatusCode
	ex.Response = respBody
	ex.Dropped = pl.resetAfter
	if p.observe != nil {
		p.observe(ex)
	}
	if pl.resetAfter {
		p.resetsAfter.Add(1)
		reset(w)
		return
	}
	for k, vs := range resp.Header {
		if strings.EqualFold(k, "Content-Length") || isHop(k) {
			continue
		}
		w.Header()[k] = vs
	}
	w.Header().Set("Content-Length", fmt.Sprint(len(respBody)))
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(respBody)
}

func isHop(h string) bool {
	for _, x := range hopHeaders {
		if strings.EqualFold(h, x) {
			return true
		}
	}
	return false
}

// reset takes the client connection over and closes it with SO_LINGER 0, so
// the client sees a TCP RST instead of an answer.
func reset(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok { // cannot happen with HTTP/1.1 on a plain listener
		http.Error(w, "chaos proxy: cannot reset", http.StatusBadGateway)
		return
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}
