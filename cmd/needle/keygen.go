package main

import (
	"context"
	"fmt"
	"os"

	"github.com/needle-mesh/needle/peer/p2p"
)

// KeygenCommand writes a new swarm key (a private-network PSK).
type KeygenCommand struct{ *Globals }

// Usage returns the help of keygen.
func (c *KeygenCommand) Usage() string {
	return usageOf("usage: needle keygen [FILE]\n\n"+
		"Writes a new swarm key to FILE (mode 0600), or to stdout. Copy it to every\n"+
		"host and start each peer with --swarm-key FILE: peers without the key\n"+
		"cannot connect to the mesh.", c.flagSet("keygen"))
}

// Run writes the key.
func (c *KeygenCommand) Run(ctx context.Context, args []string) error {
	pos, err := parse(c.flagSet("keygen"), args)
	if err != nil {
		return err
	}
	switch len(pos) {
	case 0:
		return p2p.GenerateSwarmKey(c.Stdout)
	case 1:
		f, err := os.OpenFile(pos[0], os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return fmt.Errorf("keygen: %w", err)
		}
		if err := p2p.GenerateSwarmKey(f); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	return usagef("want at most one file")
}
