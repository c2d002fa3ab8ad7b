// Package otelenv configures leasehold's OpenTelemetry tracing from the
// standard OTEL_* environment: FromEnv builds a tracer provider that
// exports spans with OTLP over HTTP, and Worker and Client give it to a
// worker's or a client's configuration together with the OpenTelemetry
// contrib instrumentation of their AWS SDK calls.
//
// It is a package of its own so that a program that does not trace links
// neither the SDK nor the exporter: the worker's Lambda bootstrap uses it
// only when built with the leasehold_otel tag (docs/observability.md).
package otelenv

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	//lint:ignore SA1019 otelaws, the contrib instrumentation issue 23 asks for, is deprecated upstream (no owner) since v0.72.0; the SDK's own tracing through smithyoteltracing is the way off it
	"go.opentelemetry.io/contrib/instrumentation/github.com/aws/aws-sdk-go-v2/otelaws"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/tracing"
)

// FromEnv returns a tracer provider configured by the OTEL_* environment,
// or nil (and no error) when that environment asks for no tracing, as it
// does by default: it asks with OTEL_TRACES_EXPORTER set to anything but
// "none", or an OTLP endpoint (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), and OTEL_SDK_DISABLED not "true".
// Spans go through a batch processor (OTEL_BSP_*) to an OTLP/HTTP exporter
// (OTEL_EXPORTER_OTLP_*: endpoint, headers, timeout...); the sampler is
// OTEL_TRACES_SAMPLER's (default: parent-based, always on) and the
// resource names OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES. Only the
// "otlp" exporter with the http/protobuf protocol is built in. Call
// ForceFlush before a Lambda invocation returns, and Shutdown at exit.
func FromEnv(ctx context.Context) (*sdktrace.TracerProvider, error) {
	if !tracing.Asked(os.Getenv) {
		return nil, nil
	}
	if e := os.Getenv("OTEL_TRACES_EXPORTER"); e != "" && e != "otlp" {
		return nil, fmt.Errorf("otelenv: OTEL_TRACES_EXPORTER=%q: only \"otlp\" is built in", e)
	}
	for _, v := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := os.Getenv(v); p != "" {
			if p != "http/protobuf" {
				return nil, fmt.Errorf("otelenv: %s=%q: only http/protobuf is built in", v, p)
			}
			break
		}
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("otelenv: OTLP exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.Environment())
	if err != nil {
		return nil, fmt.Errorf("otelenv: resource: %w", err)
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}

// instrumentAWS traces every AWS SDK call made with cfg under tp, with the
// OpenTelemetry contrib instrumentation for aws-sdk-go-v2 (otelaws).
func instrumentAWS(cfg *aws.Config, tp trace.TracerProvider) {
	otelaws.AppendMiddlewares(&cfg.APIOptions, otelaws.WithTracerProvider(tp))
}

// Worker sets cfg's TracerProvider to tp and instruments its AWS calls;
// a nil tp leaves cfg as it is.
func Worker(cfg *leasehold.WorkerConfig, tp trace.TracerProvider) {
	if tp == nil {
		return
	}
	cfg.TracerProvider = tp
	instrumentAWS(&cfg.AWS, tp)
}

// Client sets cfg's TracerProvider to tp and instruments its AWS calls; a
// nil tp leaves cfg as it is.
func Client(cfg *leasehold.ClientConfig, tp trace.TracerProvider) {
	if tp == nil {
		return
	}
	cfg.TracerProvider = tp
	instrumentAWS(&cfg.AWS, tp)
}
