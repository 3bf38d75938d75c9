package p2p

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// IdentityFile is the name of the identity key file inside Config.DataDir.
const IdentityFile = "identity.key"

// loadIdentity returns the private key stored in dir, creating it on first
// use. An empty dir gives a fresh ephemeral key.
func loadIdentity(dir string, log *slog.Logger) (crypto.PrivKey, error) {
	if dir == "" {
		sk, _, err := crypto.GenerateEd25519Key(rand.Reader)
		if err != nil {
			return nil, fmt.Errorf("p2p: generate identity: %w", err)
		}
		return sk, nil
	}
	path := filepath.Join(dir, IdentityFile)
	raw, err := os.ReadFile(path)
	switch {
	case err == nil:
		return parseIdentity(path, raw, log)
	case errors.Is(err, fs.ErrNotExist):
		return createIdentity(dir, path)
	default:
		return nil, fmt.Errorf("p2p: read identity: %w", err)
	}
}

// parseIdentity decodes a stored key and warns when its file is readable by
// others.
func parseIdentity(path string, raw []byte, log *slog.Logger) (crypto.PrivKey, error) {
	sk, err := crypto.UnmarshalPrivateKey(raw)
	if err != nil {
		return nil, fmt.Errorf("p2p: identity %s: %w", path, err)
	}
	if st, err := os.Stat(path); err == nil && st.Mode().Perm()&0o077 != 0 {
		log.Warn("identity key file is readable by others", keyFile, path,
			"mode", st.Mode().Perm().String())
	}
	return sk, nil
}

// createIdentity generates an Ed25519 key and writes it atomically (temporary
// file, fsync, rename) with mode 0600.
func createIdentity(dir, path string) (crypto.PrivKey, error) {
	sk, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("p2p: generate identity: %w", err)
	}
	raw, err := crypto.MarshalPrivateKey(sk)
	if err != nil {
		return nil, fmt.Errorf("p2p: marshal identity: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("p2p: create data dir: %w", err)
	}
	if err := writeFileAtomic(path, raw, 0o600); err != nil {
		return nil, fmt.Errorf("p2p: write identity: %w", err)
	}
	return sk, nil
}

// writeFileAtomic writes data to path through a synced temporary file and a
// rename, so a crash leaves either no file or the whole file.
func writeFileAtomic(path string, data []byte, perm fs.FileMode) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// StoredID returns the peer id of the identity key stored in dir, without
// creating one or starting a host; ok is false when dir holds no key.
func StoredID(dir string) (id string, ok bool, err error) {
	path := filepath.Join(dir, IdentityFile)
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("p2p: read identity: %w", err)
	}
	sk, err := crypto.UnmarshalPrivateKey(raw)
	if err != nil {
		return "", false, fmt.Errorf("p2p: identity %s: %w", path, err)
	}
	pid, err := peer.IDFromPrivateKey(sk)
	if err != nil {
		return "", false, fmt.Errorf("p2p: identity %s: %w", path, err)
	}
	return pid.String(), true, nil
}

// InitIdentity returns the peer id of the identity key stored in dir,
// creating the key as a host's first start would (needled --init: an
// operator learns a peer's id before it first starts). created says the
// key is new.
func InitIdentity(dir string, log *slog.Logger) (id string, created bool, err error) {
	if dir == "" {
		return "", false, errors.New("p2p: init identity: no data dir")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	_, statErr := os.Stat(filepath.Join(dir, IdentityFile))
	sk, err := loadIdentity(dir, log)
	if err != nil {
		return "", false, err
	}
	pid, err := peer.IDFromPrivateKey(sk)
	if err != nil {
		return "", false, fmt.Errorf("p2p: identity: %w", err)
	}
	return pid.String(), errors.Is(statErr, fs.ErrNotExist), nil
}

// ListenAddrs returns the full multiaddrs (ending in /p2p/<id>) a host of
// cfg with identity id would listen on, as configured: Config.Listen or
// DefaultListen(), the TCP ones only with a swarm key. Unspecified
// addresses (0.0.0.0) and port 0 stay as given; a started host's Addrs
// expands them.
func ListenAddrs(cfg Config, id string) []string {
	cfg = cfg.withDefaults()
	listen := cfg.Listen
	if cfg.SwarmKeyFile != "" {
		listen, _ = splitTCP(listen)
	}
	out := make([]string, 0, len(listen))
	for _, a := range listen {
		out = append(out, a+"/p2p/"+id)
	}
	return out
}
