package claimcheck_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/internal/claimcheck"
	"github.com/leasehold/leasehold/settings"
)

// testBlobs is the conformance suite every Blobs passes.
func testBlobs(t *testing.T, b claimcheck.Blobs) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), awstest.Scale(time.Minute))
	defer cancel()
	id := "conformance/" + rand.Text() // a '/' in an id is escaped in the key
	big := bytes.Repeat([]byte("x"), 2<<20)

	key := claimcheck.Key(id, claimcheck.WhatPayload, big)
	if _, err := b.Get(ctx, key); !errors.Is(err, claimcheck.ErrNotFound) {
		t.Fatalf("Get of a missing key: %v, want ErrNotFound", err)
	}
	if err := b.Put(ctx, key, big); err != nil {
		t.Fatal(err)
	}
	if err := b.Put(ctx, key, big); err != nil { // a retried write
		t.Fatalf("second Put of the same key: %v", err)
	}
	got, err := b.Get(ctx, key)
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("Get: %d bytes, %v; want the %d bytes put", len(got), err, len(big))
	}
	if err := b.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(ctx, key); err != nil {
		t.Fatalf("Delete of a deleted key: %v", err)
	}
	if _, err := b.Get(ctx, key); !errors.Is(err, claimcheck.ErrNotFound) {
		t.Fatalf("Get after Delete: %v, want ErrNotFound", err)
	}

	// Through a Checker: stowed, referenced, fetched.
	c := &claimcheck.Checker{Blobs: b}
	value := append(append([]byte(`"`), bytes.Repeat([]byte("y"), 300<<10)...), '"')
	ref, err := c.Stow(ctx, id, claimcheck.WhatResult, value, 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	if !claimcheck.IsRef(ref) || len(ref) > 1024 || !json.Valid(ref) {
		t.Fatalf("Stow gave %q, want a short JSON reference", ref)
	}
	again, err := c.Stow(ctx, id, claimcheck.WhatResult, value, 64<<10)
	if err != nil || !bytes.Equal(again, ref) {
		t.Fatalf("Stow of the same value again: %q, %v; want the same reference", again, err)
	}
	back, err := c.Fetch(ctx, ref)
	if err != nil || !bytes.Equal(back, value) {
		t.Fatalf("Fetch: %d bytes, %v", len(back), err)
	}
	r, _ := claimcheck.ParseRef(ref)
	if !strings.HasPrefix(r.Key, claimcheck.TaskPrefix(id)) {
		t.Fatalf("key %s is not under the task's prefix %s", r.Key, claimcheck.TaskPrefix(id))
	}
	_ = b.Delete(ctx, r.Key)
}

func TestMemoryBlobs(t *testing.T) {
	t.Parallel()
	testBlobs(t, claimcheck.NewMemory())
}

// TestS3Blobs runs the suite against the stack's payload bucket.
func TestS3Blobs(t *testing.T) {
	t.Parallel()
	cfg := awstest.Config(t)
	bucket := os.Getenv(settings.EnvPayloadBucket)
	if bucket == "" {
		if os.Getenv("LEASEHOLD_REQUIRE_STACK") == "1" {
			t.Fatal(settings.EnvPayloadBucket + " is unset: the stack has no payload bucket (scripts/stack.sh env prints it) [LEASEHOLD_REQUIRE_STACK=1]")
		}
		t.Skip(settings.EnvPayloadBucket + " is unset: no payload bucket to test against (make test sets it)")
	}
	testBlobs(t, &claimcheck.S3{Client: claimcheck.NewS3Client(cfg, ""), Bucket: bucket})
}

func TestSmallValuesMakeNoCall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := claimcheck.NewMemory()
	c := &claimcheck.Checker{Blobs: m}
	small := []byte(`{"a":1}`)
	got, err := c.Stow(ctx, "t", claimcheck.WhatPayload, small, len(small))
	if err != nil || &got[0] != &small[0] {
		t.Fatalf("Stow of a value at its limit: %q, %v; want it untouched", got, err)
	}
	got, err = c.Fetch(ctx, small)
	if err != nil || &got[0] != &small[0] {
		t.Fatalf("Fetch of a value: %q, %v; want it untouched", got, err)
	}
	if n := m.Calls(); n != 0 {
		t.Fatalf("%d calls to the blob store for a small value, want 0", n)
	}
}

func TestWithoutBlobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var c *claimcheck.Checker
	big := bytes.Repeat([]byte("1"), 100)
	if got, err := c.Stow(ctx, "t", claimcheck.WhatPayload, big, 10); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("Stow without a store: %q, %v; want the value, for the caller's limit check", got, err)
	}
	if c.Limit(10) != 10 {
		t.Fatalf("Limit without a store: %d, want the inline limit", c.Limit(10))
	}
	ref := []byte(`"\u0000leasehold-blob:100:tasks/t/payload/abc"`)
	if _, err := c.Fetch(ctx, ref); !errors.Is(err, claimcheck.ErrNoStore) {
		t.Fatalf("Fetch of a reference without a store: %v, want ErrNoStore", err)
	}
}

func TestTooLargeAndTampered(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := claimcheck.NewMemory()
	c := &claimcheck.Checker{Blobs: m}
	var tl *claimcheck.TooLargeError
	if _, err := c.Stow(ctx, "t", claimcheck.WhatPayload, make([]byte, claimcheck.MaxValueBytes+1), 10); !errors.As(err, &tl) {
		t.Fatalf("Stow over 10 MiB: %v, want *TooLargeError", err)
	}
	ref, err := c.Stow(ctx, "t", claimcheck.WhatPayload, []byte(`"0123456789"`), 4)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := claimcheck.ParseRef(ref)
	_ = m.Put(ctx, r.Key, []byte(`"9876543210"`))
	if _, err := c.Fetch(ctx, ref); err == nil {
		t.Fatal("Fetch of an object whose bytes differ from its digest succeeded")
	}
	if err := claimcheck.CheckValue(ref); !errors.Is(err, claimcheck.ErrReserved) {
		t.Fatalf("CheckValue of a reference: %v, want ErrReserved", err)
	}
}

// A reference is read only for the task whose prefix its key is under: an
// inline token that names another task's object reads nothing.
func TestFetchOwnRefusesAnotherTasksValue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := claimcheck.NewMemory()
	c := &claimcheck.Checker{Blobs: m}
	value := []byte(`"0123456789"`)
	ref, err := c.Stow(ctx, "victim", claimcheck.WhatPayload, value, 4)
	if err != nil {
		t.Fatal(err)
	}
	calls := m.Calls()
	for _, other := range []string{"victim2", "vict", "other"} {
		if _, err := c.FetchOwn(ctx, other, ref); !errors.Is(err, claimcheck.ErrForeign) {
			t.Fatalf("FetchOwn by %s of victim's reference: %v, want ErrForeign", other, err)
		}
	}
	if n := m.Calls() - calls; n != 0 {
		t.Fatalf("%d calls to the blob store for foreign references, want 0", n)
	}
	if got, err := c.FetchOwn(ctx, "victim", ref); err != nil || !bytes.Equal(got, value) {
		t.Fatalf("FetchOwn by its own task: %q, %v", got, err)
	}
}
