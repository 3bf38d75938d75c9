package peer

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/peer/api"
	"github.com/needle-mesh/needle/shard"
)

// peersJSON is GET /v1/peers (docs/api.md, "The mesh and operations").
type peersJSON struct {
	Self  string         `json:"self"`
	Peers []peerJSON     `json:"peers"`
	Stats node.NodeStats `json:"stats"`
	Node  node.Stats     `json:"node"`
}

type peerJSON struct {
	ID       string    `json:"id"`
	Addrs    []string  `json:"addrs"`
	State    string    `json:"state"`
	Load     loadJSON  `json:"load"`
	LastSeen time.Time `json:"last_seen"`
	Labels   []string  `json:"labels"` // placement labels, "key=value", sorted
	// Version is the peer's build version (its needle_build_info
	// version), as the peer itself gossips it: "" when unknown (a peer of a release
	// before it gossiped one, or one not heard from yet).
	Version string `json:"version"`
	// Conflict: this peer hears two live processes under that peer's
	// identity (its data dir was copied to another host; node/twins.go).
	Conflict bool `json:"conflict,omitempty"`
}

type loadJSON struct {
	Ready   int `json:"ready"`
	Running int `json:"running"`
	Slots   int `json:"slots"`
	// Stranded counts the READY tasks (of ready) the peer cannot run
	// itself: pinned elsewhere or requiring labels it lacks; StrandedFor
	// names the peers that may (up to 32; omitted when not named).
	Stranded    int      `json:"stranded"`
	StrandedFor []string `json:"stranded_for,omitempty"`
}

func (p *Peer) servePeers(w http.ResponseWriter, r *http.Request) {
	var out peersJSON
	err := p.read(r.Context(), func(n *node.Node) error {
		out.Self = n.ID()
		out.Stats = n.Counters()
		out.Node = n.Stats()
		self := n.SelfLoad()
		for _, m := range n.Members() {
			pj := peerJSON{ID: m.ID, Addrs: m.Addrs, State: m.State.String(), LastSeen: m.LastSeen.UTC(),
				Load: loadJSON{m.Load.Ready, m.Load.Running, m.Load.Slots, m.Stranded, m.StrandedFor}, Labels: m.Labels,
				Version: m.Version, Conflict: m.Conflict}
			if pj.Labels == nil {
				pj.Labels = []string{}
			}
			if m.ID == out.Self {
				pj.Load = loadJSON{self.Ready, self.Running, self.Slots, out.Node.Stranded, nil}
				if out.Node.Stranded > 0 {
					pj.Load.StrandedFor = n.StrandedFor()
				}
				pj.Addrs = p.tr.Addrs()
			}
			out.Peers = append(out.Peers, pj)
		}
		return nil
	})
	if err != nil {
		writeError(w, api.CodeUnavailable, err.Error(), "")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// serveForget removes a peer from the membership (needle forget).
func (p *Peer) serveForget(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if id == "" || id == p.tr.ID() {
		writeError(w, api.CodeInvalidArgument, "cannot forget this peer itself or an empty id", "id")
		return
	}
	// An id that cannot be a peer's is a 400, as a malformed task or
	// group id is (peer/api/ids.go), not a 404 "no member".
	if !p.validID(id) {
		writeError(w, api.CodeInvalidArgument, fmt.Sprintf("malformed peer id %.100q; want one that needle peers lists (12D3KooW...)", id), "id")
		return
	}
	force, ok := boolParam(w, r, "force")
	if !ok {
		return
	}
	// unsafe_recover also declares the peer's disk lost for good: the
	// partitions whose every other voter is so marked are recovered from
	// their last voter's copy (node/recover.go). It applies to a peer
	// forgotten already too: a forgotten id never comes back, so its copy
	// can never serve again, and a 2-voter partition it left behind
	// cannot commit its removal without it.
	unsafeRecover, ok := boolParam(w, r, "unsafe_recover")
	if !ok {
		return
	}
	// force never makes a live peer's disk lost: the mesh hears from it,
	// and recovering its partitions without it would let both it and the
	// recovered copies take writes (a split brain). Refused, 409.
	allowLive := force && !unsafeRecover
	var known, alive, forgotten, marked bool
	member := func(n *node.Node) {
		known, alive = false, false
		for _, m := range n.Members() {
			if m.ID == id {
				known, alive = true, m.State == node.PeerAlive
			}
		}
		forgotten = !known && n.IsForgotten(id)
		marked = forgotten && slices.Contains(n.UnsafeRecover(), id)
	}
	// acts reports whether the request changes anything: a member is
	// forgotten (a live one only when forced), a forgotten peer's loss
	// declared final. A repeat does nothing and is answered so (404).
	acts := func() bool { return known && (!alive || allowLive) || forgotten && unsafeRecover && !marked }
	err := p.read(r.Context(), func(n *node.Node) error { member(n); return nil })
	audited, acted := false, false
	if err == nil && acts() {
		if !unsafeRecover {
			// Recorded first, while the peer still counts: a forced forget
			// of a live peer that led the entry's partition would leave it
			// without a leader until another is elected.
			audited = p.auditPeer(r.Context(), shard.EvPeerForgotten, id, api.By(r))
		}
		err = p.read(r.Context(), func(n *node.Node) error {
			member(n)
			switch acted = acts(); {
			case acted && unsafeRecover:
				n.ForgetUnsafeRecover(id) // forgotten before: marks it lost
			case acted:
				n.Forget(id)
			}
			return nil
		})
		if err == nil && acted && unsafeRecover {
			// Recorded after: the entry's partition may be one that
			// commits only once recovered.
			audited = p.auditPeer(r.Context(), shard.EvPeerForgotten, id, api.By(r))
		}
	}
	switch {
	case err != nil:
		writeError(w, api.CodeUnavailable, err.Error(), "")
	case forgotten && !acted:
		writeError(w, api.CodeNotFound, forgottenAlready(id, marked), "id")
	case !known && !forgotten:
		writeError(w, api.CodeNotFound, "no member "+id, "id")
	case alive && unsafeRecover:
		writeError(w, api.CodeConflict, "peer "+id+" is alive (the mesh hears from it): its disk is not lost, and recovering "+
			"its partitions without it would let both sides take writes; unsafe_recover never applies to a live peer, "+
			"force or not: stop it for good first, and run it once it shows dead", "id")
	case alive && !force:
		// A forgotten id is never taken back: a mistyped id, or a
		// forget before the stop, would ban a healthy host for good.
		writeError(w, api.CodeConflict, "peer "+id+" is alive (the mesh hears from it): drain and stop it first, "+
			"and forget it once it shows dead; a forgotten id never comes back (force=true forgets it anyway)", "id")
	default:
		p.log.Warn("peer forgotten by operator", keyPeer, id, "by", api.By(r), "unsafe_recover", unsafeRecover)
		w.Header().Set("Content-Type", "application/json")
		body := `{"forgotten":` + string(mustJSON(id)) + `,"audited":` + strconv.FormatBool(audited)
		if unsafeRecover {
			body += `,"unsafe_recover":true`
		}
		_, _ = w.Write([]byte(body + `}`))
	}
}

// forgottenAlready is the 404's message of a forget that does nothing:
// peer id was forgotten already (here, or by another peer whose heartbeats
// spread it), and its loss declared final already (marked) when that was
// asked too. Unmarked, it says how to declare it.
func forgottenAlready(id string, marked bool) string {
	msg := "peer " + id + " was forgotten already: a forgotten id never comes back; nothing to do"
	if marked {
		return msg + "; its disk was declared lost for good already (unsafe_recover): the partitions " +
			"it left without a majority recover from their last voter"
	}
	return msg + "; if its disk is lost for good and partitions lost the majority of their voters (GET /healthz " +
		"names them), unsafe_recover=true (needle forget ID --unsafe-recover) declares its loss final"
}

// boolParam reads the boolean query parameter name ("" is false); it
// answers 400 naming it, and returns false, for another value or for the
// parameter given more than once.
func boolParam(w http.ResponseWriter, r *http.Request, name string) (v, ok bool) {
	if vs := r.URL.Query()[name]; len(vs) > 1 {
		// ?unsafe_recover=true&unsafe_recover=false: Get would take the
		// first and act on a flag the caller also said no to.
		writeError(w, api.CodeInvalidArgument, fmt.Sprintf("given %d times (%s): give it once", len(vs), strings.Join(vs, ", ")), name)
		return false, false
	}
	switch s := r.URL.Query().Get(name); s {
	case "", "false", "0":
		return false, true
	case "true", "1":
		return true, true
	default:
		writeError(w, api.CodeInvalidArgument, fmt.Sprintf("%q: want true or false", s), name)
		return false, false
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// writeError writes the error body of a code of the API's vocabulary.
func writeError(w http.ResponseWriter, code, msg, field string) {
	e := api.NewError(code, field, msg)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(api.ErrorBody{Error: e})
}
