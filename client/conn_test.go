package client

import (
	"errors"
	"strings"
	"testing"

	"github.com/needle-mesh/needle/peer/api"
)

// A peer's error body reaches the worker's caller whole, as api.Client
// gives it: a 503's message names the partition's dead voters and the way
// out, past 200 bytes. A body of no error (a proxy's page) is cut.
func TestAnswerErrorKeepsAPeersMessage(t *testing.T) {
	msg := "partition 7 has no leader: it lost the majority of its voters (dead: " + strings.Repeat("X", 52) +
		") and serves no request until enough of them return: restart them on their data dirs, or, their disks " +
		"lost for good, needle forget ID --unsafe-recover each"
	body := `{"error":{"code":"unavailable","message":"` + msg + `"}}`
	var e *api.Error
	if err := answerError(503, []byte(body)); !errors.As(err, &e) || e.Status != 503 || e.Code != api.CodeUnavailable || e.Message != msg {
		t.Fatalf("answerError(503, %d-byte message) = %v; want it whole", len(msg), err)
	}
	page := strings.Repeat("<p>bad gateway</p>", 40)
	if err := answerError(502, []byte(page)); !errors.As(err, &e) || e.Status != 502 || len(e.Message) != 203 || !strings.HasSuffix(e.Message, "...") {
		t.Fatalf("answerError(502, a %d-byte page) = %v; want its first 200 bytes", len(page), err)
	}
}
