package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/needle-mesh/needle/cmd/internal/secret"
	"github.com/needle-mesh/needle/peer/p2p"
)

func TestKeygen(t *testing.T) {
	dir := t.TempDir()
	key, token := filepath.Join(dir, "swarm.key"), filepath.Join(dir, "api.token")

	runCLI(t, "", "", "keygen", "--token-file", token, key).check(t, 0, "", "wrote "+token)
	if _, err := p2p.LoadSwarmKey(key); err != nil {
		t.Fatalf("the swarm key written does not load: %v", err)
	}
	tok, err := secret.ReadFile(token)
	if err != nil || len(tok) != 64 {
		t.Fatalf("token = %q, %v; want 64 hex digits", tok, err)
	}
	for _, path := range []string{key, token} {
		if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("stat %s = %v, %v; want mode 0600", path, st.Mode(), err)
		}
	}
	oldKey, _ := os.ReadFile(key)

	// Without --if-missing an existing file is an error; with it, kept as is.
	runCLI(t, "", "", "keygen", key).check(t, 1, "", "file exists")
	runCLI(t, "", "", "keygen", "--if-missing", "--token-file", token, key).check(t, 0, "", "kept "+token)
	if newKey, _ := os.ReadFile(key); string(newKey) != string(oldKey) {
		t.Error("keygen --if-missing replaced an existing swarm key")
	}
	if again, _ := secret.ReadFile(token); again != tok {
		t.Error("keygen --if-missing replaced an existing token")
	}

	// A broken file is not kept silently.
	bad := filepath.Join(dir, "bad.key")
	if err := os.WriteFile(bad, []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	runCLI(t, "", "", "keygen", "--if-missing", bad).check(t, 1, "", "exists but is not valid")

	// --token-file alone writes only the token; no argument prints a swarm key.
	only := filepath.Join(dir, "only.token")
	r := runCLI(t, "", "", "keygen", "--token-file", only)
	r.check(t, 0, "", "wrote "+only)
	if r.stdout != "" {
		t.Errorf("keygen --token-file printed %q; want nothing on stdout", r.stdout)
	}
	if r := runCLI(t, "", "", "keygen"); !strings.HasPrefix(r.stdout, "/key/swarm/psk/1.0.0/") {
		t.Errorf("keygen printed %q; want a swarm key", r.stdout)
	}
	runCLI(t, "", "", "keygen", "a", "b").check(t, 2, "", "at most one file")
}
