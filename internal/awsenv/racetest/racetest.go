// Package racetest replays, for tests, how the SDK lost answers the server
// had sent ("use of closed network connection" while reading the response
// body), step by step:
//
//  1. net/http writes the request's headers, then its body; the server
//     reads both and answers with the headers of its response;
//  2. the SDK's HTTP handler gets the response and at once closes the
//     request body, whose wrapper (smithy-go's safe read closer) answers
//     every later read with io.EOF, and its WriteTo with io.EOF as an error;
//  3. only then (a loaded machine schedules the writing goroutine late)
//     net/http, done writing the body, checks the body holds no extra
//     bytes with io.Copy(io.Discard, body), which goes through WriteTo and
//     returns that io.EOF as a write error;
//  4. net/http closes the connection on a write error, so the response
//     body, not read yet, is gone: the SDK retries, and the server has
//     already handed the first answer's messages out (they stay hidden
//     for the visibility timeout).
//
// The connection holds step 3 until step 2 is done, and the server sends
// its response body only once the request's write is over (and, if the
// write failed, the connection closed), so the order is certain. A client
// that is not behind awsenv.GuardHTTP loses the answer; one behind it gets
// it.
package racetest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/smithy-go/middleware"
)

// deadlock only breaks a deadlock: no step waits that long when the test
// works.
const deadlock = 30 * time.Second

// Config returns an SDK configuration whose first call goes to a server
// that answers it with body (a JSON protocol answer, such as DynamoDB's or
// SQS's), with the steps ordered as the package describes. Its HTTPClient
// is not guarded, and RetryMaxAttempts is 1, so a lost answer is the
// call's error (containing "use of closed network connection"). The server
// answers one call: make one per configuration.
func Config(t testing.TB, body string) aws.Config {
	t.Helper()
	var (
		handled   = make(chan struct{}) // the SDK's HTTP handler returned (the request body is closed)
		wrote     = make(chan error, 1) // net/http finished writing the request
		connGone  = make(chan struct{}) // the client closed its connection
		closeOnce sync.Once
	)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		req, err := http.ReadRequest(bufio.NewReader(conn))
		if err != nil {
			t.Errorf("racetest server: read request: %v", err)
			return
		}
		if _, err := io.Copy(io.Discard, req.Body); err != nil {
			t.Errorf("racetest server: read request body: %v", err)
			return
		}
		fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Type: application/x-amz-json-1.0\r\nContent-Length: %d\r\n\r\n", len(body))
		select {
		case err := <-wrote:
			if err != nil {
				<-connGone
			}
		case <-time.After(deadlock):
			t.Errorf("racetest server: the client never finished writing its request")
		}
		_, _ = io.WriteString(conn, body)
	})

	dialer := &net.Dialer{}
	client := awshttp.NewBuildableClient().WithTimeout(deadlock).WithTransportOptions(func(tr *http.Transport) {
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &heldConn{Conn: c, release: handled, gone: func() { closeOnce.Do(func() { close(connGone) }) }}, nil
		}
	})
	var handledOnce sync.Once
	return aws.Config{
		Region:           "us-east-1",
		Credentials:      credentials.NewStaticCredentialsProvider("test", "test", ""),
		HTTPClient:       tracedClient{next: client, wrote: wrote},
		RetryMaxAttempts: 1,
		BaseEndpoint:     aws.String("http://" + ln.Addr().String()),
		APIOptions: []func(*middleware.Stack) error{func(s *middleware.Stack) error {
			// Innermost in the deserialize step: runs right after the SDK's
			// HTTP handler, which has closed the request body by then.
			return s.Deserialize.Add(middleware.DeserializeMiddlewareFunc("racetestHandlerReturned",
				func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
					out, md, err := next.HandleDeserialize(ctx, in)
					handledOnce.Do(func() { close(handled) })
					return out, md, err
				}), middleware.After)
		}},
	}
}

// heldConn holds its second write (the request body; net/http flushes the
// headers first) after the bytes are sent, until release is closed.
type heldConn struct {
	net.Conn
	release <-chan struct{}
	gone    func()
	writes  int
}

func (c *heldConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.writes++
	if c.writes == 2 {
		select {
		case <-c.release:
		case <-time.After(deadlock):
		}
	}
	return n, err
}

func (c *heldConn) Close() error {
	err := c.Conn.Close()
	c.gone()
	return err
}

// tracedClient reports the end of each request's write on wrote.
type tracedClient struct {
	next  aws.HTTPClient
	wrote chan<- error
}

func (c tracedClient) Do(r *http.Request) (*http.Response, error) {
	trace := &httptrace.ClientTrace{WroteRequest: func(i httptrace.WroteRequestInfo) {
		select {
		case c.wrote <- i.Err:
		default:
		}
	}}
	return c.next.Do(r.WithContext(httptrace.WithClientTrace(r.Context(), trace)))
}
