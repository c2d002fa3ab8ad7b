// Package token encodes and decodes dispatch tokens: the versioned JSON bodies
// of the messages on the work queue.
//
// A token comes in two forms. A reference names a task already stored:
//
//	{"v":1,"id":"order-42"}
//
// An inline token carries the task itself, so that a plain SQS SendMessage
// enqueues work; the worker creates and claims it in one write:
//
//	{"v":1,"kind":"resize","payload":{"w":64},"id":"optional","max_attempts":3,"queue":"images"}
//
// An inline token's "queue" names the SQS queue the task's later tokens
// (retries, snoozes, sweeps) go to. Without it the worker records the queue
// the token arrived on.
//
// An inline token with "create_token" was sent by a client that stores the
// same task right after sending it (the Go client does, so that no crash
// between the two leaves a stored task without a message): the worker claims
// the task first and creates it, under that create token, only when it is not
// stored yet.
//
// Unknown fields are rejected so that a misspelt field fails loudly instead of
// being ignored.
package token

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/metadata"
	"github.com/leasehold/leasehold/internal/queues"
)

// Version is the only token version this build understands.
const Version = 1

// MaxBodyBytes bounds a body this package will parse at all. A body under it
// whose payload is over lease.MaxPayloadBytes still decodes far enough to name
// its task, so the task can be recorded as failed with the reason.
const MaxBodyBytes = 1 << 20

// Reasons a body is not a usable token. Each decode failure is an *Error
// matching exactly one of these.
var (
	ErrMalformed     = errors.New("malformed token")
	ErrVersion       = errors.New("unsupported token version")
	ErrMissingField  = errors.New("missing field")
	ErrInvalidField  = errors.New("invalid field")
	ErrPayloadTooBig = errors.New("payload too large")
)

// Error says why a body could not be used, in words fit for a record.
type Error struct {
	Reason error  // one of the sentinels above
	Detail string // human-readable detail, never the payload itself
}

func (e *Error) Error() string { return e.Reason.Error() + ": " + e.Detail }

func (e *Error) Unwrap() error { return e.Reason }

// Token is a decoded dispatch token.
type Token struct {
	Version     int
	ID          string          // task id; empty on an inline token that lets the message id name the task
	Kind        string          // set only on an inline token
	Payload     json.RawMessage // inline only; nil when absent
	MaxAttempts int             // inline only; 0 means the worker's default
	Queue       string          // inline only; "" means the queue the token arrived on
	// CreateToken (inline only, with ID): the sender stores the task too,
	// under this create token; claim first, create only if it is missing.
	CreateToken string
	// Parent (inline only, with ID): the task is a child of that task,
	// spawned by its handler; it notifies the parent when it ends.
	Parent string
	// After (inline only, with ID): the task waits until these tasks have
	// SUCCEEDED (or, with AfterAny, ended).
	// (AfterAny is declared beside the other flags, below, so that the
	// flags share a word.)
	After []string
	// WaitTimeout (with After; whole seconds on the wire) is the deadline
	// of the wait for After, from the task's creation; 0 takes the
	// worker's default.
	WaitTimeout time.Duration
	// Callback is a callback token (callback form only: no id, no kind):
	// the message completes the waiting task with Result, or fails it with
	// Error.
	Callback string
	Result   json.RawMessage
	Error    string
	HasError bool
	AfterAny bool
	// Heartbeat (callback form only; "heartbeat" on the wire, in place of
	// "callback", with no "result" or "error") makes the message a
	// heartbeat of the wait Callback names: it keeps a wait with a
	// heartbeat timeout alive and ends nothing.
	Heartbeat bool
	// Wake (reference only): the task was WAITING and its wait is over:
	// the worker reads it and resumes and claims it in one write.
	Wake bool
	// Then (inline only, with ID): the chain's links after this task; the
	// first runs once it has SUCCEEDED (lease.Link).
	Then []lease.Link
	// Prev (inline only, with ID): the chain link before this task, which
	// has SUCCEEDED.
	Prev string
	// Metadata (any form; optional; "md" on the wire) is the task's
	// metadata as the sender passes it on (package metadata): stored on
	// the task an inline token creates, handed to middleware, and inherited
	// by the children and chain links the task sends. A tracer's W3C trace
	// context is two of its entries. It steers nothing in the executor.
	// (A token of a version before metadata carries the trace context as
	// "tp" and "ts"; Decode reads them into Metadata.)
	Metadata map[string]string
	// To is the message form (no id, no kind, no callback): Payload is
	// sent to a workflow's inbox, as Client.SendOnce sends it. Nil for
	// every other form (a pointer keeps the executor's record in its size
	// class).
	To *ToWorkflow
}

// IsCallback reports whether the token is the callback form.
func (t Token) IsCallback() bool { return t.Callback != "" }

// Inline reports whether the token carries the task itself.
func (t Token) Inline() bool { return t.Kind != "" }

type wire struct {
	V           *int              `json:"v"`
	ID          string            `json:"id,omitempty"`
	Kind        string            `json:"kind,omitempty"`
	Payload     json.RawMessage   `json:"payload,omitempty"`
	MaxAttempts int               `json:"max_attempts,omitempty"`
	Queue       *string           `json:"queue,omitempty"`
	CreateToken string            `json:"create_token,omitempty"`
	Parent      string            `json:"parent,omitempty"`
	After       []string          `json:"after,omitempty"`
	AfterAny    bool              `json:"after_any,omitempty"`
	WaitTimeout int64             `json:"wait_timeout_seconds,omitempty"`
	Callback    string            `json:"callback,omitempty"`
	Heartbeat   string            `json:"heartbeat,omitempty"`
	Result      json.RawMessage   `json:"result,omitempty"`
	Error       *string           `json:"error,omitempty"`
	Wake        bool              `json:"wake,omitempty"`
	Send        string            `json:"send,omitempty"`
	Topic       string            `json:"topic,omitempty"`
	MessageID   string            `json:"message_id,omitempty"`
	Then        []lease.Link      `json:"then,omitempty"`
	Prev        string            `json:"prev,omitempty"`
	Metadata    map[string]string `json:"md,omitempty"`
	// Read, never written: the trace context of a token sent by a version
	// before metadata (Token.Metadata). Remove at 1.0.
	LegacyTraceParent string `json:"tp,omitempty"`
	LegacyTraceState  string `json:"ts,omitempty"`
}

// Decode parses and validates a message body. When the envelope is sound but
// the payload is over the limit, it returns the token without its payload
// together with an error matching ErrPayloadTooBig, so the caller can record
// the failure on the task the token names.
func Decode(body string) (Token, error) {
	if len(body) > MaxBodyBytes {
		return Token{}, &Error{Reason: ErrPayloadTooBig, Detail: fmt.Sprintf("message body is %d bytes, the limit is %d", len(body), MaxBodyBytes)}
	}
	if !utf8.ValidString(body) {
		return Token{}, &Error{Reason: ErrMalformed, Detail: "body is not valid UTF-8"}
	}
	f, ok := scanFields(body)
	if !ok {
		var err error
		if f, err = decodeJSON(body); err != nil {
			return Token{}, err
		}
	}
	if !f.hasV {
		return Token{}, &Error{Reason: ErrMissingField, Detail: `"v" (the token version) is required`}
	}
	if f.v != Version {
		return Token{}, &Error{Reason: ErrVersion, Detail: fmt.Sprintf("version %d; this worker understands version %d", f.v, Version)}
	}
	t := Token{Version: f.v, ID: f.id, Kind: f.kind, MaxAttempts: f.maxAttempts, Payload: f.payload, CreateToken: f.createToken,
		Parent: f.parent, After: f.after, AfterAny: f.afterAny, WaitTimeout: time.Duration(f.waitTimeout) * time.Second, Callback: f.callback, Result: f.result, Wake: f.wake,
		Then: f.then, Prev: f.prev, Metadata: f.metadata}
	if f.send != "" || f.topic != "" || f.messageID != "" {
		t.To = &ToWorkflow{Workflow: f.send, Topic: f.topic, MessageID: f.messageID}
	}
	if f.tp != "" || f.ts != "" {
		t.Metadata = legacyTrace(t.Metadata, f.tp, f.ts)
	}
	if f.errMsg != nil {
		t.Error, t.HasError = *f.errMsg, true
	}
	if f.heartbeat != "" {
		if t.Callback != "" || t.Result != nil || t.HasError {
			return Token{}, &Error{Reason: ErrInvalidField, Detail: `a heartbeat message has only "v" and "heartbeat"`}
		}
		t.Callback, t.Heartbeat = f.heartbeat, true
	}
	if f.hasQueue {
		if err := checkQueue(f.queue); err != nil {
			return Token{}, err
		}
		t.Queue = f.queue
	}
	if err := t.validate(); err != nil {
		if errors.Is(err, ErrPayloadTooBig) {
			t.Payload = nil
			return t, err
		}
		return Token{}, err
	}
	return t, nil
}

// decodeJSON reads any body with encoding/json, strictly: unknown fields and
// trailing data are refused.
func decodeJSON(body string) (fields, error) {
	var w wire
	if err := decodeStrict(body, &w); err != nil {
		return fields{}, err
	}
	f := fields{id: w.ID, kind: w.Kind, maxAttempts: w.MaxAttempts, createToken: w.CreateToken,
		parent: w.Parent, after: w.After, afterAny: w.AfterAny, waitTimeout: w.WaitTimeout, callback: w.Callback, heartbeat: w.Heartbeat, result: w.Result, errMsg: w.Error, wake: w.Wake,
		then: w.Then, prev: w.Prev, metadata: w.Metadata, tp: w.LegacyTraceParent, ts: w.LegacyTraceState,
		send: w.Send, topic: w.Topic, messageID: w.MessageID}
	if w.V != nil {
		f.v, f.hasV = *w.V, true
	}
	if w.Queue != nil {
		f.queue, f.hasQueue = *w.Queue, true
	}
	if len(w.Payload) > 0 && !bytes.Equal(w.Payload, []byte("null")) {
		f.payload = w.Payload
	}
	return f, nil
}

func (t Token) validate() error {
	if t.ID != "" {
		if err := checkID(t.ID); err != nil {
			return err
		}
	}
	if t.IsMessage() {
		return t.validateMessage()
	}
	if err := t.validateWorkflow(); err != nil {
		return err
	}
	if p := metadata.Problem(t.Metadata); p != "" {
		return &Error{Reason: ErrInvalidField, Detail: `"md" (metadata) ` + p}
	}
	if t.IsCallback() {
		return nil
	}
	if !t.Inline() {
		switch {
		case t.ID == "":
			return &Error{Reason: ErrMissingField, Detail: `a token needs "id" (a reference to a stored task) or "kind" (an inline task)`}
		case t.Payload != nil || t.MaxAttempts != 0 || t.Queue != "" || t.CreateToken != "" || t.Parent != "" || len(t.After) > 0 || t.AfterAny ||
			len(t.Then) > 0 || t.Prev != "":
			return &Error{Reason: ErrMissingField, Detail: `"payload", "max_attempts", "queue", "create_token", "parent", "after", "after_any", "then" and "prev" need "kind"`}
		}
		return nil
	}
	switch {
	case len(t.Kind) > lease.MaxKindBytes:
		return &Error{Reason: ErrInvalidField, Detail: fmt.Sprintf(`"kind" is %d bytes, the limit is %d`, len(t.Kind), lease.MaxKindBytes)}
	case t.MaxAttempts < 0 || t.MaxAttempts > lease.MaxAttemptsLimit:
		return &Error{Reason: ErrInvalidField, Detail: fmt.Sprintf(`"max_attempts" %d is outside 1..%d`, t.MaxAttempts, lease.MaxAttemptsLimit)}
	case len(t.Payload) > lease.MaxPayloadBytes:
		return &Error{Reason: ErrPayloadTooBig, Detail: fmt.Sprintf("payload is %d bytes, the limit is %d", len(t.Payload), lease.MaxPayloadBytes)}
	case t.CreateToken != "" && t.ID == "":
		return &Error{Reason: ErrMissingField, Detail: `"create_token" needs "id"`}
	case len(t.CreateToken) > lease.MaxCreateTokenBytes || !printableASCII(t.CreateToken):
		return &Error{Reason: ErrInvalidField, Detail: fmt.Sprintf(`"create_token" must be at most %d printable ASCII characters`, lease.MaxCreateTokenBytes)}
	}
	return nil
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// checkQueue checks a "queue" field that is present: a standard SQS queue
// name (queues.CheckName).
func checkQueue(name string) error {
	if err := queues.CheckName(name); err != nil {
		return &Error{Reason: ErrInvalidField, Detail: `"queue": ` + err.Error()}
	}
	return nil
}

// checkID applies lease.CheckID to a non-empty "id" field.
func checkID(id string) error {
	if p := lease.IDProblem(id); p != "" {
		return &Error{Reason: ErrInvalidField, Detail: `"id" ` + p}
	}
	return nil
}

// decodeStrict decodes the JSON body into v with encoding/json, refusing
// unknown fields and trailing data. Its errors are *Error (ErrMalformed).
func decodeStrict(body string, v any) error {
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if lease.JSONProblem([]byte(body)) == lease.TooDeep {
			return &Error{Reason: ErrMalformed, Detail: "the body " + lease.TooDeep}
		}
		return &Error{Reason: ErrMalformed, Detail: describeJSONError(err)}
	}
	if _, err := dec.Token(); err != io.EOF {
		return &Error{Reason: ErrMalformed, Detail: "trailing data after the JSON object"}
	}
	return nil
}

// describeJSONError names what is wrong without echoing the body.
func describeJSONError(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("invalid JSON at byte %d", syn.Offset)
	case errors.As(err, &typ):
		// Name JSON types, never the Go types the body decodes into.
		if typ.Field == "" {
			return fmt.Sprintf("the body must be a JSON object, not %s", jsonValueName(typ.Value))
		}
		return fmt.Sprintf("field %q must be %s, not %s", typ.Field, jsonTypeName(typ.Type), jsonValueName(typ.Value))
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "empty or truncated JSON"
	}
	// Unknown-field errors from the decoder name the field, never values.
	return err.Error()
}

// jsonTypeName names the JSON type that decodes into t.
func jsonTypeName(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return "JSON" // json.RawMessage: any value
		}
		return "an array"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "another type"
}

// jsonValueName names the JSON value the decoder found, as
// UnmarshalTypeError.Value describes it ("string", "number 1.5", "array"...).
func jsonValueName(v string) string {
	kind, _, _ := strings.Cut(v, " ")
	switch kind {
	case "object", "array":
		return "an " + kind
	case "string", "number":
		return "a " + kind
	case "bool":
		return "true or false"
	}
	if kind == "" {
		return "this value"
	}
	return kind
}

// Wake encodes a reference token that wakes task id, whose wait is over.
func Wake(id string) string { return WakeWith(id, nil) }

// Ref encodes a reference token for a stored task.
func Ref(id string) string {
	var buf [128]byte
	return string(appendWire(buf[:0], id, "", nil, 0, "", ""))
}

// Inline encodes an inline token. payload must be valid JSON or nil.
func Inline(kind, id string, payload json.RawMessage, maxAttempts int) (string, error) {
	return Token{Version: Version, Kind: kind, ID: id, Payload: payload, MaxAttempts: maxAttempts}.Encode()
}

// Encode encodes an inline token (Kind set); Version is always this
// package's. Payload must be valid JSON or nil.
func (t Token) Encode() (string, error) {
	t.Version = Version
	kind, id, payload, maxAttempts := t.Kind, t.ID, t.Payload, t.MaxAttempts
	if kind == "" {
		return "", &Error{Reason: ErrMissingField, Detail: `"kind" is required`}
	}
	if err := t.validate(); err != nil {
		return "", err
	}
	if payload != nil {
		if p := lease.JSONProblem(payload); p != "" {
			return "", &Error{Reason: ErrMalformed, Detail: "payload " + p}
		}
	}
	if t.Queue != "" {
		if err := checkQueue(t.Queue); err != nil {
			return "", err
		}
	}
	if t.Parent != "" || len(t.After) > 0 || t.AfterAny || len(t.Then) > 0 || t.Prev != "" || len(t.Metadata) > 0 {
		// Workflow tokens, and tokens with metadata, go through
		// encoding/json, which writes the map's keys sorted. (Its own
		// version variable: &t.Version would move all of t to the heap on
		// every call.)
		v := Version
		b, err := json.Marshal(wire{V: &v, ID: id, Kind: kind, Payload: payload, MaxAttempts: maxAttempts,
			Queue: nonEmpty(t.Queue), CreateToken: t.CreateToken, Parent: t.Parent, After: t.After, AfterAny: t.AfterAny,
			WaitTimeout: int64((t.WaitTimeout + time.Second - 1) / time.Second), Then: t.Then, Prev: t.Prev,
			Metadata: t.Metadata})
		if err != nil {
			return "", &Error{Reason: ErrMalformed, Detail: err.Error()}
		}
		return string(b), nil
	}
	var buf [256]byte
	return string(appendWire(buf[:0], id, kind, payload, maxAttempts, t.Queue, t.CreateToken)), nil
}

// legacyTrace returns md with the trace context of a token sent by a
// version before metadata ("tp" and "ts"), unless md has its own.
func legacyTrace(md map[string]string, tp, ts string) map[string]string {
	if _, ok := md[metadata.TraceParent]; ok || tp == "" {
		return md
	}
	md = metadata.With(md, metadata.TraceParent, tp)
	return metadata.With(md, metadata.TraceState, ts)
}

// RefWith encodes a reference token for a stored task carrying md (Ref
// when md is empty). md must be within the metadata bounds (a task's
// stored metadata is).
func RefWith(id string, md map[string]string) string {
	if len(md) == 0 {
		return Ref(id)
	}
	v := Version
	b, _ := json.Marshal(wire{V: &v, ID: id, Metadata: md}) // (strings always encode)
	return string(b)
}

// WakeWith is Wake carrying md.
func WakeWith(id string, md map[string]string) string {
	v := Version
	b, _ := json.Marshal(wire{V: &v, ID: id, Wake: true, Metadata: md})
	return string(b)
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
