package main

import (
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is an OTLP/HTTP trace endpoint that records the spans it
// gets: name -> trace id (hex).
type otlpReceiver struct {
	mu    sync.Mutex
	spans map[string][]string
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	var req coltracepb.ExportTraceServiceRequest
	if err != nil || r.URL.Path != "/v1/traces" || proto.Unmarshal(b, &req) != nil {
		http.Error(w, "not an OTLP trace export", http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				o.spans[s.GetName()] = append(o.spans[s.GetName()], hexOf(s.GetTraceId()))
			}
		}
	}
	o.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func hexOf(b []byte) string {
	const digits = "0123456789abcdef"
	var sb strings.Builder
	for _, c := range b {
		sb.WriteByte(digits[c>>4])
		sb.WriteByte(digits[c&15])
	}
	return sb.String()
}

// TestTracingExportsOTLP runs needled with OTEL_EXPORTER_OTLP_ENDPOINT set
// and a local OTLP/HTTP receiver: a task submitted with a traceparent
// arrives there as submit, commit, lease, run and outcome spans of the
// client's trace. Without the variable, needled exports nothing (the
// other e2e tests run so, and TestTracerProviderFromEnv checks the rule).
func TestTracingExportsOTLP(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemon")
	}
	rc := &otlpReceiver{spans: map[string][]string{}}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	bin := buildNeedled(t)
	_, addr := runDaemon(t, bin, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + srv.URL, "OTEL_BSP_SCHEDULE_DELAY=50"},
		"--data", t.TempDir(), "--http", anyPort, "--listen", "/ip4/127.0.0.1/tcp/0", "--slots", "2", "--drain-timeout", "-1s")
	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+addr+"/v1/tasks?wait=10s",
		strings.NewReader(`{"handler": "echo", "payload": 1}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+trace+"-00f067aa0ba902b7-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 || !strings.Contains(string(b), "SUCCEEDED") {
		t.Fatalf("submit and wait = %d %s", resp.StatusCode, b)
	}
	want := []string{"needle.commit", "needle.lease", "needle.outcome", "needle.run", "needle.submit"}
	waitUntil(t, "the task's spans at the OTLP receiver", func() bool {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		for _, name := range want {
			if !slices.Contains(rc.spans[name], trace) {
				return false
			}
		}
		return true
	})
}
