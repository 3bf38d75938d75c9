package main

import (
	"encoding/pem"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/needle-mesh/needle/peer/api"
)

// A peer serving a private certificate (--tls-cert): --cacert trusts the
// CA that signed it; without it the request fails on the certificate; a
// file without a certificate, or none, is a usage error (exit 2) that
// names --cacert, as a missing -f file is.
func TestCACert(t *testing.T) {
	srv := httptest.NewTLSServer(api.NewHandler(&fakeBackend{}, api.HandlerOptions{}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	runCLI(t, srv.URL, "", "health").check(t, 1, "", "certificate")
	runCLI(t, srv.URL, "", "--cacert", ca, "health").check(t, 0, "ok", "")
	runCLI(t, srv.URL, "", "health", "--cacert", ca).check(t, 0, "ok", "")
	bad := filepath.Join(dir, "bad.pem")
	if err := os.WriteFile(bad, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	runCLI(t, srv.URL, "", "--cacert", bad, "health").check(t, 2, "", "--cacert")
	runCLI(t, srv.URL, "", "--cacert", filepath.Join(dir, "missing.pem"), "health").check(t, 2, "", "--cacert")
}
