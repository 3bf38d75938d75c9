package steal

import (
	"time"
)

// Load is one peer's load as gossiped on needle/load/1 or carried by a grant
// reply.
type Load struct {
	Peer    string    // the peer's id
	Ready   int       // READY tasks in the partitions it owns
	Running int       // tasks leased to it: running, or queued for a slot
	Slots   int       // its worker slots
	At      time.Time // when observed, on the receiver's clock
}

// Free returns the peer's free worker slots (negative when it holds more
// leased tasks than slots).
func (l Load) Free() int { return l.Slots - l.Running }

// Stats are the counters a peer exports about its stealing.
type Stats struct {
	Asked   int // steal requests sent (Next or Ask returned ok)
	Granted int // replies that granted at least one task
	Refused int // refusals and empty grants
	Expired int // requests abandoned unanswered after Config.RequestTTL
	Stolen  int // tasks received in grants
	Sampled int // of Asked, blind asks (Sample)
	NotNow  int // replies that granted nothing until a slot frees (tail.go)
}

// peerState is what a Thief knows of one peer.
type peerState struct {
	load  Load          // latest observed load
	until time.Time     // backoff: the peer is not asked before this
	next  time.Duration // backoff: the wait after the next refusal, 0 = BackoffMin
}

// Thief decides when its peer steals, from whom and how much. It is a pure
// state machine: time comes in as an argument and randomness from
// Config.Rand, so the same seed and inputs give the same decisions. It is
// not safe for concurrent use; the peer's loop owns it.
type Thief struct {
	cfg Config
	// peers are the known peers in the order they were first observed
	// (a forgotten one's place goes to the last): the draw order, which
	// depends only on the inputs. byID indexes them: a binary search over
	// a sorted list cost each observation of a new peer a move of the
	// list's tail, and a peer of a 5,000-peer mesh observes every other.
	peers   []peerState
	byID    map[string]int
	asked   string    // victim of the outstanding request, "" if none
	askedAt time.Time // when the outstanding request was sent
	cands   []int     // scratch for Next: indexes into peers
	loaded  int       // peers whose load has READY tasks: none, Next and NextAt look no further
	stats   Stats
	// sampleAt is when Sample may ask blind again (zero until it first
	// has), sampleNext the wait after the next blind ask (0 = SampleMin).
	sampleAt   time.Time
	sampleNext time.Duration
	sampleIdle bool      // the last Sample found nobody to ask
	names      []string  // scratch for Sample
	tailUntil  time.Time // Ahead is false before this (NotNow)
}

// New returns a Thief that knows no peer yet.
func New(cfg Config) (*Thief, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Thief{cfg: cfg, byID: map[string]int{}}, nil
}

// find returns the index of peer in t.peers.
func (t *Thief) find(peer string) (int, bool) {
	i, ok := t.byID[peer]
	return i, ok
}

// Observe records a peer's load, from gossip or from a grant reply. It keeps
// the latest observation per peer: one older than the one held (gossip
// arrives out of order) is ignored. A load with an empty Peer is ignored.
//
// A peer not known here whose load has no READY task is not recorded: it
// is what an unknown peer is taken for (nothing to take, no backoff). Every
// peer observes every other at its probes, and a table of every member
// (a million entries in a 1,000-peer mesh) cost a cache miss per
// observation; the table holds the peers that had READY tasks or were
// refused asking. An older observation that arrives after such a one is
// taken as the latest (the peer's own clock does not stamp them: At is
// the receiver's).
//
// While no peer known here has READY tasks, a load without any changes
// nothing a thief decides by (only a loaded peer's load is read), and it
// is not looked up: at 1,000 idle peers that lookup, at every probe, was
// a tenth of what the formed mesh cost.
func (t *Thief) Observe(l Load) {
	if l.Peer == "" || l.Ready <= 0 && t.loaded == 0 {
		return
	}
	i, known := t.find(l.Peer)
	switch {
	case !known && l.Ready <= 0:
	case !known:
		t.byID[l.Peer] = len(t.peers)
		t.peers = append(t.peers, peerState{load: l})
		t.loaded += b2i(l.Ready > 0)
	case !l.At.Before(t.peers[i].load.At):
		p := &t.peers[i]
		if l.Ready > 0 && p.load.Ready <= 0 {
			// Work came since it was last seen without any: the backoff
			// was for a peer with nothing to give (a refusal's reply, or
			// blind asks of an idle mesh that doubled it to seconds), and
			// it may be asked at once. A peer that refuses while it holds
			// READY tasks stays in backoff: its load never went empty.
			p.until = time.Time{}
		}
		t.loaded += b2i(l.Ready > 0) - b2i(p.load.Ready > 0)
		p.load = l
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Forget drops everything known about a peer that died or left, backoff
// included. A request outstanding to it is abandoned (no reply will come).
func (t *Thief) Forget(peer string) {
	if i, ok := t.find(peer); ok {
		t.loaded -= b2i(t.peers[i].load.Ready > 0)
		last := len(t.peers) - 1
		if i != last {
			t.peers[i] = t.peers[last]
			t.byID[t.peers[i].load.Peer] = i
		}
		t.peers[last] = peerState{}
		t.peers = t.peers[:last]
		delete(t.byID, peer)
	}
	if t.asked == peer {
		t.asked = ""
	}
}

// Next decides whether to steal now. It returns a victim and how many tasks
// to ask it for when self (this peer's own load, Peer set to its id) has a
// free slot and no READY task of its own, no request is outstanding (or the
// outstanding one is older than RequestTTL: it is then abandoned and its
// victim backs off), and some other known peer with a fresh load and no
// backoff has READY tasks. The victim is the better of two distinct
// candidates drawn at random (power of two choices): more Ready, then more
// Ready per slot, then the lexically smaller id. n is half the victim's
// Ready, at least 1, at most Prefetch times self's free slots and at most
// MaxBatch. When ok, the request counts as outstanding from now on: send it
// and report the reply with Granted or Refused.
func (t *Thief) Next(now time.Time, self Load) (victim string, n int, ok bool) {
	if _, out := t.Pending(now); out {
		return "", 0, false
	}
	free := self.Free()
	if free <= 0 || self.Ready > 0 {
		return "", 0, false
	}
	i, ok := t.pick(now, self.Peer)
	if !ok {
		return "", 0, false
	}
	l := t.peers[i].load
	n = min(t.cfg.MaxBatch, max(1, l.Ready/2), free*Prefetch)
	t.asked, t.askedAt = l.Peer, now
	t.stats.Asked++
	return l.Peer, n, true
}

// sampleDraws is how many members Sample draws at random before it lists
// the ones it may ask.
const sampleDraws = 8

// Sample is Next's fallback when no known peer advertises READY tasks:
// it asks a peer drawn at random among members (sorted; self, peers in
// backoff and peers live rejects are skipped: live(i) judges members[i])
// for up to free slots' worth, at most once per sample wait
// (Config.SampleMin doubling to SampleMax; a grant starts it again at
// SampleMin). Peers announce their load when
// it changes, not periodically, so an announcement lost on the way, or
// overtaken by an older load (a steal request sent before its sender's
// work arrived), leaves a loaded peer known here as empty for as long as
// it stays loaded; a blind ask finds it. With nobody to ask it looks
// again SampleMin later, at a call rather than a time (NextAt). The
// conditions and the contract are Next's: when ok, send the request and
// report the reply.
func (t *Thief) Sample(now time.Time, self Load, members []string, live func(i int) bool) (victim string, n int, ok bool) {
	if _, out := t.Pending(now); out {
		return "", 0, false
	}
	free := self.Free()
	if free <= 0 || self.Ready > 0 || now.Before(t.sampleAt) {
		return "", 0, false
	}
	askable := func(i int) bool {
		id := members[i]
		if id == self.Peer || !live(i) {
			return false
		}
		k, known := t.find(id)
		return !known || !now.Before(t.peers[k].until)
	}
	// A few draws find one at once when most members may be asked (a
	// settled mesh); else the members that may are listed and one drawn.
	for range min(sampleDraws, len(members)) {
		if i := t.cfg.Rand.IntN(len(members)); askable(i) {
			victim = members[i]
			break
		}
	}
	c := t.names[:0]
	if victim == "" {
		for i, id := range members {
			if askable(i) {
				c = append(c, id)
			}
		}
	}
	t.names = c
	if victim == "" && len(c) == 0 {
		// Nobody to ask: look again after SampleMin at the earliest (a
		// forming mesh names thousands of members it cannot ask yet), and
		// NextAt does not wake for it.
		t.sampleAt, t.sampleIdle = now.Add(t.cfg.SampleMin), true
		return "", 0, false
	}
	t.sampleIdle = false
	if victim == "" {
		victim = c[t.cfg.Rand.IntN(len(c))]
	}
	d := t.sampleNext
	if d <= 0 {
		d = t.cfg.SampleMin
	}
	t.sampleAt, t.sampleNext = now.Add(d), min(2*d, t.cfg.SampleMax)
	t.asked, t.askedAt = victim, now
	t.stats.Asked++
	t.stats.Sampled++
	return victim, min(t.cfg.MaxBatch, free), true
}

// NextAt returns the earliest time at which Next, asked with no new
// observation or reply, could ask a peer other than self: when the
// request in flight expires (RequestTTL), or when the first peer with
// READY tasks and a load still fresh then leaves its backoff. ok is false
// when no known peer could be asked before its load goes stale. The
// caller also needs a free slot and no READY task of its own: NextAt does
// not look at them.
func (t *Thief) NextAt(now time.Time, self string) (at time.Time, ok bool) {
	if t.asked != "" {
		return t.askedAt.Add(t.cfg.RequestTTL), true
	}
	if !t.sampleAt.IsZero() && !t.sampleIdle { // Sample has asked: it may ask again then
		at, ok = later(now, t.sampleAt), true
	}
	for i := range t.peers {
		if t.loaded == 0 {
			break
		}
		p := &t.peers[i]
		if p.load.Ready <= 0 || p.load.Peer == self {
			continue
		}
		when := later(now, p.until)
		if when.Sub(p.load.At) > t.cfg.StaleAfter {
			continue // stale before it may be asked
		}
		if !ok || when.Before(at) {
			at, ok = when, true
		}
	}
	return at, ok
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// pick draws the victim among the eligible peers, in the order of
// t.peers, so that the draw depends only on the seed and the inputs.
func (t *Thief) pick(now time.Time, self string) (int, bool) {
	if t.loaded == 0 {
		return 0, false
	}
	c := t.cands[:0]
	freshSince := now.Add(-t.cfg.StaleAfter)
	for i := range t.peers {
		if eligible(&t.peers[i], now, freshSince) && t.peers[i].load.Peer != self {
			c = append(c, i)
		}
	}
	t.cands = c
	switch len(c) {
	case 0:
		return 0, false
	case 1:
		return c[0], true
	}
	i := t.cfg.Rand.IntN(len(c))
	j := t.cfg.Rand.IntN(len(c) - 1)
	if j >= i {
		j++
	}
	if better(&t.peers[c[j]].load, &t.peers[c[i]].load) {
		return c[j], true
	}
	return c[i], true
}

// eligible reports whether a peer may be asked now: it has READY tasks, its
// load was observed at or after freshSince (now - StaleAfter) and it is not
// in backoff.
func eligible(p *peerState, now, freshSince time.Time) bool {
	return p.load.Ready > 0 && !p.load.At.Before(freshSince) && !now.Before(p.until)
}

// better reports whether a is a better victim than b: more Ready, then more
// Ready per slot (a peer with no slot counts as the most loaded), then the
// smaller id.
func better(a, b *Load) bool {
	if a.Ready != b.Ready {
		return a.Ready > b.Ready
	}
	sa, sb := a.Slots, b.Slots
	switch {
	case sa <= 0 && sb > 0:
		return true
	case sb <= 0 && sa > 0:
		return false
	case sa > 0 && sb > 0 && sa != sb:
		return sa < sb // same Ready, fewer slots: more Ready per slot
	}
	return a.Peer < b.Peer
}

// Granted reports a grant reply from victim carrying got tasks. got == 0 is
// an empty grant and counts as a refusal. A non-empty grant ends the
// victim's backoff. The reply's load goes to Observe separately.
func (t *Thief) Granted(now time.Time, victim string, got int) {
	if got <= 0 {
		t.Refused(now, victim)
		return
	}
	t.answered(victim)
	t.stats.Granted++
	t.stats.Stolen += got
	t.sampleNext = 0
	if i, ok := t.find(victim); ok {
		t.peers[i].until, t.peers[i].next = time.Time{}, 0
	}
}

// NotNow reports that victim granted nothing because this thief had no
// free slot while the victim's backlog is in its tail (TailCap): no
// backoff, the thief asks again when a slot frees, and it asks for no
// more than its free slots (Ahead) for TailHold.
func (t *Thief) NotNow(now time.Time, victim string) {
	t.answered(victim)
	t.stats.NotNow++
	t.tailUntil = now.Add(TailHold)
}

// Ahead reports whether asking for tasks beyond the free slots is worth
// it: not within TailHold of a "not now" (NotNow).
func (t *Thief) Ahead(now time.Time) bool { return !now.Before(t.tailUntil) }

// Refused reports that victim refused a request (or could not be reached):
// it is not asked again for the current backoff, which doubles with every
// refusal in a row from BackoffMin up to BackoffMax.
func (t *Thief) Refused(now time.Time, victim string) {
	asked := t.asked == victim
	t.answered(victim)
	t.stats.Refused++
	t.refuse(now, victim, asked)
}

// answered ends the outstanding request when victim is its target. A late
// reply from an abandoned request to another victim leaves the current one
// outstanding.
func (t *Thief) answered(victim string) {
	if t.asked == victim {
		t.asked = ""
	}
}

// refuse puts victim in backoff. One not known here is recorded when it
// is the victim asked (asked: an idle peer Observe did not record); any
// other (forgotten, or a late reply to a request abandoned) is not
// tracked, so the state stays bounded by the peers asked and loaded.
func (t *Thief) refuse(now time.Time, victim string, asked bool) {
	i, ok := t.find(victim)
	if !ok {
		if !asked {
			return
		}
		i = len(t.peers)
		t.byID[victim] = i
		t.peers = append(t.peers, peerState{load: Load{Peer: victim}})
	}
	p := &t.peers[i]
	d := p.next
	if d <= 0 {
		d = t.cfg.BackoffMin
	}
	p.until, p.next = now.Add(d), min(2*d, t.cfg.BackoffMax)
}

// Pending returns the victim of the request in flight, first abandoning it
// (counted in Stats.Expired; the victim backs off) when it is older than
// RequestTTL.
func (t *Thief) Pending(now time.Time) (victim string, ok bool) {
	if t.asked != "" && now.Sub(t.askedAt) >= t.cfg.RequestTTL {
		t.stats.Expired++
		t.refuse(now, t.asked, true)
		t.asked = ""
	}
	return t.asked, t.asked != ""
}

// Ask records a request the peer sends outside Next: to victim, for work
// that only a few peers may run (pinned or labelled tasks), which a busy
// peer asks for although it has work of its own. It reports false, and
// records nothing, when a request is in flight or victim is in backoff;
// when true, the request is outstanding as one from Next is: report its
// reply with Granted or Refused.
func (t *Thief) Ask(now time.Time, victim string) bool {
	if _, out := t.Pending(now); out || now.Before(t.BackoffUntil(victim)) {
		return false
	}
	t.asked, t.askedAt = victim, now
	t.stats.Asked++
	return true
}

// Outstanding returns the victim of the request in flight and when it was
// sent; ok is false when none is.
func (t *Thief) Outstanding() (victim string, since time.Time, ok bool) {
	return t.asked, t.askedAt, t.asked != ""
}

// BackoffUntil returns when peer may be asked again; the zero time when it
// is not in backoff.
func (t *Thief) BackoffUntil(peer string) time.Time {
	if i, ok := t.find(peer); ok {
		return t.peers[i].until
	}
	return time.Time{}
}

// Stats returns the counters so far.
func (t *Thief) Stats() Stats { return t.stats }
