package main

import (
	"testing"
)

// TestTracerProviderFromEnv: tracing is off unless the OTEL_* environment
// names an OTLP endpoint or exporter, and what needled cannot export is an
// error, not silence.
func TestTracerProviderFromEnv(t *testing.T) {
	for _, tt := range []struct {
		name    string
		env     map[string]string
		on, bad bool
	}{
		{"nothing set", nil, false, false},
		{"endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true, false},
		{"traces endpoint", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, true, false},
		{"exporter otlp", map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true, false},
		{"exporter none", map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:4318"}, false, false},
		{"sdk disabled", map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, false, false},
		{"http/protobuf", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, true, false},
		{"grpc", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, false, true},
		{"zipkin", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tp, err := tracerProvider(t.Context(), func(k string) string { return tt.env[k] })
			if (err != nil) != tt.bad || (tp != nil) != tt.on {
				t.Fatalf("tracerProvider = %v, %v; want on=%v, error=%v", tp, err, tt.on, tt.bad)
			}
			if tp != nil {
				if err := tp.Shutdown(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
