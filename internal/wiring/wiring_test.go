package wiring

import (
	"context"
	"slices"
	"testing"

	"github.com/leasehold/leasehold/internal/lease"
)

// A kind registers once; Lookup finds it, and LifecycleConfig's handlers
// run it through the middleware, the first outermost.
func TestRegisterLookupAndMiddlewareOrder(t *testing.T) {
	hs := NewHandlers()
	h := func(context.Context, lease.Task) ([]byte, error) { return []byte(`1`), nil }
	if !Register(hs, "k", h) || Register(hs, "k", h) {
		t.Fatal("Register: want the first registration taken and the second refused")
	}
	if _, ok := Lookup(hs, "k"); !ok {
		t.Fatal("Lookup does not find the registered kind")
	}
	if _, ok := Lookup(hs, "other"); ok {
		t.Fatal("Lookup finds a kind never registered")
	}
	var order []string
	mw := func(name string) Middleware {
		return func(ctx context.Context, r HandlerRun, next func(context.Context) ([]byte, error)) ([]byte, error) {
			order = append(order, name+" "+r.Kind)
			return next(ctx)
		}
	}
	lc := LifecycleConfig(WorkerConfig{Handlers: hs, Middleware: []Middleware{mw("outer"), mw("inner")}})
	run, ok := lc.Handlers("k")
	if !ok {
		t.Fatal("the executor's handlers do not find the kind")
	}
	if out, err := run(t.Context(), lease.Task{ID: "t", Kind: "k"}); err != nil || string(out) != "1" {
		t.Fatalf("run: %s, %v", out, err)
	}
	if want := []string{"outer k", "inner k"}; !slices.Equal(order, want) {
		t.Errorf("middleware ran %q, want %q", order, want)
	}
	if lc.Owner == "" || lc.Logger == nil {
		t.Errorf("LifecycleConfig left the owner (%q) or the logger unset", lc.Owner)
	}
}

// A backend set on a config is the one read back; a config without one
// has none.
func TestClientBackend(t *testing.T) {
	var cfg ClientConfig[func()]
	if _, ok := ClientBackendOf(cfg); ok {
		t.Fatal("a zero config has a backend")
	}
	SetClientBackend(&cfg, ClientBackend{})
	if _, ok := ClientBackendOf(cfg); !ok {
		t.Fatal("the backend set is not read back")
	}
}
