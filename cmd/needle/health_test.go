package main

import (
	"errors"
	"net/http/httptest"
	"testing"

	"github.com/needle-mesh/needle/peer/api"
)

func TestHealth(t *testing.T) {
	ready := mustServer(t, &fakeBackend{}, api.HandlerOptions{Token: "s3cret"})
	runCLI(t, ready, "", "health").check(t, 0, "ok", "")
	unready := mustServer(t, &fakeBackend{}, api.HandlerOptions{Ready: func() error {
		return errors.New("3 of 32 partitions have no reachable owner yet")
	}})
	runCLI(t, unready, "", "health").check(t, 1, "", "no reachable owner")
	runCLI(t, "http://127.0.0.1:1", "", "health", "--timeout", "1s").check(t, 1, "", "127.0.0.1:1")
	runCLI(t, ready, "", "health", "extra").check(t, 2, "", "no arguments")
}

// The image's default NEEDLE_ADDR is http://127.0.0.1:7070: a peer there
// that serves HTTPS (--tls-cert) is asked again over HTTPS, so its
// HEALTHCHECK holds; any other command is told to use https://.
func TestHealthOfLoopbackTLS(t *testing.T) {
	srv := httptest.NewTLSServer(api.NewHandler(&fakeBackend{}, api.HandlerOptions{}))
	t.Cleanup(srv.Close)
	plain := "http://" + srv.Listener.Addr().String()
	runCLI(t, plain, "", "health").check(t, 0, "ok", "")
	runCLI(t, plain, "", "peers").check(t, 1, "", "serves HTTPS")

	unready := httptest.NewTLSServer(api.NewHandler(&fakeBackend{}, api.HandlerOptions{Ready: func() error {
		return errors.New("3 of 32 partitions have no reachable owner yet")
	}}))
	t.Cleanup(unready.Close)
	runCLI(t, "http://"+unready.Listener.Addr().String(), "", "health").check(t, 1, "", "no reachable owner")
}
