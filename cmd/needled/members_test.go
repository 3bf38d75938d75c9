package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/needle-mesh/needle/peer/p2p"
)

// newID returns the peer id of a new identity key.
func newID(t *testing.T) string {
	t.Helper()
	id, _, err := p2p.InitIdentity(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// writeFile writes body to a new file in a temporary dir.
func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// --members is read from the command line, NEEDLE_MEMBERS and --config
// alike, and read at once: a bad line stops the start naming the file and
// the line, as does a file that lists nobody.
func TestMembersFlag(t *testing.T) {
	good := writeFile(t, "members", "# mesh\n"+newID(t)+" web-1\n"+newID(t)+"\n")
	conf := writeFile(t, "needle.conf", "members = "+good+"\n")
	for name, tc := range map[string]struct {
		args []string
		env  map[string]string
	}{
		"flag":   {args: []string{"--members", good}},
		"env":    {env: map[string]string{"NEEDLE_MEMBERS": good}},
		"config": {args: []string{"--config", conf}},
	} {
		m := NewMain()
		m.Stderr = &strings.Builder{}
		if err := m.ParseFlags(tc.args, func(k string) string { return tc.env[k] }); err != nil {
			t.Fatalf("%s: ParseFlags = %v", name, err)
		}
		if m.Config.MembersFile != good {
			t.Errorf("%s: MembersFile = %q; want %q", name, m.Config.MembersFile, good)
		}
	}

	badLine := writeFile(t, "members", newID(t)+"\n\nweb-2 "+newID(t)+"\n")
	empty := writeFile(t, "members", "# nobody yet\n")
	for file, want := range map[string]string{
		badLine:                       "--members: p2p: bad members file: " + badLine + ": line 3: \"web-2\" is not a peer id",
		empty:                         "--members: p2p: bad members file: " + empty + ": lists no peer id",
		filepath.Join(empty, "nope"):  "--members: p2p: read members:",
		filepath.Dir(empty) + "/none": "no such file",
	} {
		m := NewMain()
		m.Stderr = &strings.Builder{}
		err := m.ParseFlags([]string{"--members", file}, func(string) string { return "" })
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--members %s: ParseFlags = %v; want an error holding %q", file, err, want)
		}
	}
}

// fakePeer is the peer as a SIGHUP sees it: a TLS certificate that is not
// served and a members list whose reload answers what the test set.
type fakePeer struct {
	ok                   bool
	listed, disconnected int
	err                  error
}

func (fakePeer) ReloadTLS() (bool, time.Time, error) { return false, time.Time{}, nil }
func (f fakePeer) ReloadMembers() (bool, int, int, error) {
	return f.ok, f.listed, f.disconnected, f.err
}

// A SIGHUP reloads --members: the count of peers listed and disconnected
// at INFO; a file that does not parse at ERROR, the list staying.
func TestHangupReloadsMembers(t *testing.T) {
	file := writeFile(t, "members", newID(t)+"\n")
	m := NewMain()
	if err := m.ParseFlags([]string{"--members", file}, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	log, lines := lineLog()
	m.hangup(log, fakePeer{ok: true, listed: 2, disconnected: 1})
	expectLine(t, lines, "level=INFO", "--members reloaded", "peers=2", "disconnected=1", file)
	m.hangup(log, fakePeer{err: errors.New("p2p: bad members file: " + file + ": line 2: \"x\" is not a peer id")})
	expectLine(t, lines, "level=ERROR", "list stays as it was", "line 2")
	m.hangup(log, fakePeer{}) // no --members on the peer: nothing else either
	expectLine(t, lines, "level=INFO", "nothing to reload", "no --members")
}

// The daemon: with --members listing three peers, the three form a mesh;
// removed from the file and a SIGHUP sent, the third is dropped by the
// others (disconnected, refused, then held dead by their failure
// detector) and its own refused dials are logged. A bad file stops the
// start with exit 2 and a message naming the file and the line.
func TestMembersE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three daemons")
	}
	bin := buildNeedled(t)

	bad := writeFile(t, "members", "12D3KooWnot-an-id\n")
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "--data", t.TempDir(), "--members", bad)
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(stderr.String(), "needled: --members: p2p: bad members file: "+bad+": line 1:") {
		t.Fatalf("needled with a bad --members: %v, stderr %q; want exit 2 naming the file and line 1", err, stderr.String())
	}

	const n = 3
	var dirs, ids []string
	for range n {
		dir := t.TempDir()
		out := runInit(t, bin, []string{"--init", "--data", dir, "--partitions", "32"})
		dirs, ids = append(dirs, dir), append(ids, strings.Fields(out)[0])
	}
	members := writeFile(t, "members", "# the mesh\n"+ids[0]+" a\n"+ids[1]+" b\n"+ids[2]+" c\n")
	cmds, https := make([]*exec.Cmd, n), make([]string, n)
	for i := range n {
		join := ""
		if i > 0 {
			join = selfAddr(t, https[0])
		}
		args := append(meshArgs(dirs[i], join), "--members", members)
		cmds[i], https[i] = runDaemon(t, bin, nil, args...)
	}
	state := func(at, of string) string {
		var ps struct {
			Peers []struct{ ID, State string }
		}
		if getJSON(at, "/v1/peers", &ps) != nil {
			return ""
		}
		for _, p := range ps.Peers {
			if p.ID == of {
				return p.State
			}
		}
		return "absent"
	}
	for _, at := range https[:2] {
		waitUntil(t, "peer c alive at "+at, func() bool { return state(at, ids[2]) == "alive" })
	}

	if err := os.WriteFile(members, []byte(ids[0]+" a\n"+ids[1]+" b\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range cmds[:2] {
		if err := c.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	for _, at := range https[:2] {
		waitUntil(t, "peer c held dead at "+at, func() bool {
			s := state(at, ids[2])
			return s == "dead" || s == "absent"
		})
	}
	if s := state(https[0], ids[1]); s != "alive" {
		t.Errorf("peer b is %q at a after the reload; want alive", s)
	}
}
