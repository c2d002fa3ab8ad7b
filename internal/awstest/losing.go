package awstest

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// LosingHTTP is an SDK HTTP client that lets one matching request reach the
// emulator, then drops its response and answers 500 in its place: what a
// connection lost after the write landed looks like to the SDK, which then
// retries the same request. Tests use it to prove a write recognises its
// own earlier landing.
type LosingHTTP struct {
	next aws.HTTPClient

	mu      sync.Mutex
	target  string // X-Amz-Target of the request to lose, e.g. DynamoDB_20120810.UpdateItem
	marker  string // and a string its body contains
	dropped int
	then    func() // runs once the armed request landed, before its loss is reported
	onDrop  func(*http.Request)
	// dropIf: DropIf's rule, nil when off.
	dropIf func(*http.Request) bool
	// rng and rate: DropRandomly's mode, nil when off.
	rng  *rand.Rand
	rate float64
}

// DropRandomly makes the client drop the response of each request with an
// X-Amz-Target with probability rate, drawn from a generator seeded with
// seed, after the request reached the emulator: every kind of call, at any
// moment, loses its answer now and then, as on a flaky network. The
// draws are in the order requests arrive, so concurrent callers make the
// run vary; the seed fixes the rate and the mix.
func (l *LosingHTTP) DropRandomly(rate float64, seed uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rng, l.rate = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), rate
}

// NewLosingHTTP wraps next (http.DefaultClient when nil).
func NewLosingHTTP(next aws.HTTPClient) *LosingHTTP {
	if next == nil {
		next = http.DefaultClient
	}
	return &LosingHTTP{next: next}
}

// LoseNext arms the client: the next request with this X-Amz-Target whose
// body contains marker has its response dropped.
func (l *LosingHTTP) LoseNext(target, marker string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.target, l.marker, l.then = target, marker, nil
}

// LoseNextThen is LoseNext, and runs then after the request landed and
// before the SDK hears of the loss (and retries): what other callers do
// while a caller waits out a lost response.
func (l *LosingHTTP) LoseNextThen(target, marker string, then func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.target, l.marker, l.then = target, marker, then
}

// DropIf makes the client also drop the response of each request with an
// X-Amz-Target for which f reports true, after the request reached the
// emulator: a test that must lose an answer of some call whatever the
// random draws (DropRandomly) say names it so.
func (l *LosingHTTP) DropIf(f func(*http.Request) bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dropIf = f
}

// OnDrop makes the client call f with each request whose response it
// drops, after the request landed and before the SDK hears of the loss:
// a test credits the loss to the call the request's context names.
func (l *LosingHTTP) OnDrop(f func(*http.Request)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.onDrop = f
}

// Dropped is how many responses were dropped.
func (l *LosingHTTP) Dropped() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dropped
}

// Do implements aws.HTTPClient.
func (l *LosingHTTP) Do(r *http.Request) (*http.Response, error) {
	lose := false
	var then, dropped func()
	if r.Header.Get("X-Amz-Target") != "" && r.Body != nil {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		l.mu.Lock()
		dropIf := l.dropIf
		l.mu.Unlock()
		forced := dropIf != nil && dropIf(r)
		l.mu.Lock()
		if l.target != "" && r.Header.Get("X-Amz-Target") == l.target && strings.Contains(string(body), l.marker) {
			lose, l.target, then, l.then = true, "", l.then, nil
		}
		if l.rng != nil && l.rng.Float64() < l.rate || forced {
			lose = true
		}
		if lose {
			l.dropped++
			if f := l.onDrop; f != nil {
				dropped = func() { f(r) }
			}
		}
		l.mu.Unlock()
	}
	resp, err := l.next.Do(r)
	if !lose || err != nil {
		return resp, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if then != nil {
		then()
	}
	if dropped != nil {
		dropped()
	}
	return &http.Response{
		StatusCode: http.StatusInternalServerError,
		Status:     "500 Internal Server Error",
		Header:     http.Header{"Content-Type": []string{"application/x-amz-json-1.0"}},
		Body:       io.NopCloser(strings.NewReader(`{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"response lost in test"}`)),
		Request:    r,
	}, nil
}
