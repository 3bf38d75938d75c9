package main

import (
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An --http or --health-listen that is no host:port is an error of the
// configuration (exit 2) naming the flag, and a health port in use fails
// the start as an API port in use does; neither leaves a data dir behind.
// Before (trial s82), `--http nothing` exited 1 (a failure to start, which
// a supervisor retries) and `--health-listen` failed only after the data
// dir and its identity key were made.
func TestListenAddrErrorsCreateNothing(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, tt := range []struct {
		args []string
		flag string
		code int
	}{
		{[]string{"--http", "nothing"}, `--http "nothing" is not host:port`, 2},
		{[]string{"--http", "127.0.0.1"}, `--http "127.0.0.1" is not host:port`, 2},
		{[]string{"--http", "127.0.0.1:99999"}, `--http "127.0.0.1:99999" is not host:port`, 2},
		{[]string{"--http", "127.0.0.1:0", "--health-listen", "nothing"}, `--health-listen "nothing" is not host:port`, 2},
		{[]string{"--http", "127.0.0.1:0", "--health-listen", busy.Addr().String()}, "(--health-listen)", 1},
	} {
		data := filepath.Join(t.TempDir(), "data")
		m := NewMain()
		m.Stderr, m.HugePages = io.Discard, false
		if err := m.ParseFlags(append([]string{"--data", data}, tt.args...), func(string) string { return "" }); err != nil {
			t.Fatal(err)
		}
		err := m.Run(t.Context())
		if err == nil || !strings.Contains(err.Error(), tt.flag) || ExitCode(err) != tt.code {
			t.Errorf("Run %v = %v (exit %d); want an error saying %s, exit %d", tt.args, err, ExitCode(err), tt.flag, tt.code)
		}
		if _, err := os.Stat(data); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%v: data dir after the failed start: %v; want none created", tt.args, err)
		}
	}
}
