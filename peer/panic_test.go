package peer

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/needle-mesh/needle/peer/handler"
)

func panickingHandler(context.Context, handler.Call) ([]byte, error) { panic("oops") }

// A handler that panics fails its attempt for good, and the panic's value
// and stack go to the attempt's log: the error alone does not say where.
func TestSafeCallLogsThePanicStack(t *testing.T) {
	var log bytes.Buffer
	_, err := safeCall(t.Context(), panickingHandler, handler.Call{}.WithLogWriter(&log))
	if err == nil || err.Error() != "handler panicked: oops" || !handler.IsPermanent(err) {
		t.Fatalf("err = %v; want a permanent \"handler panicked: oops\"", err)
	}
	if s := log.String(); !strings.HasPrefix(s, "panic: oops\n") || !strings.Contains(s, "peer.panickingHandler") {
		t.Errorf("task log %q; want the panic and its stack", s)
	}
}
