package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/needle-mesh/needle/peer/api"
)

// PeersCommand prints the mesh as one peer sees it.
type PeersCommand struct {
	*Globals
	asJSON bool
}

func (c *PeersCommand) flags() *flag.FlagSet {
	fs := c.flagSet("peers")
	fs.BoolVar(&c.asJSON, "json", false, "print the API response as JSON")
	return fs
}

// Usage returns the help of peers.
func (c *PeersCommand) Usage() string {
	return usageOf("usage: needle peers [--json]\n\n"+
		"Prints the peers of the mesh: id, state, build version (unknown for a peer of\n"+
		"an older release), load, last heartbeat, address and labels. A state with\n"+
		",conflict: two live processes run under that peer's identity (a copied data\n"+
		"dir): stop one, delete its data dir and start it again with --join.", c.flags())
}

// Run prints the peers.
func (c *PeersCommand) Run(ctx context.Context, args []string) error {
	pos, err := parse(c.flags(), args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("peers takes no arguments")
	}
	ps, err := c.client().Peers(ctx)
	if err != nil {
		return err
	}
	if c.asJSON {
		return printJSON(c.Stdout, ps)
	}
	tw := tabwriter.NewWriter(c.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tVERSION\tREADY\tRUNNING\tSLOTS\tLAST SEEN\tADDR\tLABELS")
	for _, p := range ps.Peers {
		id := p.ID
		if id == ps.Self {
			id += " (self)"
		}
		addr := "-"
		if len(p.Addrs) > 0 {
			addr = p.Addrs[0]
		}
		seen := time.Since(p.LastSeen).Round(time.Millisecond).String() + " ago"
		labels := strings.Join(p.Labels, ",")
		if labels == "" {
			labels = "-"
		}
		version := p.Version
		if version == "" {
			version = "unknown" // an older peer, or one not heard from yet
		}
		state := p.State
		if p.Conflict {
			state += ",conflict" // two processes under this identity: see the peer's log
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\n", id, state, version, p.Load.Ready, p.Load.Running, p.Load.Slots, seen, addr, labels)
	}
	return tw.Flush()
}

// ForgetCommand removes a peer from the mesh.
type ForgetCommand struct {
	*Globals
	force         bool
	unsafeRecover bool
}

func (c *ForgetCommand) flags() *flag.FlagSet {
	fs := c.flagSet("forget")
	fs.BoolVar(&c.force, "force", false, "forget the peer even if the mesh still hears from it")
	fs.BoolVar(&c.unsafeRecover, "unsafe-recover", false, "the peer's disk is lost for good: recover the partitions left without a majority from their last voter (may lose acknowledged entries where two or more voters are lost)")
	return fs
}

// Usage returns the help of forget.
func (c *ForgetCommand) Usage() string {
	return usageOf("usage: needle forget PEER-ID [--force] [--unsafe-recover]\n\n"+
		"Removes a peer from the membership for good: the partitions it held move to\n"+
		"other peers, and its identity is never taken back. Use it for a host that\n"+
		"will not come back: drain it (needle drain), stop it, and forget it once\n"+
		"needle peers shows it dead. A peer the mesh still hears from is refused\n"+
		"unless --force; a peer dead longer than --forget-after is forgotten anyway.\n\n"+
		"A partition that lost the majority of its voters (both of a 2-peer mesh's,\n"+
		"two of three) cannot commit again, not even the removal of a dead voter.\n"+
		"--unsafe-recover declares the peer's disk lost for good (the peer must\n"+
		"never run again on it): every partition whose other voters are all so\n"+
		"declared is recovered from its last voter's copy, which goes on alone and\n"+
		"takes new replicas. With two voters nothing acknowledged is lost; with\n"+
		"three and two lost, entries only the lost two held are gone for good.\n"+
		"A partition with every voter lost is recovered by a surviving learner\n"+
		"(the one with the most entries), losing what it had not received.\n"+
		"It also applies to a peer forgotten already, and never to a peer the mesh\n"+
		"hears alive (refused, --force or not). A forget that would do nothing (the\n"+
		"peer was forgotten already, and declared lost already if that is asked)\n"+
		"fails saying so (404). See docs/operations.md.", c.flags())
}

// Run forgets the peer.
func (c *ForgetCommand) Run(ctx context.Context, args []string) error {
	pos, err := parse(c.flags(), args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want exactly one peer id")
	}
	if err := c.client().ForgetPeerWith(ctx, pos[0], api.ForgetOptions{Force: c.force, UnsafeRecover: c.unsafeRecover}); err != nil {
		return err
	}
	if c.unsafeRecover {
		fmt.Fprintf(c.Stdout, "forgot %s; its disk is declared lost: partitions left without a majority recover from their last voter\n", pos[0])
		return nil
	}
	fmt.Fprintf(c.Stdout, "forgot %s\n", pos[0])
	return nil
}
