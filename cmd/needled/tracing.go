package main

import (
	"context"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/needle-mesh/needle/cmd/internal/buildinfo"
)

// tracerProvider returns the OpenTelemetry tracer provider the standard
// OTEL_* environment asks for, or nil: tracing is off unless
// OTEL_TRACES_EXPORTER=otlp or an OTLP endpoint
// (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is
// set, and OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none turn it off.
// Spans go over OTLP/HTTP (protobuf) in batches; the exporter reads the
// endpoint, headers, timeout, TLS and compression variables itself, the SDK
// OTEL_TRACES_SAMPLER[_ARG] and OTEL_BSP_*, the resource OTEL_SERVICE_NAME
// (default needled) and OTEL_RESOURCE_ATTRIBUTES.
func tracerProvider(ctx context.Context, getenv func(string) string) (*sdktrace.TracerProvider, error) {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return nil, nil
	}
	switch exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exp {
	case "none":
		return nil, nil
	case "":
		if getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
			return nil, nil
		}
	case "otlp":
	default:
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: needled exports otlp or none", exp)
	}
	proto := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if proto != "" && proto != "http/protobuf" {
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%q: needled exports http/protobuf (a collector's port 4318)", proto)
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	// Later options win: the environment's service name over the default.
	res, err := resource.New(ctx, resource.WithTelemetrySDK(),
		resource.WithAttributes(attribute.String("service.name", "needled"),
			attribute.String("service.version", buildinfo.Get().Version)),
		resource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}
