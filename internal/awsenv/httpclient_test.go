package awsenv_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"

	"github.com/leasehold/leasehold/internal/awsenv"
)

// TestAnswerSurvivesTheSDKClosingTheRequestBody replays, step by step, how
// the stack lost ReceiveMessage answers under load ("use of closed network
// connection" while reading the response body):
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
// The connection here holds step 3 until step 2 is done, and the server
// sends its response body only once the request's write is over (and, if
// the write failed, the connection closed), so the order is certain.
// Unguarded the answer is lost; through awsenv.GuardHTTP it arrives.
func TestAnswerSurvivesTheSDKClosingTheRequestBody(t *testing.T) {
	for _, tc := range []struct {
		name  string
		guard bool
	}{{"unguarded", false}, {"guarded", true}} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := receiveThroughRace(t, tc.guard)
			switch {
			case tc.guard && err != nil:
				t.Fatalf("ReceiveMessage through awsenv.GuardHTTP: %v", err)
			case !tc.guard && err == nil:
				t.Fatal("the unguarded SDK client kept the answer: the SDK no longer loses it this way, and awsenv.GuardHTTP may be unneeded")
			case !tc.guard && !strings.Contains(err.Error(), "use of closed network connection"):
				t.Fatalf("unguarded: got %v, want the answer lost with 'use of closed network connection'", err)
			}
		})
	}
}

// receiveThroughRace makes one ReceiveMessage call (no SDK retries) against
// a one-answer server, with the steps ordered as described above.
func receiveThroughRace(t *testing.T, guard bool) (*sqs.ReceiveMessageOutput, error) {
	t.Helper()
	const body = `{"Messages":[{"MessageId":"m-1","ReceiptHandle":"r-1","Body":"hello","MD5OfBody":"5d41402abc4b2a76b9719d911017c592"}]}`

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
			t.Errorf("server: read request: %v", err)
			return
		}
		if _, err := io.Copy(io.Discard, req.Body); err != nil {
			t.Errorf("server: read request body: %v", err)
			return
		}
		fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Type: application/x-amz-json-1.0\r\nContent-Length: %d\r\n\r\n", len(body))
		select {
		case err := <-wrote:
			if err != nil {
				<-connGone
			}
		case <-time.After(30 * time.Second): // only breaks a deadlock
			t.Errorf("server: the client never finished writing its request")
		}
		_, _ = io.WriteString(conn, body)
	})

	dialer := &net.Dialer{}
	client := awshttp.NewBuildableClient().WithTimeout(30 * time.Second).WithTransportOptions(func(tr *http.Transport) {
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &heldConn{Conn: c, release: handled, gone: func() { closeOnce.Do(func() { close(connGone) }) }}, nil
		}
	})
	var hc aws.HTTPClient = tracedClient{next: client, wrote: wrote}
	if guard {
		hc = awsenv.GuardHTTP(hc)
	}
	cfg := aws.Config{
		Region:           "us-east-1",
		Credentials:      credentials.NewStaticCredentialsProvider("test", "test", ""),
		HTTPClient:       hc,
		RetryMaxAttempts: 1,
		BaseEndpoint:     aws.String("http://" + ln.Addr().String()),
	}
	var handledOnce sync.Once
	c := sqs.NewFromConfig(cfg, func(o *sqs.Options) {
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
			// Innermost in the deserialize step: runs right after the SDK's
			// HTTP handler, which has closed the request body by then.
			return s.Deserialize.Add(middleware.DeserializeMiddlewareFunc("testHandlerReturned",
				func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
					out, md, err := next.HandleDeserialize(ctx, in)
					handledOnce.Do(func() { close(handled) })
					return out, md, err
				}), middleware.After)
		})
	})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String("http://" + ln.Addr().String() + "/000000000000/q")})
	if err == nil && (len(out.Messages) != 1 || aws.ToString(out.Messages[0].Body) != "hello") {
		t.Fatalf("ReceiveMessage answered %+v, want the one message", out.Messages)
	}
	return out, err
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
		case <-time.After(30 * time.Second): // only breaks a deadlock
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
