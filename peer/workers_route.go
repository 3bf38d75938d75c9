package peer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/needle-mesh/needle/node"
	"github.com/needle-mesh/needle/peer/api"
)

// A worker reports on a lease to any peer, not only to the one that
// handed it out: behind a load balancer (a Kubernetes Service in front of
// the peers), its poll and its report may reach different peers. A token
// ends with the tag of the peer that holds its lease, and a peer that is
// not the holder forwards the call there over the mesh; the holder
// answers it as its own API would (fencing, repeats, verdicts). A token
// without a tag (a peer of an older version), or whose tag names no peer
// this one knows, is answered here: 404, a lease this peer does not know.

// The parts of a lease token, in hex digits: the random, then the tag.
const (
	tokenRandHex = 32
	leaseTagHex  = 16
)

// leaseTag is the tag of the tokens of peer id.
func leaseTag(id string) string { return fmt.Sprintf("%016x", xxhash.Sum64String(id)) }

// holderOf returns the other peer that handed out lease token, or "":
// this peer (or none known), whose hub answers.
func (p *Peer) holderOf(ctx context.Context, token string) string {
	if len(token) != tokenRandHex+leaseTagHex {
		return ""
	}
	tag := token[tokenRandHex:]
	if tag == p.hub.ownTag() {
		return ""
	}
	if id, ok := p.hub.tags.Load(tag); ok {
		return id.(string)
	}
	var ids []string
	_ = p.read(ctx, func(n *node.Node) error {
		for _, m := range n.Members() {
			if m.ID != n.ID() {
				ids = append(ids, m.ID)
			}
		}
		return nil
	})
	holder := ""
	for _, id := range ids {
		t := leaseTag(id)
		p.hub.tags.Store(t, id)
		if t == tag {
			holder = id
		}
	}
	return holder
}

// What a forwarded lease call does (leaseReq.Do).
const (
	leaseComplete  = "complete"
	leaseFail      = "fail"
	leaseRelease   = "release"
	leaseHeartbeat = "heartbeat"
	leaseLogs      = "logs"
)

// leaseReq is a call on one lease, forwarded to the peer that holds it.
type leaseReq struct {
	rpcHeader
	Lease     string          `json:"lease,omitempty"`
	Do        string          `json:"do,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     string          `json:"error,omitempty"` // a fail's error, a release's reason
	Permanent bool            `json:"permanent,omitempty"`
	Lines     []string        `json:"lines,omitempty"`
	// At holds the times of Lines, by index (zero: none), when any has
	// one; a peer of an older release ignores them (arrival times).
	At []time.Time `json:"at,omitempty"`
}

type leaseAns struct {
	rpcError
	Heartbeat *api.HeartbeatResult `json:"heartbeat,omitempty"`
}

func (*leaseReq) op() string { return opLease }

// serve answers the call on this peer's lease; it never forwards again.
func (r *leaseReq) serve(ctx context.Context, p *Peer) (a leaseAns, err error) {
	h := p.hub
	switch r.Do {
	case leaseComplete:
		err = h.Complete(ctx, r.Lease, r.Result)
	case leaseFail:
		err = h.Fail(ctx, r.Lease, r.Error, r.Permanent)
	case leaseRelease:
		err = h.Release(ctx, r.Lease, r.Error)
	case leaseLogs:
		lines := make([]api.WorkerLogLine, len(r.Lines))
		for i, s := range r.Lines {
			lines[i].Text = s
			if i < len(r.At) && !r.At[i].IsZero() {
				lines[i].At = &r.At[i]
			}
		}
		err = h.Logs(ctx, r.Lease, lines)
	case leaseHeartbeat:
		var hb api.HeartbeatResult
		if hb, err = h.Heartbeat(ctx, r.Lease); err == nil {
			a.Heartbeat = &hb
		}
	default:
		err = fmt.Errorf("peer: forwarded lease call %q", r.Do)
	}
	return a, err
}

// onLease runs req at the peer that holds its lease when that is another
// peer (ok), and returns its answer.
func (p *Peer) onLease(ctx context.Context, req *leaseReq) (a leaseAns, ok bool, err error) {
	to := p.holderOf(ctx, req.Lease)
	if to == "" {
		return a, false, nil
	}
	a, err = forward[leaseAns](ctx, p, to, req)
	if ae := (*api.Error)(nil); errors.Is(err, api.ErrUnavailable) && !errors.As(err, &ae) {
		// The holder did not answer: say so (it said "api: unavailable:
		// forward to ..."), as a request's 503 does.
		err = api.NewError(api.CodeUnavailable, "", fmt.Sprintf("lease %s was handed out by peer %s, which does not answer (%s); "+
			"the call did nothing: retry it", req.Lease, to, strings.TrimPrefix(err.Error(), api.ErrUnavailable.Error()+": ")))
	}
	return a, true, err
}

// leaseReportReq is a batch of outcomes of leases one other peer holds.
type leaseReportReq struct {
	rpcHeader
	Done []api.LeaseOutcome `json:"done,omitempty"`
}

type leaseReportAns struct {
	rpcError
	Errs []rpcError `json:"errs,omitempty"` // one per entry, in order
}

func (*leaseReportReq) op() string { return opLeaseReport }
func (r *leaseReportReq) serve(ctx context.Context, p *Peer) (leaseReportAns, error) {
	errs := p.hub.Report(ctx, r.Done)
	a := leaseReportAns{Errs: make([]rpcError, len(errs))}
	for i, err := range errs {
		a.Errs[i].set(err)
	}
	return a, nil
}

// reportAt applies a batch whose leases may be held by several peers: this
// peer's in its hub, each other holder's in one forwarded call. It
// returns one error per entry, in order.
func (p *Peer) reportAt(ctx context.Context, done []api.LeaseOutcome) []error {
	var local []int
	elsewhere := map[string][]int{}
	for i := range done {
		if to := p.holderOf(ctx, done[i].Lease); to != "" {
			elsewhere[to] = append(elsewhere[to], i)
		} else {
			local = append(local, i)
		}
	}
	if len(elsewhere) == 0 {
		return p.hub.Report(ctx, done)
	}
	errs := make([]error, len(done))
	pick := func(idx []int) []api.LeaseOutcome {
		out := make([]api.LeaseOutcome, len(idx))
		for k, i := range idx {
			out[k] = done[i]
		}
		return out
	}
	if len(local) > 0 {
		for k, err := range p.hub.Report(ctx, pick(local)) {
			errs[local[k]] = err
		}
	}
	for _, to := range slices.Sorted(maps.Keys(elsewhere)) {
		idx := elsewhere[to]
		a, err := forward[leaseReportAns](ctx, p, to, &leaseReportReq{Done: pick(idx)})
		for k, i := range idx {
			switch {
			case err != nil:
				errs[i] = err
			case k < len(a.Errs):
				errs[i] = a.Errs[k].err()
			}
		}
	}
	return errs
}
