// Package queues names work queues and resolves their names to URLs.
//
// A task records the name of the SQS queue its tokens go to (empty for the
// default work queue). Names, not URLs, are stored: a name is what a user
// writes, it survives a move between accounts' endpoints in tests, and SQS
// resolves it with GetQueueUrl. The Resolver caches every name it has
// resolved, so a busy worker or sweep makes one lookup per queue.
package queues

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/leasehold/leasehold/internal/defaults"
)

var (
	// ErrNotFound: no queue of that name exists (SQS's
	// QueueDoesNotExist, translated).
	ErrNotFound = errors.New("queue not found")
	// ErrInvalidName: a name SQS would not accept, or a FIFO queue, which
	// leasehold does not support.
	ErrInvalidName = errors.New("invalid queue name")
)

// MaxNameBytes is the longest queue name SQS accepts.
const MaxNameBytes = 80

// CheckName accepts a standard SQS queue name: 1 to 80 characters, each an
// ASCII letter, digit, '-' or '_'. A ".fifo" name is rejected: leasehold's
// tokens carry no message group, and its retries rely on per-message delays,
// which FIFO queues do not have.
func CheckName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: the name is empty", ErrInvalidName)
	case strings.HasSuffix(name, ".fifo"):
		return fmt.Errorf("%w: %q is a FIFO queue; leasehold supports standard queues only", ErrInvalidName, name)
	case len(name) > MaxNameBytes:
		return fmt.Errorf("%w: the name is %d characters, the limit is %d", ErrInvalidName, len(name), MaxNameBytes)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return fmt.Errorf("%w: %q may hold only letters, digits, '-' and '_'", ErrInvalidName, name)
		}
	}
	return nil
}

// NameFromURL returns the queue name a queue URL ends with ("" when the URL
// has no path).
func NameFromURL(queueURL string) string {
	u, err := url.Parse(queueURL)
	if err != nil || u.Path == "" || u.Path == "/" {
		return ""
	}
	return path.Base(u.Path)
}

// NameFromARN returns the queue name and the account of a queue ARN
// (arn:<partition>:sqs:<region>:<account>:<name>); empty strings when arn is
// not one.
func NameFromARN(arn string) (name, account string) {
	parts := strings.Split(arn, ":")
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "sqs" {
		return "", ""
	}
	return parts[5], parts[4]
}

// SQSClient lists the call a Resolver makes; *sqs.Client satisfies it.
type SQSClient interface {
	GetQueueUrl(ctx context.Context, params *sqs.GetQueueUrlInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
}

// Resolver turns queue names into URLs. The empty name is the default queue.
// Found URLs are kept for the resolver's lifetime (a queue's URL does not
// change, even when it is deleted and created again); a failed lookup is not
// kept, so a queue created later is found. Safe for concurrent use.
type Resolver struct {
	client      SQSClient
	defaultURL  string
	callTimeout time.Duration

	mu   sync.Mutex
	urls map[string]string
}

// NewResolver returns a resolver whose default queue is defaultURL (may be
// empty: then the empty name cannot be resolved). known URLs are added to the
// cache under their names, so the queues a worker already serves need no
// lookup. callTimeout <= 0 takes defaults.CallTimeout.
func NewResolver(client SQSClient, defaultURL string, callTimeout time.Duration, known ...string) *Resolver {
	if callTimeout <= 0 {
		callTimeout = defaults.CallTimeout
	}
	r := &Resolver{client: client, defaultURL: defaultURL, callTimeout: callTimeout, urls: map[string]string{}}
	for _, u := range append([]string{defaultURL}, known...) {
		if n := NameFromURL(u); n != "" {
			r.urls[n] = u
		}
	}
	return r
}

// DefaultURL is the URL of the default queue.
func (r *Resolver) DefaultURL() string { return r.defaultURL }

// URL returns the URL of the queue named name ("" for the default queue).
// A queue that does not exist gives an error wrapping ErrNotFound.
func (r *Resolver) URL(ctx context.Context, name string) (string, error) {
	return r.lookup(ctx, name, "")
}

// URLOf is URL for a queue known by its ARN (an SQS event's source): the
// ARN's account is passed to GetQueueUrl, so a queue of another account is
// found too.
func (r *Resolver) URLOf(ctx context.Context, arn string) (string, error) {
	name, account := NameFromARN(arn)
	if name == "" {
		return "", fmt.Errorf("%w: %q is not an SQS queue ARN", ErrInvalidName, arn)
	}
	return r.lookup(ctx, name, account)
}

func (r *Resolver) lookup(ctx context.Context, name, account string) (string, error) {
	if name == "" {
		if r.defaultURL == "" {
			return "", fmt.Errorf("%w: no default queue is configured", ErrNotFound)
		}
		return r.defaultURL, nil
	}
	r.mu.Lock()
	u, ok := r.urls[name]
	r.mu.Unlock()
	if ok {
		return u, nil
	}
	if err := CheckName(name); err != nil {
		return "", err
	}
	if r.client == nil {
		return "", fmt.Errorf("look up queue %s: %w: no SQS client to look it up with", name, ErrNotFound)
	}
	cctx, cancel := context.WithTimeout(ctx, r.callTimeout)
	defer cancel()
	in := &sqs.GetQueueUrlInput{QueueName: aws.String(name)}
	if account != "" {
		in.QueueOwnerAWSAccountId = aws.String(account)
	}
	out, err := r.client.GetQueueUrl(cctx, in)
	if err != nil {
		if qne := (*types.QueueDoesNotExist)(nil); errors.As(err, &qne) {
			return "", fmt.Errorf("look up queue %s: %w: %w", name, ErrNotFound, err)
		}
		return "", fmt.Errorf("look up queue %s: %w", name, err)
	}
	u = aws.ToString(out.QueueUrl)
	if u == "" {
		return "", fmt.Errorf("look up queue %s: %w: SQS returned no URL", name, ErrNotFound)
	}
	r.mu.Lock()
	r.urls[name] = u
	r.mu.Unlock()
	return u, nil
}
