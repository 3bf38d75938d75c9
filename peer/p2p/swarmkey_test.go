package p2p

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestGenerateSwarmKeyFormat(t *testing.T) {
	var buf bytes.Buffer
	if err := GenerateSwarmKey(&buf); err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`^/key/swarm/psk/1\.0\.0/\n/base16/\n[0-9a-f]{64}\n$`)
	if !re.Match(buf.Bytes()) {
		t.Fatalf("GenerateSwarmKey wrote %q; want the go-libp2p base16 format", buf.String())
	}
}

func TestLoadSwarmKey(t *testing.T) {
	hex64 := strings.Repeat("ab", 32)
	tests := []struct {
		name    string
		content string
		wantErr bool
	}{
		{"base16", "/key/swarm/psk/1.0.0/\n/base16/\n" + hex64 + "\n", false},
		{"crlf", "/key/swarm/psk/1.0.0/\r\n/base16/\r\n" + hex64 + "\r\n", false},
		{"no trailing newline", "/key/swarm/psk/1.0.0/\n/base16/\n" + hex64, false},
		{"empty", "", true},
		{"bare hex", hex64 + "\n", true},
		{"wrong header", "/key/swarm/psk/2.0.0/\n/base16/\n" + hex64 + "\n", true},
		{"unknown encoding", "/key/swarm/psk/1.0.0/\n/base58/\n" + hex64 + "\n", true},
		{"short key", "/key/swarm/psk/1.0.0/\n/base16/\n" + hex64[:62] + "\n", true},
		{"long key", "/key/swarm/psk/1.0.0/\n/base16/\n" + hex64 + "00\n", true},
		{"not hex", "/key/swarm/psk/1.0.0/\n/base16/\n" + strings.Repeat("zz", 32) + "\n", true},
		{"trailing junk", "/key/swarm/psk/1.0.0/\n/base16/\n" + hex64 + "\nmore\n", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "swarm.key")
			if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			key, err := LoadSwarmKey(path)
			if tt.wantErr {
				if !errors.Is(err, ErrSwarmKey) {
					t.Fatalf("LoadSwarmKey(%q) = %v; want ErrSwarmKey", tt.content, err)
				}
				return
			}
			if err != nil || len(key) != 32 || key[0] != 0xab {
				t.Fatalf("LoadSwarmKey(%q) = %x, %v; want 32 bytes of 0xab", tt.content, key, err)
			}
		})
	}
	if _, err := LoadSwarmKey(filepath.Join(t.TempDir(), "missing")); err == nil || errors.Is(err, ErrSwarmKey) {
		t.Fatalf("LoadSwarmKey(missing) = %v; want a read error", err)
	}
}

func TestValidate(t *testing.T) {
	const id = "12D3KooWGjQ1yV9kDkazaFyqdeQfLgXjWSjXu9CHqETJwbBVraVU"
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"zero", Config{}, true},
		{"full", Config{Listen: DefaultListen(), Join: []string{"/ip4/10.0.0.1/tcp/4001/p2p/" + id}, MaxFrame: 1 << 20}, true},
		{"bad listen", Config{Listen: []string{"tcp://0.0.0.0:4001"}}, false},
		{"join without id", Config{Join: []string{"/ip4/10.0.0.1/tcp/4001", "needle-0:4001"}}, true},
		{"quic join without id", Config{Join: []string{"/ip4/10.0.0.1/udp/4001/quic-v1"}}, false},
		{"negative queue", Config{QueueLen: -1}, false},
		{"tiny frame", Config{MaxFrame: 10}, false},
		{"huge frame", Config{MaxFrame: MaxMaxFrame + 1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrConfig)) {
				t.Fatalf("Validate() = %v; want ok=%v", err, tt.ok)
			}
		})
	}
}
