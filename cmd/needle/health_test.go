package main

import (
	"errors"
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
