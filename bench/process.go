package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"
)

// PeerSpec describes one peer to start. Args is the full needled command
// line (without the binary); the other fields are the same values, parsed,
// for launchers that do not exec needled.
type PeerSpec struct {
	Index    int      // 0-based index in the cluster
	Binary   string   // Config.Needled
	Args     []string // needled arguments
	DataDir  string   // --data: a fresh directory owned by the cluster
	HTTPAddr string   // --http: a free loopback host:port
	Listen   []string // --listen multiaddrs (loopback)
	Join     []string // --join multiaddrs (empty for peer 0)
	Slots    int      // --slots
	Steal    bool     // --steal
	Procs    int      // GOMAXPROCS in its environment (0: the runtime's default)
}

// Process is a started peer.
type Process interface {
	// Done is closed when the process has exited.
	Done() <-chan struct{}
	// Stop asks the process to exit (SIGTERM), kills it (SIGKILL) after
	// grace, and waits for it to exit.
	Stop(grace time.Duration) error
	// Kill kills the process at once (SIGKILL, like kill -9) and waits for
	// it to exit.
	Kill() error
	// Output returns the tail of the process's stderr and stdout.
	Output() string
}

// StartFunc starts one peer. The process must outlive ctx: the cluster
// stops it through Process.
type StartFunc func(ctx context.Context, spec PeerSpec) (Process, error)

// tailSize is how much of a peer's output is kept for error messages.
const tailSize = 16 << 10

// tail keeps the last tailSize bytes written to it.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - tailSize; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// execProcess is a needled child process in its own process group.
type execProcess struct {
	cmd  *exec.Cmd
	out  *tail
	done chan struct{}
	err  error // exit status; valid after done is closed
}

// ExecStart runs spec.Binary with spec.Args as a child process in its own
// process group, so that a signal reaches needled and anything it starts,
// and Ctrl-C on the terminal does not reach it before the bench stops it.
func ExecStart(_ context.Context, spec PeerSpec) (Process, error) {
	cmd := exec.Command(spec.Binary, spec.Args...)
	if spec.Procs > 0 {
		cmd.Env = append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(spec.Procs))
	}
	p := &execProcess{cmd: cmd, out: &tail{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	cmd.SysProcAttr = newProcessGroup()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: start peer %d: %w", spec.Index, err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *execProcess) Done() <-chan struct{} { return p.done }

func (p *execProcess) Output() string { return p.out.String() }

func (p *execProcess) Stop(grace time.Duration) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	signalGroup(p.cmd.Process, false)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
		return nil
	case <-t.C:
	}
	return p.Kill()
}

func (p *execProcess) Kill() error {
	select {
	case <-p.done: // do not signal a process group id that may be reused
		return nil
	default:
	}
	signalGroup(p.cmd.Process, true)
	<-p.done
	return nil
}
