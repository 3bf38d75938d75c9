package p2p

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/libp2p/go-libp2p/core/pnet"
)

// swarmKeyHeader is the first line of a swarm key file in the go-libp2p
// (and IPFS) format; the second names the encoding.
const (
	swarmKeyHeader = "/key/swarm/psk/1.0.0/"
	swarmKeyBase16 = "/base16/"
	swarmKeyLen    = 32
)

// ErrSwarmKey is wrapped by LoadSwarmKey for a malformed key file.
var ErrSwarmKey = errors.New("p2p: malformed swarm key")

// GenerateSwarmKey writes a new random 256-bit swarm key to w in the standard
// go-libp2p format:
//
//	/key/swarm/psk/1.0.0/
//	/base16/
//	<64 hex digits>
func GenerateSwarmKey(w io.Writer) error {
	var key [swarmKeyLen]byte
	if _, err := rand.Read(key[:]); err != nil {
		return fmt.Errorf("p2p: generate swarm key: %w", err)
	}
	_, err := fmt.Fprintf(w, "%s\n%s\n%s\n", swarmKeyHeader, swarmKeyBase16, hex.EncodeToString(key[:]))
	if err != nil {
		return fmt.Errorf("p2p: write swarm key: %w", err)
	}
	return nil
}

// LoadSwarmKey reads and decodes a swarm key file (base16, base64 or bin
// encodings, as go-libp2p accepts). The error names what is wrong with a
// malformed file and wraps ErrSwarmKey.
func LoadSwarmKey(path string) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("p2p: read swarm key: %w", err)
	}
	if !bytes.HasPrefix(raw, []byte(swarmKeyHeader)) {
		return nil, fmt.Errorf("%w: %s: first line must be %q", ErrSwarmKey, path, swarmKeyHeader)
	}
	if err := checkBase16(raw); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrSwarmKey, path, err)
	}
	psk, err := pnet.DecodeV1PSK(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrSwarmKey, path, err)
	}
	return psk, nil
}

// checkBase16 is stricter than go-libp2p for the common base16 encoding: the
// key line must hold exactly 64 hex digits (go-libp2p ignores what follows
// the first 32 bytes, so a pasted key with extra digits would pass silently).
func checkBase16(raw []byte) error {
	lines := bytes.Split(bytes.ReplaceAll(raw, []byte("\r\n"), []byte("\n")), []byte("\n"))
	if len(lines) < 3 || string(lines[1]) != swarmKeyBase16 {
		return nil // other encodings: left to pnet.DecodeV1PSK
	}
	key := bytes.TrimSpace(lines[2])
	if len(key) != 2*swarmKeyLen {
		return fmt.Errorf("key line has %d characters, want %d hex digits", len(key), 2*swarmKeyLen)
	}
	if _, err := hex.DecodeString(string(key)); err != nil {
		return fmt.Errorf("key line is not hex: %v", err)
	}
	for _, l := range lines[3:] {
		if len(bytes.TrimSpace(l)) != 0 {
			return errors.New("unexpected data after the key line")
		}
	}
	return nil
}
