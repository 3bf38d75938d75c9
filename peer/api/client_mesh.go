package api

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// Peers is GET /v1/peers.
type Peers struct {
	Self  string         `json:"self"`
	Peers []Peer         `json:"peers"`
	Stats map[string]int `json:"stats,omitempty"`
}

// Peer is one member of the mesh as a peer sees it.
type Peer struct {
	ID       string    `json:"id"`
	Addrs    []string  `json:"addrs"`
	State    string    `json:"state"` // alive, suspect, dead
	Load     PeerLoad  `json:"load"`
	LastSeen time.Time `json:"last_seen"`
	Labels   []string  `json:"labels,omitempty"` // placement labels, "key=value", sorted
	// Version is the peer's build version; "" when unknown (a peer of an
	// older release, or one not heard from yet).
	Version string `json:"version,omitempty"`
	// Conflict: the peer asked hears two live processes under this
	// peer's identity (a data dir copied to another host).
	Conflict bool `json:"conflict,omitempty"`
}

// PeerLoad is a peer's gossiped load.
type PeerLoad struct {
	Ready   int `json:"ready"`
	Running int `json:"running"`
	Slots   int `json:"slots"`
	// Stranded counts READY tasks (of Ready) the peer cannot run itself;
	// StrandedFor names the peers that may (up to 32; empty when not
	// named).
	Stranded    int      `json:"stranded,omitempty"`
	StrandedFor []string `json:"stranded_for,omitempty"`
}

// Peers returns the mesh as the peer at BaseURL sees it.
func (c *Client) Peers(ctx context.Context) (*Peers, error) {
	var out Peers
	_, err := c.do(ctx, http.MethodGet, "/v1/peers", nil, &out)
	return &out, err
}

// Forget removes a peer from the membership: its replicas move elsewhere.
func (c *Client) Forget(ctx context.Context, id string) error { return c.ForgetPeer(ctx, id, false) }

// ForgetPeer is Forget; force forgets a peer the mesh still hears from
// (refused otherwise: 409 conflict).
func (c *Client) ForgetPeer(ctx context.Context, id string, force bool) error {
	return c.ForgetPeerWith(ctx, id, ForgetOptions{Force: force})
}

// ForgetOptions are the options of ForgetPeerWith.
type ForgetOptions struct {
	// Force forgets a peer the mesh still hears from (refused otherwise:
	// 409 conflict).
	Force bool
	// UnsafeRecover also declares the peer's disk lost for good: every
	// partition whose other voters are all so declared is recovered from
	// its last voter's copy (entries only the lost voters held are lost:
	// see docs/operations.md). It applies to a peer forgotten already too.
	UnsafeRecover bool
}

// ForgetPeerWith is ForgetPeer with its options.
func (c *Client) ForgetPeerWith(ctx context.Context, id string, o ForgetOptions) error {
	q := url.Values{}
	if o.Force {
		q.Set("force", "true")
	}
	if o.UnsafeRecover {
		q.Set("unsafe_recover", "true")
	}
	path := "/v1/peers/" + url.PathEscape(id) + "/forget"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	_, err := c.do(ctx, http.MethodPost, path, []byte("{}"), nil)
	return err
}

// Drain asks the peer to drain and exit (as SIGTERM does).
func (c *Client) Drain(ctx context.Context) error {
	_, err := c.do(ctx, http.MethodPost, "/v1/drain", []byte("{}"), nil)
	return err
}

// Workers returns the live external workers of the whole mesh.
func (c *Client) Workers(ctx context.Context) (*WorkerList, error) {
	var out WorkerList
	_, err := c.do(ctx, http.MethodGet, "/v1/workers", nil, &out)
	return &out, err
}
