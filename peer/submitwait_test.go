package peer

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/needle-mesh/needle/peer/api"
)

// TestSubmitWaitForwardsOnce submits and waits (POST /v1/tasks?wait=) on
// a peer that does not own the task's group: the owner waits for the task
// and answers it with the submission, so the request is forwarded once
// (a submit), not twice (a submit, then a wait), and the answer shows the
// task terminal although it runs for a while after its creation commits.
func TestSubmitWaitForwardsOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("real libp2p mesh")
	}
	a := startMeshPeerWith(t, Config{DataDir: t.TempDir()})
	b := startMeshPeerWith(t, Config{DataDir: t.TempDir(), Join: []string{a.p.tr.Addrs()[0]}})
	waitLeading(t, a, b)
	key := keyOwnedBy(t, a, b, "subwait")
	var res api.SubmitTaskResponse
	waitFor(t, "the submission answered", 20*time.Second, func() bool {
		resp, err := http.Post(a.c.BaseURL+"/v1/tasks?wait=20s", "application/json",
			strings.NewReader(`{"handler":"sleep","payload":{"ms":300},"key":"`+key+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable {
			return false
		}
		if err := json.NewDecoder(resp.Body).Decode(&res); err != nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("submit and wait: %d %v", resp.StatusCode, err)
		}
		return true
	})
	if res.Task == nil || res.Task.State != "SUCCEEDED" {
		t.Fatalf("submit and wait answered %+v; want the task SUCCEEDED", res)
	}
	served := func(op string) float64 {
		var m dto.Metric
		if err := b.p.metrics.served.WithLabelValues(op).Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetCounter().GetValue()
	}
	if served(opSubmit) < 1 || served(opTask) != 0 {
		t.Errorf("the owner served %v forwarded submits and %v task reads; want the submission forwarded and no read",
			served(opSubmit), served(opTask))
	}
	if st, _ := a.c.GetTask(t.Context(), res.ID, 0); st.State != "SUCCEEDED" {
		t.Errorf("GET %s = %s; want SUCCEEDED", res.ID, st.State)
	}
}
