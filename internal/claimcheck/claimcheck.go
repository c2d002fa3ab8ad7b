package claimcheck

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/leasehold/leasehold/internal/lease"
)

// MaxValueBytes is the largest value the blob store takes: 10 MiB, for a
// payload, a result, a step's result or a callback answer alike.
const MaxValueBytes = 10 << 20

// What a value is; each names a part of the key.
const (
	WhatPayload = "payload"
	WhatResult  = "result"
	WhatAnswer  = "answer"
)

// WhatStep names the result of the step with index n (0 the first).
func WhatStep(n int) string { return "step-" + strconv.Itoa(n) }

// ErrNotFound is a Get or a Fetch of a key the store does not hold: the
// object expired with its task, or was deleted.
var ErrNotFound = errors.New("claimcheck: no such value in the blob store")

// ErrNoStore is a reference met where no blob store is configured (a
// client or worker without LEASEHOLD_PAYLOAD_BUCKET reading a task that
// one with it wrote).
var ErrNoStore = errors.New("claimcheck: the value is in the payload bucket, and no bucket is configured (LEASEHOLD_PAYLOAD_BUCKET)")

// ErrReserved is a submitted value that starts as a reference does.
var ErrReserved = errors.New("claimcheck: the value starts with the reserved prefix of a payload-bucket reference")

// Blobs stores values by key. Every call has a timeout of its own (the
// implementation's), within ctx's deadline.
type Blobs interface {
	// Put stores value under key, replacing what is there.
	Put(ctx context.Context, key string, value []byte) error
	// Get reads the value under key; a missing key gives ErrNotFound.
	Get(ctx context.Context, key string) ([]byte, error)
	// Delete removes key; a missing key is no error.
	Delete(ctx context.Context, key string) error
}

// refPrefix starts every reference: a JSON string whose first character is
// NUL, which no reasonable value starts with.
const refPrefix = `"\u0000leasehold-blob:`

// IsRef reports whether v is a reference, with one comparison.
func IsRef(v []byte) bool { return bytes.HasPrefix(v, []byte(refPrefix)) }

// CheckValue refuses a submitted value that would read as a reference.
func CheckValue(v []byte) error {
	if IsRef(v) {
		return ErrReserved
	}
	return nil
}

// Key is where value, the WHAT of task id, is stored.
func Key(id, what string, value []byte) string {
	sum := sha256.Sum256(value)
	return "tasks/" + url.PathEscape(id) + "/" + what + "/" + hex.EncodeToString(sum[:])
}

// TaskPrefix is the prefix of every key of task id's values.
func TaskPrefix(id string) string { return "tasks/" + url.PathEscape(id) + "/" }

// Ref is a parsed reference.
type Ref struct {
	Size int
	Key  string
}

// ParseRef reads a reference; ok is false when v is none.
func ParseRef(v []byte) (Ref, bool) {
	if !IsRef(v) || len(v) < len(refPrefix)+2 || v[len(v)-1] != '"' {
		return Ref{}, false
	}
	size, key, found := strings.Cut(string(v[len(refPrefix):len(v)-1]), ":")
	n, err := strconv.Atoi(size)
	if !found || err != nil || n < 0 || key == "" {
		return Ref{}, false
	}
	return Ref{Size: n, Key: key}, true
}

// RefsIn lists the references v holds: v itself when it is one, and
// those inside a JSON document (the recorded outcomes of children, whose
// results may be references), each once, in order of appearance.
func RefsIn(v []byte) [][]byte {
	var out [][]byte
	for rest := v; ; {
		i := bytes.Index(rest, []byte(refPrefix))
		if i < 0 {
			return out
		}
		rest = rest[i:]
		end := bytes.IndexByte(rest[1:], '"')
		if end < 0 {
			return out
		}
		ref := rest[:end+2]
		rest = rest[end+2:]
		if _, ok := ParseRef(ref); ok && !slices.ContainsFunc(out, func(r []byte) bool { return bytes.Equal(r, ref) }) {
			out = append(out, ref)
		}
	}
}

// encodeRef is the reference to the value of size bytes under key; key is
// path-escaped ASCII, so it needs no JSON escaping.
func encodeRef(size int, key string) []byte {
	return []byte(refPrefix + strconv.Itoa(size) + ":" + key + `"`)
}

// TooLargeError is a value over MaxValueBytes, the limit with a blob store.
type TooLargeError struct {
	What string
	Size int
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s is %d bytes, over the %d-byte limit of the payload bucket", e.What, e.Size, MaxValueBytes)
}

// Checker moves values over their inline limit into Blobs. A nil Checker,
// or one without Blobs, moves nothing: every value stays as it is.
type Checker struct {
	Blobs Blobs
}

// Enabled reports whether values can move: a blob store is configured.
func (c *Checker) Enabled() bool { return c != nil && c.Blobs != nil }

// Limit is the largest value of a kind whose inline limit is inline: the
// blob store's limit when one is configured, else inline.
func (c *Checker) Limit(inline int) int {
	if c.Enabled() {
		return MaxValueBytes
	}
	return inline
}

// Stow returns value as it goes into the item or the message: value itself
// when it is no longer than inline or no blob store is configured (the
// caller's own limit check then applies), else a reference to it after it
// is stored under Key(id, what, value). A value over MaxValueBytes gives a
// *TooLargeError.
func (c *Checker) Stow(ctx context.Context, id, what string, value []byte, inline int) ([]byte, error) {
	if len(value) <= inline || !c.Enabled() {
		return value, nil
	}
	if len(value) > MaxValueBytes {
		return nil, &TooLargeError{What: what, Size: len(value)}
	}
	key := Key(id, what, value)
	if err := c.Blobs.Put(ctx, key, value); err != nil {
		return nil, fmt.Errorf("store %s of task %s in the payload bucket: %w", what, id, err)
	}
	return encodeRef(len(value), key), nil
}

// ErrForeign is a reference to a key outside its task's prefix: a
// reference the task's own writer did not make (say, a hand-written inline
// token naming another task's object), which is never read.
var ErrForeign = errors.New("claimcheck: the reference names a value of another task")

// FetchOwn is Fetch of a value of task id: a reference to a key outside
// TaskPrefix(id) gives ErrForeign without a call, so a forged reference
// cannot make a worker read another task's payload or result.
func (c *Checker) FetchOwn(ctx context.Context, id string, v []byte) ([]byte, error) {
	if !IsRef(v) {
		return v, nil
	}
	if ref, ok := ParseRef(v); ok && !strings.HasPrefix(ref.Key, TaskPrefix(id)) {
		return nil, fmt.Errorf("%w: %s is not under %s", ErrForeign, ref.Key, TaskPrefix(id))
	}
	return c.Fetch(ctx, v)
}

// Fetch returns the value v stands for: v itself when it is no reference
// (no call), else the stored value, checked against the digest its key
// names.
func (c *Checker) Fetch(ctx context.Context, v []byte) ([]byte, error) {
	if !IsRef(v) {
		return v, nil
	}
	ref, ok := ParseRef(v)
	if !ok {
		return nil, fmt.Errorf("claimcheck: malformed reference %.80q", v)
	}
	if !c.Enabled() {
		return nil, ErrNoStore
	}
	value, err := c.Blobs.Get(ctx, ref.Key)
	if err != nil {
		return nil, fmt.Errorf("read %s from the payload bucket: %w", ref.Key, err)
	}
	sum := sha256.Sum256(value)
	if len(value) != ref.Size || !strings.HasSuffix(ref.Key, "/"+hex.EncodeToString(sum[:])) {
		return nil, fmt.Errorf("claimcheck: %s holds %d bytes that do not match its reference (%d bytes)", ref.Key, len(value), ref.Size)
	}
	return value, nil
}

// StowAnswer keeps the answer of a callback wait that succeeds in the blob
// store when it is over the inline limit of its kind: lease.MaxResultBytes
// for a wait whose answer ends the task, lease.MaxCallbackAnswerBytes for a
// resumable one (its answer becomes a step). e.Result then holds the
// reference. An answer within its limit, a failure, or a Checker without a
// store is left as it is (the store's own check then applies).
func (c *Checker) StowAnswer(ctx context.Context, e *lease.WaitEnd) error {
	limit := lease.MaxResultBytes
	if e.ResumeStep() != "" {
		limit = lease.MaxCallbackAnswerBytes
	}
	if e.Status != lease.StatusSucceeded || len(e.Result) <= limit || !c.Enabled() {
		return nil
	}
	if err := lease.CheckID(e.ID); err != nil {
		return err
	}
	ref, err := c.Stow(ctx, e.ID, WhatAnswer, e.Result, limit)
	var tl *TooLargeError
	if errors.As(err, &tl) {
		return &lease.TooLargeError{What: "callback result", Size: tl.Size, Limit: MaxValueBytes}
	}
	if err != nil {
		return err
	}
	e.Result = ref
	return nil
}
