package awstest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptrace"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/logging"

	"github.com/leasehold/leasehold/internal/awsenv"
	"github.com/leasehold/leasehold/internal/awstest"
)

// TestLostAnswerRate measures how often an HTTP exchange with the local
// stack fails in transport ("use of closed network connection", connection
// reset, EOF): the failures that lose a ReceiveMessage's answer. It makes
// LEASEHOLD_LOST_ANSWER_CALLS mixed SQS and DynamoDB calls (send, receive
// with a short wait, delete, put, get) from LEASEHOLD_LOST_ANSWER_WORKERS
// goroutines (default 8), half through the tests' config (awstest.Config)
// and half through the functions' config (awsenv.Load), each worker
// pausing between calls for a length drawn from around the servers' and
// the client's idle timeouts, and reports every failed HTTP attempt
// (including those the SDK retried) per 10,000 attempts. It is a
// measurement, not a check: it is skipped unless the variable is set, and
// fails only when a call fails after the SDK's retries.
//
//	LEASEHOLD_LOST_ANSWER_CALLS=10000 go test -run '^TestLostAnswerRate$' -v ./internal/awstest
func TestLostAnswerRate(t *testing.T) {
	calls, _ := strconv.Atoi(os.Getenv("LEASEHOLD_LOST_ANSWER_CALLS"))
	if calls <= 0 {
		t.Skip("a measurement: set LEASEHOLD_LOST_ANSWER_CALLS=10000 to run it")
	}
	workers := 8
	if w, err := strconv.Atoi(os.Getenv("LEASEHOLD_LOST_ANSWER_WORKERS")); err == nil && w > 0 {
		workers = w
	}
	pauses := lostAnswerPauses(t)

	base := awstest.Config(t)
	table := awstest.NewTable(t, base)
	queues := awstest.NewQueues(t, base)

	rec := &transportRecorder{errs: map[string]int{}}
	testsCfg := base.Copy()
	testsCfg.HTTPClient = rec.wrap(base.HTTPClient)
	testsCfg.Logger = rec
	envCfg, err := awsenv.Load()
	if err != nil {
		t.Fatalf("awsenv.Load: %v", err)
	}
	envCfg.Logger = rec
	// awsenv leaves the HTTP client unset, so each service client makes
	// the SDK's default one; wrap exactly that.
	envClient := envCfg.HTTPClient
	if envClient == nil {
		envClient = awshttp.NewBuildableClient()
	}
	envCfg.HTTPClient = rec.wrap(envClient)

	type clients struct {
		sqs *sqs.Client
		ddb *dynamodb.Client
	}
	cs := []clients{
		{sqs.NewFromConfig(testsCfg), dynamodb.NewFromConfig(testsCfg)},
		{sqs.NewFromConfig(envCfg), dynamodb.NewFromConfig(envCfg)},
	}

	var (
		mu     sync.Mutex
		failed []string
		made   int
	)
	next := make(chan int)
	var wg sync.WaitGroup
	for w := range workers {
		c := cs[w%len(cs)]
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 19))
			var receipts []string
			for i := range next {
				time.Sleep(pauses[rng.IntN(len(pauses))])
				ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
				var err error
				switch op := i % 5; {
				case op == 0:
					_, err = c.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(queues.Work), MessageBody: aws.String("m" + strconv.Itoa(i))})
				case op == 1:
					var out *sqs.ReceiveMessageOutput
					out, err = c.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(queues.Work), MaxNumberOfMessages: 2, WaitTimeSeconds: 1, VisibilityTimeout: 30})
					if err == nil {
						for _, m := range out.Messages {
							receipts = append(receipts, aws.ToString(m.ReceiptHandle))
						}
					}
				case op == 2 && len(receipts) > 0:
					_, err = c.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(queues.Work), ReceiptHandle: aws.String(receipts[0])})
					receipts = receipts[1:]
				case op == 3:
					_, err = c.ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]ddbtypes.AttributeValue{
						"id": &ddbtypes.AttributeValueMemberS{Value: "lost-" + strconv.Itoa(i%97)},
						"n":  &ddbtypes.AttributeValueMemberN{Value: strconv.Itoa(i)},
					}})
				default:
					_, err = c.ddb.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: map[string]ddbtypes.AttributeValue{
						"id": &ddbtypes.AttributeValueMemberS{Value: "lost-" + strconv.Itoa(i%97)},
					}})
				}
				cancel()
				mu.Lock()
				made++
				if err != nil {
					failed = append(failed, fmt.Sprintf("call %d: %v", i, err))
				}
				mu.Unlock()
			}
		})
	}
	start := time.Now()
	for i := range calls {
		select {
		case next <- i:
		case <-t.Context().Done():
		}
		if i > 0 && i%1000 == 0 {
			t.Logf("%d calls sent in %s; %s", i, time.Since(start).Round(time.Second), rec.summary())
		}
	}
	close(next)
	wg.Wait()

	t.Logf("%d calls (%d workers, pauses %v) in %s", made, workers, pauses, time.Since(start).Round(time.Second))
	t.Logf("HTTP attempts: %s", rec.summary())
	for _, m := range rec.first {
		t.Logf("first of its kind: %s", m)
	}
	attempts, bad, closed, writes := rec.totals()
	t.Logf("RATE: %.1f failed attempts per 10,000 (%d of %d); 'use of closed network connection': %.1f per 10,000 (%d); request writes that failed after the answer came: %.1f per 10,000 (%d)",
		per10k(bad, attempts), bad, attempts, per10k(closed, attempts), closed, per10k(writes, attempts), writes)
	for _, f := range failed {
		t.Errorf("failed after the SDK's retries: %s", f)
	}
}

// lostAnswerPauses are the idle gaps a worker draws from: mostly none or
// short, and some around LocalStack's (hypercorn's 5 s keep-alive) and the
// client's idle timeouts. LEASEHOLD_LOST_ANSWER_PAUSES overrides them with
// a comma-separated list of durations.
func lostAnswerPauses(t *testing.T) []time.Duration {
	spec := os.Getenv("LEASEHOLD_LOST_ANSWER_PAUSES")
	if spec == "" {
		spec = "0s,0s,0s,0s,10ms,50ms,200ms,1s,4s,5s,6s"
	}
	var ds []time.Duration
	for f := range strings.SplitSeq(spec, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil {
			t.Fatalf("LEASEHOLD_LOST_ANSWER_PAUSES: %v", err)
		}
		ds = append(ds, d)
	}
	return ds
}

func per10k(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return float64(n) * 10000 / float64(of)
}

// transportRecorder counts HTTP attempts and the transport failures among
// them: an error from the round trip, an error reading the response body,
// and the SDK's warnings about the body it could not drain.
type transportRecorder struct {
	mu       sync.Mutex
	attempts int
	errs     map[string]int // class -> count
	first    []string       // the first full message of each class
}

func (r *transportRecorder) wrap(next aws.HTTPClient) aws.HTTPClient {
	return recordingClient{r: r, next: next}
}

func (r *transportRecorder) note(where string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := where + ": " + errorClass(err.Error())
	if r.errs[k] == 0 {
		r.first = append(r.first, where+": "+err.Error())
	}
	r.errs[k]++
}

// Logf implements logging.Logger: the SDK's warnings.
func (r *transportRecorder) Logf(c logging.Classification, format string, v ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs[fmt.Sprintf("sdk %s: %s", c, errorClass(fmt.Sprintf(format, v...)))]++
}

func (r *transportRecorder) totals() (attempts, bad, closed, writes int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, n := range r.errs {
		if strings.HasPrefix(k, "request write") {
			writes += n // the cause; the loss, if any, is counted below
			continue
		}
		if strings.HasPrefix(k, "sdk ") {
			continue // the same failure, seen again by the SDK
		}
		bad += n
		if strings.Contains(k, "use of closed network connection") {
			closed += n
		}
	}
	return r.attempts, bad, closed, writes
}

func (r *transportRecorder) summary() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	keys := make([]string, 0, len(r.errs))
	for k := range r.errs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "%d attempts", r.attempts)
	for _, k := range keys {
		fmt.Fprintf(&b, "; %s x%d", k, r.errs[k])
	}
	return b.String()
}

// errorClass reduces an error message to its kind.
func errorClass(msg string) string {
	for _, c := range []string{
		"use of closed network connection", "connection reset by peer", "broken pipe",
		"unexpected EOF", "server closed idle connection", "EOF", "context deadline exceeded",
		"Client.Timeout", "connection refused",
	} {
		if strings.Contains(msg, c) {
			return c
		}
	}
	if len(msg) > 120 {
		msg = msg[:120]
	}
	return msg
}

type recordingClient struct {
	r    *transportRecorder
	next aws.HTTPClient
}

func (c recordingClient) Do(req *http.Request) (*http.Response, error) {
	c.r.mu.Lock()
	c.r.attempts++
	c.r.mu.Unlock()
	tr := &connTrace{rec: c.r, start: time.Now(), target: req.Header.Get("X-Amz-Target"), reqLen: req.ContentLength}
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), tr.trace()))
	resp, err := c.next.Do(req)
	if err != nil {
		c.r.note("round trip", fmt.Errorf("%w [%s]", err, tr))
		return nil, err
	}
	tr.mu.Lock()
	tr.headers = time.Since(tr.start)
	tr.status = resp.StatusCode
	tr.mu.Unlock()
	resp.Body = &recordingBody{r: c.r, ReadCloser: resp.Body, tr: tr}
	return resp, nil
}

// connTrace records what happened to one attempt's connection.
type connTrace struct {
	rec             *transportRecorder
	mu              sync.Mutex
	start           time.Time
	reused, wasIdle bool
	idle            time.Duration
	wrote           time.Duration
	writeErr        error
	headers         time.Duration
	target          string
	reqLen          int64
	status          int
}

func (c *connTrace) trace() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		GotConn: func(i httptrace.GotConnInfo) {
			c.mu.Lock()
			c.reused, c.wasIdle, c.idle = i.Reused, i.WasIdle, i.IdleTime
			c.mu.Unlock()
		},
		WroteRequest: func(i httptrace.WroteRequestInfo) {
			c.mu.Lock()
			c.wrote, c.writeErr = time.Since(c.start), i.Err
			c.mu.Unlock()
			if i.Err != nil {
				c.rec.note("request write", i.Err)
			}
		},
	}
}

func (c *connTrace) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprintf("%s len=%d reused=%v idle=%v(%s) wrote at %s err=%v; status %d headers at %s, error at %s",
		c.target, c.reqLen, c.reused, c.wasIdle, c.idle, c.wrote, c.writeErr, c.status, c.headers, time.Since(c.start))
}

type recordingBody struct {
	r *transportRecorder
	io.ReadCloser
	noted bool
	tr    *connTrace
}

func (b *recordingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && !errors.Is(err, io.EOF) && !b.noted {
		b.noted = true
		b.r.note("body read", fmt.Errorf("%w [%s]", err, b.tr))
	}
	return n, err
}
