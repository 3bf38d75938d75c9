package main

import (
	"fmt"
	"io"

	"github.com/needle-mesh/needle/peer"
)

// RunInit is --init: it creates the data dir as a first start would (the
// WAL and its mesh settings, then the identity key), or opens the one
// there, and prints the peer id on the first line, then each multiaddr the
// peer would listen on (--listen, with /p2p/<id>), one a line. The
// operator of a mesh started with --initial-peers learns every peer's id
// this way before any starts.
func (m *Main) RunInit(out io.Writer) error {
	if _, err := m.prepare(); err != nil {
		return usageError{err}
	}
	id, addrs, err := peer.Init(m.Config)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, id)
	for _, a := range addrs {
		fmt.Fprintln(out, a)
	}
	return nil
}
