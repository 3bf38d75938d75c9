package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/needle-mesh/needle/cmd/internal/secret"
	"github.com/needle-mesh/needle/peer/p2p"
)

// KeygenCommand writes a new swarm key (a private-network PSK) and, with
// --token-file, an API token.
type KeygenCommand struct{ *Globals }

// Usage returns the help of keygen.
func (c *KeygenCommand) Usage() string {
	return usageOf("usage: needle keygen [--if-missing] [--token-file TOKEN_FILE] [FILE]\n\n"+
		"Writes a new swarm key to FILE (mode 0600), or to stdout. Copy it to every\n"+
		"host and start each peer with --swarm-key FILE: peers without the key\n"+
		"cannot connect to the mesh. --token-file also writes a random API token to\n"+
		"TOKEN_FILE, for NEEDLE_API_TOKEN_FILE (alone, it writes only the token).\n"+
		"With --if-missing a file that exists and holds a valid key is kept, so a\n"+
		"container's entrypoint can run keygen at every start.",
		c.flags(new(bool), new(string)))
}

func (c *KeygenCommand) flags(ifMissing *bool, token *string) *flag.FlagSet {
	fs := c.flagSet("keygen")
	fs.BoolVar(ifMissing, "if-missing", false, "keep a FILE or TOKEN_FILE that exists and is valid instead of failing")
	fs.StringVar(token, "token-file", "", "also write a random API token to this `file` (mode 0600)")
	return fs
}

// Run writes the key and the token.
func (c *KeygenCommand) Run(ctx context.Context, args []string) error {
	var ifMissing bool
	var token string
	pos, err := parse(c.flags(&ifMissing, &token), args)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return usagef("want at most one file")
	}
	if len(pos) == 0 && token == "" {
		return p2p.GenerateSwarmKey(c.Stdout)
	}
	if len(pos) == 1 {
		valid := func(path string) error { _, err := p2p.LoadSwarmKey(path); return err }
		if err := c.write(pos[0], ifMissing, p2p.GenerateSwarmKey, valid); err != nil {
			return err
		}
	}
	if token != "" {
		valid := func(path string) error { _, err := secret.ReadFile(path); return err }
		return c.write(token, ifMissing, generateToken, valid)
	}
	return nil
}

// write creates path (mode 0600, never replacing a file) and fills it with
// gen. With ifMissing, a path that exists and passes valid is kept.
func (c *KeygenCommand) write(path string, ifMissing bool, gen func(io.Writer) error, valid func(string) error) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) && ifMissing {
		if err := valid(path); err != nil {
			return fmt.Errorf("%s exists but is not valid (delete it to write a new one): %w", path, err)
		}
		fmt.Fprintf(c.Stderr, "keygen: kept %s\n", path)
		return nil
	}
	if err != nil {
		return err
	}
	if err := gen(f); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return err
	}
	fmt.Fprintf(c.Stderr, "keygen: wrote %s\n", path)
	return nil
}

// generateToken writes a random API token: 32 bytes as 64 hex digits and
// a newline.
func generateToken(w io.Writer) error {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return fmt.Errorf("generate token: %w", err)
	}
	if _, err := fmt.Fprintln(w, hex.EncodeToString(b[:])); err != nil {
		return fmt.Errorf("write token: %w", err)
	}
	return nil
}
