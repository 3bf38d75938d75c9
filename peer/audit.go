package peer

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/peer/api"
	"github.com/needle-mesh/needle/shard"
)

type auditJSON struct {
	At      time.Time `json:"at"`
	Action  string    `json:"action"`
	Subject string    `json:"subject"`
	By      string    `json:"by"`
	Fields  []string  `json:"fields,omitempty"` // schedule_updated: the settings it changed
}

// serveAudit is GET /v1/audit[?limit=N]: the mesh's audit trail, newest
// first, gathered from every live member (each answers for the partitions it
// owns; a member that does not answer in time is left out).
func (p *Peer) serveAudit(w http.ResponseWriter, r *http.Request) {
	limit := 200
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10_000 {
			writeError(w, api.CodeInvalidArgument, "limit: want an integer in 1..10000", "limit")
			return
		}
		limit = n
	}
	entries, err := p.gatherAudit(r.Context())
	if err != nil {
		writeError(w, api.CodeUnavailable, err.Error(), "")
		return
	}
	slices.Reverse(entries)
	out := make([]auditJSON, 0, min(limit, len(entries)))
	for _, e := range entries[:min(limit, len(entries))] {
		a := auditJSON{At: e.At, Action: e.Type.String(), Subject: e.Subject, By: e.By}
		if e.Fields != "" {
			a.Fields = strings.Split(e.Fields, ",")
		}
		out = append(out, a)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"entries": out})
}

// liveOthers returns the ids of the live members other than n.
func liveOthers(n *node.Node) []string {
	var ids []string
	for _, m := range n.Members() {
		if m.ID != n.ID() && m.State == node.PeerAlive {
			ids = append(ids, m.ID)
		}
	}
	return ids
}

func (p *Peer) gatherAudit(ctx context.Context) ([]shard.AuditEntry, error) {
	var members []string
	var out []shard.AuditEntry
	err := p.read(ctx, func(n *node.Node) error {
		out, members = n.Audit(), liveOthers(n)
		return nil
	})
	if err != nil {
		return nil, err
	}
	askAll(ctx, p, members, &auditReq{}, func(a *auditAns) { out = append(out, a.Audit...) })
	slices.SortStableFunc(out, func(a, b shard.AuditEntry) int { return a.At.Compare(b.At) })
	return out, nil
}
