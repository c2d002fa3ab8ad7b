package otelenv

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/leasehold/leasehold"
)

func TestFromEnv(t *testing.T) {
	t.Setenv("OTEL_TRACES_EXPORTER", "")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	if tp, err := FromEnv(t.Context()); tp != nil || err != nil {
		t.Fatalf("FromEnv with nothing set = %v, %v", tp, err)
	}
	t.Setenv("OTEL_TRACES_EXPORTER", "zipkin")
	if _, err := FromEnv(t.Context()); err == nil {
		t.Error("FromEnv accepted an exporter it does not have")
	}
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1") // nothing is exported in this test
	tp, err := FromEnv(t.Context())
	if err != nil || tp == nil {
		t.Fatalf("FromEnv = %v, %v", tp, err)
	}
	if err := tp.Shutdown(t.Context()); err != nil {
		t.Logf("shutdown: %v", err)
	}
}

func TestWorkerAndClient(t *testing.T) {
	t.Parallel()
	tp := sdktrace.NewTracerProvider()
	var w leasehold.WorkerConfig
	Worker(&w, tp)
	if w.TracerProvider != tp || len(w.AWS.APIOptions) == 0 {
		t.Errorf("Worker: provider %v, %d API options", w.TracerProvider, len(w.AWS.APIOptions))
	}
	var c leasehold.ClientConfig
	Client(&c, nil)
	if c.TracerProvider != nil || len(c.AWS.APIOptions) != 0 {
		t.Error("Client with a nil provider changed the configuration")
	}
}

// The provider FromEnv builds exports to the OTLP/HTTP endpoint the
// environment names.
func TestFromEnvExports(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.Method+" "+r.URL.Path+" "+r.Header.Get("Content-Type"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	t.Setenv("OTEL_TRACES_EXPORTER", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	t.Setenv("OTEL_SERVICE_NAME", "leasehold-test")
	tp, err := FromEnv(t.Context())
	if err != nil || tp == nil {
		t.Fatalf("FromEnv = %v, %v", tp, err)
	}
	_, span := tp.Tracer("test").Start(t.Context(), "one")
	span.End()
	if err := tp.ForceFlush(t.Context()); err != nil {
		t.Fatalf("ForceFlush: %v", err)
	}
	if err := tp.Shutdown(t.Context()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(paths) == 0 || paths[0] != "POST /v1/traces application/x-protobuf" {
		t.Errorf("the collector got %q, want a POST of spans to /v1/traces", paths)
	}
}
