package chaos

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestProxyFaults(t *testing.T) {
	var hits atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Echo", r.Header.Get("X-Amz-Target"))
		w.WriteHeader(http.StatusTeapot)
		_, _ = w.Write(append([]byte("echo:"), b...))
	}))
	defer up.Close()

	for _, tc := range []struct {
		name      string
		faults    Faults
		wantErr   bool
		wantHits  int64
		wantDrops bool
	}{
		{"pass through", Faults{Delay: 1, MaxDelay: 20 * time.Millisecond}, false, 1, false},
		{"reset before", Faults{ResetBefore: 1}, true, 0, false},
		{"reset after", Faults{ResetAfter: 1}, true, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hits.Store(0)
			var mu sync.Mutex
			var seen []Exchange
			px, err := StartProxy(up.URL, tc.faults, 1, func(ex Exchange) {
				mu.Lock()
				defer mu.Unlock()
				seen = append(seen, ex)
			})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := px.Close(5 * time.Second); err != nil {
					t.Error(err)
				}
			}()
			client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil}}
			defer client.CloseIdleConnections()
			req, _ := http.NewRequest(http.MethodPost, px.URL()+"/q?x=1", strings.NewReader("hello"))
			req.Header.Set("X-Amz-Target", "Svc.Op")
			resp, err := client.Do(req)
			if tc.wantErr {
				if err == nil {
					resp.Body.Close()
					t.Fatalf("got status %d, want a connection error", resp.StatusCode)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusTeapot || string(b) != "echo:hello" || resp.Header.Get("X-Echo") != "Svc.Op" {
					t.Errorf("got %d %q %v", resp.StatusCode, b, resp.Header)
				}
			}
			if hits.Load() != tc.wantHits {
				t.Errorf("upstream hits = %d, want %d", hits.Load(), tc.wantHits)
			}
			mu.Lock()
			defer mu.Unlock()
			if int64(len(seen)) != tc.wantHits {
				t.Fatalf("observed %d exchanges, want %d", len(seen), tc.wantHits)
			}
			if len(seen) == 1 {
				ex := seen[0]
				if ex.Dropped != tc.wantDrops || ex.Status != http.StatusTeapot || string(ex.Request) != "hello" ||
					string(ex.Response) != "echo:hello" || ex.Target != "Svc.Op" || ex.Answered.Before(ex.Forwarded) {
					t.Errorf("exchange = %+v", ex)
				}
			}
			st := px.Stats()
			if st.Requests != 1 || (st.ResetsBefore == 1) != (tc.faults.ResetBefore == 1) || (st.ResetsAfter == 1) != tc.wantDrops {
				t.Errorf("stats = %+v", st)
			}
		})
	}
}

func TestProxyRejectsNonLocalUpstream(t *testing.T) {
	if _, err := StartProxy("http://example.com:80", Faults{}, 1, nil); err == nil {
		t.Error("a non-local upstream was accepted")
	}
	if _, err := StartProxy("http://127.0.0.1:1", Faults{ResetBefore: 2}, 1, nil); err == nil {
		t.Error("a fault rate over 1 was accepted")
	}
}

func TestLedgerReadsWrites(t *testing.T) {
	l := NewLedger("tasks")
	now := time.Now()
	l.Observe(Exchange{Target: "DynamoDB_20120810.PutItem", Status: 200, Forwarded: now, Answered: now,
		Request: []byte(`{"TableName":"tasks","Item":{"id":{"S":"a"},"status":{"S":"RUNNING"},"fence":{"N":"1"},"attempt":{"N":"1"},"lease_owner":{"S":"w/m"},"lease_until":{"N":"1700000000000"}}}`)})
	l.Observe(Exchange{Target: "DynamoDB_20120810.UpdateItem", Status: 200, Dropped: true,
		Request:  []byte(`{"TableName":"tasks","Key":{"id":{"S":"a"}}}`),
		Response: []byte(`{"Attributes":{"id":{"S":"a"},"status":{"S":"SUCCEEDED"},"fence":{"N":"1"},"attempt":{"N":"1"},"cancel_requested":{"BOOL":true},"steps":{"L":[{"M":{"name":{"S":"s0"},"result":{"S":"{}"}}},{"M":{"name":{"S":"s1"},"result":{"S":"{}"}}}]}}}`)})
	l.Observe(Exchange{Target: "DynamoDB_20120810.UpdateItem", Status: 400, Request: []byte(`{"TableName":"tasks"}`)})
	l.Observe(Exchange{Target: "DynamoDB_20120810.UpdateItem", Status: 200, Request: []byte(`{"TableName":"other"}`)})
	l.Observe(Exchange{Target: "DynamoDB_20120810.GetItem", Status: 200, Request: []byte(`{"TableName":"tasks"}`)})
	ws, rejected, unknown := l.Writes()
	if len(ws) != 2 || rejected != 1 || unknown != 0 {
		t.Fatalf("writes %+v, rejected %d, unknown %d", ws, rejected, unknown)
	}
	if w := ws[0]; w.Task != "a" || w.Status != "RUNNING" || w.Fence != 1 || w.Owner != "w/m" || w.LeaseUntil.UnixMilli() != 1700000000000 {
		t.Errorf("put = %+v", w)
	}
	if w := ws[1]; w.Status != "SUCCEEDED" || !w.Dropped || !w.LeaseUntil.IsZero() || strings.Join(w.Steps, ",") != "s0,s1" || !w.CancelRequested {
		t.Errorf("update = %+v", w)
	}
}

func TestLedgerReadsMessages(t *testing.T) {
	l := NewLedger("tasks")
	ua := "aws-sdk-go-v2/1.0 os/linux app/w2g3"
	l.Observe(Exchange{Target: "AmazonSQS.ReceiveMessage", Status: 200, UserAgent: ua,
		Response: []byte(`{"Messages":[{"MessageId":"m1","ReceiptHandle":"h1","Body":"{\"v\":1,\"id\":\"a\"}","Attributes":{"ApproximateReceiveCount":"3"}},{"MessageId":"m2","ReceiptHandle":"h2","Body":"not json"}]}`)})
	l.Observe(Exchange{Target: "AmazonSQS.DeleteMessageBatch", Status: 200, UserAgent: ua,
		Request:  []byte(`{"QueueUrl":"q","Entries":[{"Id":"0","ReceiptHandle":"h1"},{"Id":"1","ReceiptHandle":"h2"}]}`),
		Response: []byte(`{"Successful":[{"Id":"0"}],"Failed":[{"Id":"1","Code":"ReceiptHandleIsInvalid"}]}`)})
	l.Observe(Exchange{Target: "AmazonSQS.DeleteMessage", Status: 200, UserAgent: "x",
		Request: []byte(`{"QueueUrl":"q","ReceiptHandle":"h9"}`)})
	ds, dels := l.Messages()
	if len(ds) != 2 || ds[0].Task != "a" || ds[0].ReceiveCount != 3 || ds[0].Worker != "w2g3" || ds[1].Task != "" {
		t.Errorf("deliveries = %+v", ds)
	}
	if len(dels) != 2 || dels[0].ReceiptHandle != "h1" || dels[0].Worker != "w2g3" || dels[1].ReceiptHandle != "h9" {
		t.Errorf("deletions = %+v", dels)
	}
}
