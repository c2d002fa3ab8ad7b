package awstest

import (
	"bytes"
	"io"
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
	l.target, l.marker = target, marker
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
	if r.Header.Get("X-Amz-Target") != "" && r.Body != nil {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		l.mu.Lock()
		if l.target != "" && r.Header.Get("X-Amz-Target") == l.target && strings.Contains(string(body), l.marker) {
			lose, l.target = true, ""
			l.dropped++
		}
		l.mu.Unlock()
	}
	resp, err := l.next.Do(r)
	if !lose || err != nil {
		return resp, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return &http.Response{
		StatusCode: http.StatusInternalServerError,
		Status:     "500 Internal Server Error",
		Header:     http.Header{"Content-Type": []string{"application/x-amz-json-1.0"}},
		Body:       io.NopCloser(strings.NewReader(`{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"response lost in test"}`)),
		Request:    r,
	}, nil
}
