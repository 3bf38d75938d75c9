package p2p

import (
	"slices"
	"testing"
)

// TestInitIdentity: the key InitIdentity creates is the one a host and
// StoredID read afterwards; a second call creates nothing.
func TestInitIdentity(t *testing.T) {
	dir := t.TempDir()
	id, created, err := InitIdentity(dir, nil)
	if err != nil || !created {
		t.Fatalf("InitIdentity = %q %v %v; want a new key", id, created, err)
	}
	again, created, err := InitIdentity(dir, nil)
	if err != nil || created || again != id {
		t.Fatalf("second InitIdentity = %q %v %v; want %q kept", again, created, err, id)
	}
	if stored, ok, err := StoredID(dir); err != nil || !ok || stored != id {
		t.Fatalf("StoredID = %q %v %v; want %q", stored, ok, err, id)
	}
	if _, _, err := InitIdentity("", nil); err == nil {
		t.Error("InitIdentity without a dir: want an error")
	}
}

func TestListenAddrs(t *testing.T) {
	const id = "12D3KooWGzRcSUH7ouMCaGZ8CmZDEuMfSSJGYL2ybU2ZjjFNK6Fo"
	got := ListenAddrs(Config{}, id)
	want := []string{"/ip4/0.0.0.0/tcp/4001/p2p/" + id, "/ip4/0.0.0.0/udp/4001/quic-v1/p2p/" + id}
	if !slices.Equal(got, want) {
		t.Errorf("default ListenAddrs = %v; want %v", got, want)
	}
	if got := ListenAddrs(Config{SwarmKeyFile: "swarm.key"}, id); !slices.Equal(got, want[:1]) {
		t.Errorf("ListenAddrs with a swarm key = %v; want TCP only %v", got, want[:1])
	}
}
