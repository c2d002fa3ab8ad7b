package awsenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"syscall"
	"time"

	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Unreachable describes an AWS call that never got an answer: what
// leasehold.UnreachableError reports.
type Unreachable struct {
	Service  string // the SDK's service id ("DynamoDB", "SQS", ...), else "AWS"
	Endpoint string // scheme://host[:port], else "its endpoint"
	Reason   string // "connection refused", "no answer within 10s", ...
}

// ClassifyUnreachable recognises a request that could not be sent or got no
// answer within callTimeout (a cancelled ctx is not the endpoint's fault).
// endpoints maps a service id to the endpoint named when the error names
// none. ok is false for every other error, nil included.
func ClassifyUnreachable(err error, endpoints map[string]string, callTimeout time.Duration) (u Unreachable, ok bool) {
	var send *smithyhttp.RequestSendError
	timedOut := errors.Is(err, context.DeadlineExceeded)
	if err == nil || (!errors.As(err, &send) && !timedOut) || errors.Is(err, context.Canceled) {
		return Unreachable{}, false
	}
	u = Unreachable{Service: "AWS", Endpoint: "its endpoint"}
	var op *smithy.OperationError
	if errors.As(err, &op) {
		u.Service = op.ServiceID
		if ep := endpoints[op.ServiceID]; ep != "" {
			u.Endpoint = ep
		}
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		if p, perr := url.Parse(ue.URL); perr == nil && p.Host != "" {
			u.Endpoint = p.Scheme + "://" + p.Host
		}
	}
	var dns *net.DNSError
	var netErr net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		u.Reason = "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		u.Reason = "connection reset"
	case errors.As(err, &dns):
		u.Reason = "cannot resolve host " + dns.Name
	case timedOut, errors.As(err, &netErr) && netErr.Timeout():
		u.Reason = fmt.Sprintf("no answer within %s", callTimeout)
	case ue != nil:
		u.Reason = ue.Err.Error()
	default:
		u.Reason = send.Err.Error()
	}
	return u, true
}
