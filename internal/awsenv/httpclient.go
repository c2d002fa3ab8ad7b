package awsenv

import (
	"io"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
)

// HTTPClient is the SDK HTTP client every leasehold process builds its AWS
// configuration with: the SDK's default client, each round trip bounded by
// timeout (none when 0), behind GuardHTTP.
func HTTPClient(timeout time.Duration) aws.HTTPClient {
	c := awshttp.NewBuildableClient()
	if timeout > 0 {
		c = c.WithTimeout(timeout)
	}
	return GuardHTTP(c)
}

// GuardHTTP wraps an SDK HTTP client so that the SDK cannot lose an answer
// the server sent by closing the request body too early.
//
// The SDK's HTTP handler closes a request's body as soon as the response
// headers are in, and the body it hands net/http then answers io.EOF to
// every read and, through its WriteTo, returns io.EOF as an error. When
// net/http's writing goroutine runs late (a loaded machine), it has written
// the body but not yet made its last check that the body holds no extra
// bytes, an io.Copy(io.Discard, body) that goes through WriteTo; the io.EOF
// it gets there is a write error to net/http, which closes the connection,
// and the response body that the SDK is about to read is gone ("use of
// closed network connection"). The SDK retries the call; for a
// ReceiveMessage the messages of the lost answer stay hidden for the
// visibility timeout. The measured rate, the test that replays it and the
// idle-timeout explanation that did not hold are in localstack/README.md.
//
// The guard hands net/http the same body without its WriteTo: the late
// check then reads io.EOF as the end of the body, which it is.
//
// A configuration from config.LoadDefaultConfig takes the guard after it is
// loaded (cfg.HTTPClient = GuardHTTP(cfg.HTTPClient)): LoadDefaultConfig
// adds AWS_CA_BUNDLE's certificates only to the SDK's own client type, and
// fails on any other. A nil next is the SDK's default client; a next that
// is already guarded is returned as it is.
func GuardHTTP(next aws.HTTPClient) aws.HTTPClient {
	if next == nil {
		next = awshttp.NewBuildableClient()
	}
	if Guarded(next) {
		return next
	}
	return guarded{next: next}
}

// Guarded reports whether c is a client that GuardHTTP returned.
func Guarded(c aws.HTTPClient) bool {
	_, ok := c.(guarded)
	return ok
}

type guarded struct{ next aws.HTTPClient }

func (g guarded) Do(r *http.Request) (*http.Response, error) {
	if r.Body != nil && r.Body != http.NoBody {
		if _, ok := r.Body.(io.WriterTo); ok {
			r.Body = readCloserOnly{r.Body}
		}
	}
	return g.next.Do(r)
}

// readCloserOnly hides every method of its body but Read and Close.
type readCloserOnly struct{ rc io.ReadCloser }

func (b readCloserOnly) Read(p []byte) (int, error) { return b.rc.Read(p) }
func (b readCloserOnly) Close() error               { return b.rc.Close() }
