package bench

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeNeedledEnv makes the test binary act as needled (see TestMain):
// "serve" runs one fake peer, "fail" exits at once with an error.
const fakeNeedledEnv = "NEEDLE_BENCH_FAKE_NEEDLED"

func TestMain(m *testing.M) {
	// TestWorkerWorkloads runs the test binary as its Go worker processes.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	served, err := ServeWorkerFromEnv(ctx)
	stop()
	if served {
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench worker:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	switch os.Getenv(fakeNeedledEnv) {
	case "serve":
		os.Exit(fakeNeedledMain(os.Args[1:]))
	case "fail":
		fmt.Fprintln(os.Stderr, "needled: --data: permission denied")
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// fakeNeedledMain parses needled's flags and serves one fake peer until
// SIGTERM.
func fakeNeedledMain(args []string) int {
	fs := flag.NewFlagSet("needled", flag.ContinueOnError)
	data := fs.String("data", "./needle-data", "")
	addr := fs.String("http", "127.0.0.1:7070", "")
	slots := fs.Int("slots", 1, "")
	fs.Bool("steal", true, "")
	var multi stringList
	fs.Var(&multi, "listen", "")
	fs.Var(&multi, "join", "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if st, err := os.Stat(*data); err != nil || !st.IsDir() {
		fmt.Fprintf(os.Stderr, "needled: --data %s: not a directory\n", *data)
		return 1
	}
	// What the peer's runtime was given (TestPeerProcsInEnvironment).
	if err := os.WriteFile(filepath.Join(*data, "gomaxprocs"), []byte(os.Getenv("GOMAXPROCS")), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, "needled:", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "needled:", err)
		return 1
	}
	p := newFakeMesh(nil, nil).addPeer(PeerSpec{Slots: *slots}, l)
	<-ctx.Done()
	p.Kill()
	return 0
}

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func TestRunRealProcess(t *testing.T) {
	t.Setenv(fakeNeedledEnv, "serve")
	cfg := testConfig(t, nil, W1, W2, W3)
	cfg.Start, cfg.Needled = nil, os.Args[0]
	cfg.Peers, cfg.Reps = 1, 1
	rep, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Run = %v", err)
	}
	if got := len(rep.Workloads); got != 3 {
		t.Errorf("%d workloads; want 3", got)
	}
}

// Every peer runs with GOMAXPROCS PeerProcs in its environment, over the
// bench's own; by default with the bench's environment as it is.
func TestPeerProcsInEnvironment(t *testing.T) {
	t.Setenv(fakeNeedledEnv, "serve")
	t.Setenv("GOMAXPROCS", "7") // the bench's: each peer's wins
	cfg := testConfig(t, nil, W1)
	cfg.Start, cfg.Needled, cfg.Peers, cfg.PeerProcs = nil, os.Args[0], 1, 3 // fake peers form no mesh
	cl, err := StartCluster(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range cfg.Peers {
		b, err := os.ReadFile(filepath.Join(cl.dir, "peer"+strconv.Itoa(i), "gomaxprocs"))
		if err != nil || string(b) != "3" {
			t.Errorf("peer %d ran with GOMAXPROCS %q (%v); want 3", i, b, err)
		}
	}
	cl.Close()

	cfg.PeerProcs = 0
	if cl, err = StartCluster(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if b, err := os.ReadFile(filepath.Join(cl.dir, "peer0", "gomaxprocs")); err != nil || string(b) != "7" {
		t.Errorf("with PeerProcs 0 the peer ran with GOMAXPROCS %q (%v); want the bench's 7", b, err)
	}
}

func TestStartClusterPeerExits(t *testing.T) {
	t.Setenv(fakeNeedledEnv, "fail")
	cfg := testConfig(t, nil, W1)
	cfg.Start, cfg.Needled, cfg.Peers = nil, os.Args[0], 3
	_, err := StartCluster(t.Context(), cfg)
	if err == nil {
		t.Fatal("StartCluster = nil; want an error")
	}
	for _, want := range []string{"peer 0", "exited before it was ready", "--data: permission denied", "--http 127.0.0.1:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("StartCluster = %v; want it to contain %q", err, want)
		}
	}
}

func TestStartClusterNeverReady(t *testing.T) {
	cfg := testConfig(t, nil, W1)
	cfg.ReadyTimeout = 100 * time.Millisecond
	var proc *stubProc
	cfg.Start = func(context.Context, PeerSpec) (Process, error) {
		proc = &stubProc{done: make(chan struct{})}
		return proc, nil
	}
	_, err := StartCluster(t.Context(), cfg)
	if err == nil || !strings.Contains(err.Error(), "not ready after 100ms") {
		t.Fatalf("StartCluster = %v; want a readiness timeout", err)
	}
	if !proc.stopped {
		t.Error("the peer that never became ready was not stopped")
	}
}

// stubProc is a process that serves nothing.
type stubProc struct {
	done    chan struct{}
	stopped bool
}

func (p *stubProc) Done() <-chan struct{} { return p.done }
func (p *stubProc) Output() string        { return "" }
func (p *stubProc) Kill() error           { return p.Stop(0) }
func (p *stubProc) Stop(time.Duration) error {
	if !p.stopped {
		p.stopped = true
		close(p.done)
	}
	return nil
}

func TestClusterCloseAndKill(t *testing.T) {
	n := &fakeNet{}
	cfg := testConfig(t, n, W4)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	cl, err := StartCluster(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ps := n.peers()
	if got, want := len(ps), cfg.Peers; got != want {
		t.Fatalf("%d peers started; want %d", got, want)
	}
	if !strings.Contains(ps[1].spec.Args[len(ps[1].spec.Args)-1], "/p2p/"+cl.PeerID(0)) {
		t.Errorf("peer 1 args = %q; want --join .../p2p/%s last", ps[1].spec.Args, cl.PeerID(0))
	}
	if err := cl.Kill9(1); err != nil {
		t.Fatalf("Kill9(1) = %v", err)
	}
	<-ps[1].Done()
	if ps[0].isDead() || ps[2].isDead() {
		t.Error("Kill9(1) killed another peer")
	}
	cancel() // the cluster closes itself
	for _, p := range ps {
		<-p.Done()
	}
	if err := cl.Close(); err != nil {
		t.Errorf("Close after cancel = %v", err)
	}
	if err := cl.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	if _, err := os.Stat(cl.dir); !os.IsNotExist(err) {
		t.Errorf("data dir %s left behind: %v", cl.dir, err)
	}
}

func TestPeerSpecArgs(t *testing.T) {
	s := PeerSpec{DataDir: "/d", HTTPAddr: "127.0.0.1:1", Slots: 2,
		Listen: []string{"/ip4/127.0.0.1/tcp/5"}, Join: []string{"/j"}}
	got := strings.Join(s.args([]string{"--replicas", "3"}), " ")
	want := "--data /d --http 127.0.0.1:1 --slots 2 --listen /ip4/127.0.0.1/tcp/5 --join /j --steal=false --replicas 3"
	if got != want {
		t.Errorf("args = %q; want %q", got, want)
	}
	s.Steal = true
	if got := strings.Join(s.args(nil), " "); strings.Contains(got, "steal") {
		t.Errorf("args with Steal = %q; want no --steal flag", got)
	}
}
