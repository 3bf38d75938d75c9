package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/needle-mesh/needle/peer/api"
)

// BenchmarkWorker runs b.N echo tasks through a Worker (2 handlers, 256
// prefetched) against a peer on loopback that answers every poll at once
// with as many tasks as asked (encoded cheaply: the cost measured is the
// worker's). ns/op is the wall time per task with no lease latency;
// cpu-ns/task the CPU time per task of the process (the worker's, and
// the little of the peer's), steadier on a shared machine.
func BenchmarkWorker(b *testing.B) {
	var next, reported atomic.Int64
	total := int64(b.N)
	done := make(chan struct{})
	var once sync.Once
	deadline := time.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano)
	started := time.Now().UTC().Format(time.RFC3339Nano)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/v1/workers/poll":
			max := 1
			if i := bytes.Index(body, []byte(`"max":`)); i >= 0 {
				j := i + 6
				for j < len(body) && body[j] >= '0' && body[j] <= '9' {
					j++
				}
				max, _ = strconv.Atoi(string(body[i+6 : j]))
			}
			out := append([]byte(nil), `{"tasks":[`...)
			for k := range max {
				n := next.Add(1)
				if n > total {
					break
				}
				if k > 0 {
					out = append(out, ',')
				}
				out = fmt.Appendf(out, `{"id":"g%d.0","group":"g%d","name":"0","handler":"echo","state":"RUNNING","priority":0,"attempt":0,"round":1,"peer":"12D3KooWabc","result":null,"error":null,"created_at":null,"started_at":%q,"finished_at":null,"payload":{"w":"w1go","rep":0,"i":%d},"timeout":"10m0s","trace":"0af7651916cd43dd8448eb211c80319c","lease":"%032x","deadline":%q}`,
					n, n, started, n, n, deadline)
			}
			out = append(out, `]`...)
			out = appendVerdicts(out, bytes.Count(body, []byte(`"lease":`)))
			out = append(out, '}')
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(out)
		case "/v1/leases/report":
			k := bytes.Count(body, []byte(`"lease":`))
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(append(appendVerdicts([]byte(`{`), k), '}'))
		default:
			http.NotFound(w, r)
			return
		}
		if n := reported.Add(int64(bytes.Count(body, []byte(`"lease":`)))); n >= total {
			once.Do(func() { close(done) })
		}
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &Worker{Client: &api.Client{BaseURL: srv.URL}, Concurrency: 2, Prefetch: 256, PollWait: time.Second,
		Handlers: map[string]HandlerFunc{"echo": func(_ context.Context, t Task) (json.RawMessage, error) { return t.Payload, nil }}}
	cpu0 := cpuTime()
	b.ResetTimer()
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	<-done
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/task")
	cancel()
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
}

// cpuTime returns the CPU time of the process so far (user and system):
// the worker's and the loopback peer's, which costs little.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// appendVerdicts appends "done": k verdicts of 200 (the leases are not
// read back: the worker only counts them).
func appendVerdicts(out []byte, k int) []byte {
	if k == 0 {
		return out
	}
	if out[len(out)-1] != '{' {
		out = append(out, ',')
	}
	out = append(out, `"done":[`...)
	for i := range k {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, `{"lease":"x","status":200}`...)
	}
	return append(out, ']')
}
