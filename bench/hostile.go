package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/needle-mesh/needle/peer/p2p"
)

// HostileConfig says how to attack a mesh. Zero fields take defaults.
type HostileConfig struct {
	// Needled is the path of the needled binary. Required unless Start is set.
	Needled string
	// Peers is the size of the mesh (default 3).
	Peers int
	// Duration is how long the clients attack (default 10 min).
	Duration time.Duration
	// Seed makes the requests and messages reproducible (as far as the
	// mesh's answers allow).
	Seed uint64
	// Clients is the number of concurrent HTTP clients (default 4).
	Clients int
	// Wire turns the keyed host sending random wire messages on
	// (HostileConfig{} has it off; DefaultHostile turns it on).
	Wire bool
	// WireTypes names the message types the keyed host sends (raft,
	// heartbeat, outcome, ack, steal, grant); nil: all of them.
	WireTypes []string
	// DataDir is where the peers' data directories go (default os.TempDir).
	DataDir string
	// FinishTimeout bounds the wait, once the attack stops, for every
	// acknowledged task to finish (default 2 min).
	FinishTimeout time.Duration
	// Keep, when the mesh did not hold, leaves it running (its addresses
	// logged) until ctx is done, to look at.
	Keep bool
	// Logger receives progress; nil discards it.
	Logger *slog.Logger
	// Start launches one peer; nil runs Needled (ExecStart).
	Start StartFunc
}

// DefaultHostile is the configuration `needle hostile` starts from.
func DefaultHostile() HostileConfig {
	return HostileConfig{Peers: 3, Duration: 10 * time.Minute, Clients: 4, Wire: true, FinishTimeout: 2 * time.Minute}
}

// HostileReport is what an attack found. OK says whether the mesh held.
type HostileReport struct {
	Seed     uint64 `json:"seed"`
	Peers    int    `json:"peers"`
	Duration string `json:"duration"`
	// Requests counts the HTTP answers by status ("201", "400", ...) and
	// transport errors as "error".
	Requests map[string]int `json:"requests"`
	// Internal lists a sample of 500 answers (a 500 is a bug).
	Internal []string `json:"internal,omitempty"`
	// WireSent counts the frames the keyed host sent by kind.
	WireSent map[string]int `json:"wire_sent,omitempty"`
	// Acked is the number of tasks the mesh acknowledged (2xx on a submit);
	// Finished how many of them reached a terminal state by the end.
	Acked    int `json:"acked"`
	Finished int `json:"finished"`
	// Unfinished names up to 20 acknowledged tasks that did not finish.
	Unfinished []string `json:"unfinished,omitempty"`
	// Crashes lists the peers that exited, with the tail of their output.
	Crashes []string `json:"crashes,omitempty"`
	// Logs holds the tail of each peer's output when a task did not finish.
	Logs []string `json:"logs,omitempty"`
	// History is the event history (GET /v1/tasks/{id}/events) of up to
	// three tasks left unfinished, one line per event: what the log says
	// happened to them.
	History []string `json:"history,omitempty"`
}

// OK reports whether no peer crashed, nothing answered 500 and every
// acknowledged task finished.
func (r *HostileReport) OK() bool {
	return len(r.Crashes) == 0 && len(r.Internal) == 0 && r.Acked == r.Finished
}

// Hostile starts a mesh with a swarm key, attacks it for cfg.Duration with
// random valid-shaped API requests (each field sometimes replaced by a
// hostile value) and, with cfg.Wire, random wire messages from a host that
// holds the swarm key but is no member; then cancels what it submitted
// with hostile values, and checks that no peer crashed and that every
// task the mesh acknowledged finished.
func Hostile(ctx context.Context, cfg HostileConfig) (*HostileReport, error) {
	d := DefaultHostile()
	if cfg.Peers <= 0 {
		cfg.Peers = d.Peers
	}
	if cfg.Duration <= 0 {
		cfg.Duration = d.Duration
	}
	if cfg.Clients <= 0 {
		cfg.Clients = d.Clients
	}
	if cfg.FinishTimeout <= 0 {
		cfg.FinishTimeout = d.FinishTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	keyDir, err := os.MkdirTemp(cfg.DataDir, "needle-hostile-*")
	if err != nil {
		return nil, fmt.Errorf("hostile: %w", err)
	}
	defer os.RemoveAll(keyDir)
	keyFile := filepath.Join(keyDir, "swarm.key")
	if err := writeSwarmKey(keyFile); err != nil {
		return nil, err
	}
	bc := DefaultConfig()
	bc.Needled, bc.Start, bc.Peers, bc.DataDir, bc.Logger = cfg.Needled, cfg.Start, cfg.Peers, cfg.DataDir, cfg.Logger
	// Small limits, so hostile sizes reach them quickly; a short
	// --min-every so schedules fire during the run.
	bc.ExtraArgs = []string{"--swarm-key", keyFile, "--max-tasks", "2000", "--min-every", "1s"}
	cl, err := StartCluster(ctx, bc)
	if err != nil {
		return nil, err
	}
	defer cl.Close()

	rep := &HostileReport{Seed: cfg.Seed, Peers: cfg.Peers, Duration: cfg.Duration.String(),
		Requests: map[string]int{}, WireSent: map[string]int{}}
	st := &hostileState{rep: rep}
	attack, stop := context.WithTimeout(ctx, cfg.Duration)
	defer stop()
	var wg sync.WaitGroup
	for i := range cfg.Clients {
		g := &reqGen{r: rand.New(rand.NewPCG(cfg.Seed, uint64(i)+1)), st: st, peers: peerIDs(cl)}
		c := cl.Client(i % cl.Len())
		wg.Go(func() { g.run(attack, c) })
	}
	var wire *wireFuzzer
	if cfg.Wire {
		w, err := newWireFuzzer(attack, cl, keyFile, cfg.WireTypes, rand.New(rand.NewPCG(cfg.Seed, 0)), st)
		if err != nil {
			stop()
			wg.Wait()
			return nil, err
		}
		wg.Go(func() { w.run(attack) })
		wire = w
	}
	wg.Wait()
	if wire != nil {
		wire.close()
	}
	cfg.Logger.Info("attack over; cleaning up and waiting for acknowledged work", "requests", rep.Requests)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	crashed := func() {
		rep.Crashes = rep.Crashes[:0]
		for i := range cl.Len() {
			if out, dead := cl.exited(i); dead {
				rep.Crashes = append(rep.Crashes, fmt.Sprintf("peer %d exited: %s", i, out))
			}
		}
	}
	crashed()
	if len(rep.Crashes) > 0 {
		return rep, nil
	}
	// The keyed host joined as a member when one of its heartbeats passed
	// the checks, and its heartbeats named members that never were (ids
	// that decode but name no host): the operator's recovery is needle
	// forget, and the broadcast copies pinned to those peers fail then.
	forgetStrangers(ctx, cl, cfg.Logger)
	st.finish(ctx, cl, cfg.FinishTimeout)
	crashed()
	if !rep.OK() && cfg.Keep {
		for i := range cl.Len() {
			cfg.Logger.Warn("kept for inspection until interrupted", "peer", i, "id", cl.PeerID(i), "http", cl.peers[i].spec.HTTPAddr)
		}
		<-ctx.Done()
	}
	if len(rep.Unfinished) > 0 {
		for i := range cl.Len() {
			cl.mu.Lock()
			out := cl.peers[i].proc.Output()
			cl.mu.Unlock()
			if len(out) > 4096 {
				out = out[len(out)-4096:]
			}
			rep.Logs = append(rep.Logs, fmt.Sprintf("peer %d (%s):\n%s", i, cl.PeerID(i), out))
		}
	}
	return rep, nil
}

// forgetStrangers forgets, on every peer, the members that are not peers
// of the cluster.
func forgetStrangers(ctx context.Context, cl *Cluster, log *slog.Logger) {
	ours := map[string]bool{}
	for i := range cl.Len() {
		ours[cl.PeerID(i)] = true
	}
	for i := range cl.Len() {
		c := cl.Client(i)
		info, err := c.Peers(ctx)
		if err != nil {
			continue
		}
		for _, pi := range info.Peers {
			if !ours[pi.ID] {
				err := c.do(ctx, http.MethodPost, "/v1/peers/"+url.PathEscape(pi.ID)+"/forget", 0, nil, nil)
				log.Info("forgot a stranger", "peer", i, "stranger", pi.ID, "err", err)
			}
		}
	}
}

// writeSwarmKey writes a fresh swarm key to path.
func writeSwarmKey(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("hostile: swarm key: %w", err)
	}
	if err := p2p.GenerateSwarmKey(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func peerIDs(cl *Cluster) []string {
	ids := make([]string, cl.Len())
	for i := range ids {
		ids[i] = cl.PeerID(i)
	}
	return ids
}

// exited reports whether peer i's process has exited, with its output.
func (c *Cluster) exited(i int) (string, bool) {
	c.mu.Lock()
	p := c.peers[i]
	proc, dead := p.proc, p.dead
	c.mu.Unlock()
	if proc == nil || dead {
		return "", false
	}
	select {
	case <-proc.Done():
		return strings.TrimSpace(proc.Output()), true
	default:
		return "", false
	}
}

// hostileState is what the clients share: the groups the mesh
// acknowledged and the answers seen.
type hostileState struct {
	mu  sync.Mutex
	rep *HostileReport
	// groups acknowledged: id -> number of tasks, and whether the request
	// carried hostile values (those are canceled at the end: a hostile
	// delay may be a year).
	groups    map[string]ackedGroup
	taskIDs   []string // some acknowledged task ids, for ids in later requests
	schedules []string // schedules created, deleted at the end
}

type ackedGroup struct {
	tasks   int
	hostile bool
}

func (s *hostileState) count(status string, body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rep.Requests[status]++
	if status == "500" && len(s.rep.Internal) < 20 {
		s.rep.Internal = append(s.rep.Internal, string(body))
	}
}

func (s *hostileState) acked(group string, taskIDs []string, hostile bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.groups == nil {
		s.groups = map[string]ackedGroup{}
	}
	if _, ok := s.groups[group]; ok { // a repeated key answers the same group
		return
	}
	s.groups[group] = ackedGroup{tasks: len(taskIDs), hostile: hostile}
	if len(s.taskIDs) < 4096 {
		s.taskIDs = append(s.taskIDs, taskIDs...)
	} else if len(taskIDs) > 0 {
		s.taskIDs[rand.IntN(len(s.taskIDs))] = taskIDs[0]
	}
}

func (s *hostileState) schedule(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.schedules = append(s.schedules, id)
}

// someTask returns an acknowledged task id, or "" when none is known yet.
func (s *hostileState) someTask(r *rand.Rand) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.taskIDs) == 0 {
		return ""
	}
	return s.taskIDs[r.IntN(len(s.taskIDs))]
}

func (s *hostileState) someSchedule(r *rand.Rand) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.schedules) == 0 {
		return ""
	}
	return s.schedules[r.IntN(len(s.schedules))]
}

// finish deletes the schedules, cancels the groups submitted with hostile
// values, and waits until every acknowledged group is terminal, filling
// Acked, Finished and Unfinished.
func (s *hostileState) finish(ctx context.Context, cl *Cluster, timeout time.Duration) {
	s.mu.Lock()
	groups, schedules := s.groups, s.schedules
	s.mu.Unlock()
	deadline := time.Now().Add(timeout)
	for _, id := range schedules {
		insist(ctx, cl, http.MethodDelete, "/v1/schedules/"+id, deadline)
	}
	ids := make([]string, 0, len(groups))
	for id, g := range groups {
		ids = append(ids, id)
		s.rep.Acked += g.tasks
	}
	slices.Sort(ids)
	// A hostile group may hold a sleep of days (its timeout the default
	// 10 minutes): the cancel must land, so it is asked again, of each
	// peer in turn, while the mesh answers 503 or nothing (leadership
	// moving after the strangers were forgotten).
	canceled := map[string]error{}
	for _, id := range ids {
		if groups[id].hostile {
			canceled[id] = insist(ctx, cl, http.MethodPost, "/v1/groups/"+id+"/cancel", deadline)
		}
	}
	var stuck []string
	defer func() { s.rep.History = taskHistories(ctx, cl, stuck) }()
	for _, id := range ids {
		g, err := waitGroupTerminal(ctx, cl, id, deadline)
		if err == nil && terminal(g.State) {
			s.rep.Finished += groups[id].tasks
			continue
		}
		if len(s.rep.Unfinished) < 20 {
			why := fmt.Sprintf("%s %v", g.State, g.Counts)
			for _, t := range g.Tasks {
				if !terminal(t.State) {
					why += fmt.Sprintf(", task %s %s (peer %q, round %d)", t.ID, t.State, t.Peer, t.Round)
					if len(stuck) < 3 {
						stuck = append(stuck, t.ID)
					}
					break
				}
			}
			if err != nil {
				why = err.Error() + ": " + why
			}
			if err, ok := canceled[id]; ok {
				if err != nil {
					why += fmt.Sprintf(" (hostile; the cancel failed: %v)", err)
				} else {
					why += " (hostile; canceled)"
				}
			}
			s.rep.Unfinished = append(s.rep.Unfinished, id+": "+why)
		}
	}
}

// taskHistories returns the event history of each task in ids, one line
// per event, from the first peer that answers.
func taskHistories(ctx context.Context, cl *Cluster, ids []string) []string {
	var out []string
	for _, id := range ids {
		var h struct {
			Events []struct {
				Seq   int    `json:"seq"`
				Type  string `json:"type"`
				At    string `json:"at"`
				Round uint64 `json:"round"`
				Peer  string `json:"peer"`
				Error string `json:"error"`
				By    string `json:"by"`
			} `json:"events"`
		}
		err := errors.New("no peer")
		for i := 0; i < cl.Len() && err != nil; i++ {
			err = cl.Client(i).do(ctx, http.MethodGet, "/v1/tasks/"+url.PathEscape(id)+"/events", 0, nil, &h)
		}
		if err != nil {
			out = append(out, fmt.Sprintf("%s: history: %v", id, err))
			continue
		}
		for _, e := range h.Events {
			out = append(out, fmt.Sprintf("%s #%d %s %s round %d peer %q by %q error %q", id, e.Seq, e.At, e.Type, e.Round, e.Peer, e.By, e.Error))
		}
	}
	return out
}

// insist sends a request without a body, to each peer in turn, until a
// peer answers it with anything but 503 or deadline passes, and returns
// the last error (nil: answered 2xx).
func insist(ctx context.Context, cl *Cluster, method, path string, deadline time.Time) error {
	for turn := 0; ; turn++ {
		err := cl.Client(turn%cl.Len()).do(ctx, method, path, 0, nil, nil)
		var ae *APIError
		if err == nil || errors.As(err, &ae) && ae.Status != http.StatusServiceUnavailable {
			return err
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond) // a peer between leaders: ask again
	}
}

// waitGroupTerminal long-polls a group, from each peer in turn, until it is
// terminal or deadline passes.
func waitGroupTerminal(ctx context.Context, cl *Cluster, id string, deadline time.Time) (Group, error) {
	var g Group
	var err error
	for turn := 0; ; turn++ {
		left := time.Until(deadline)
		if left <= 0 {
			return g, errors.Join(err, errors.New("not terminal in time"))
		}
		g, err = cl.Client(turn%cl.Len()).Group(ctx, id, min(left, 10*time.Second))
		if err == nil && terminal(g.State) {
			return g, nil
		}
		if ctx.Err() != nil {
			return g, ctx.Err()
		}
		if err != nil {
			time.Sleep(100 * time.Millisecond) // a peer between leaders: ask again
		}
	}
}

// Print writes the report as the CLI prints it.
func (r *HostileReport) Print(w io.Writer) {
	fmt.Fprintf(w, "seed %d, %d peers, %s\n", r.Seed, r.Peers, r.Duration)
	printCounts(w, "requests:", r.Requests)
	if len(r.WireSent) > 0 {
		printCounts(w, "wire frames sent:", r.WireSent)
	}
	fmt.Fprintf(w, "acknowledged tasks %d, finished %d\n", r.Acked, r.Finished)
	for _, u := range r.Unfinished {
		fmt.Fprintf(w, "unfinished: %s\n", u)
	}
	for _, s := range r.Internal {
		fmt.Fprintf(w, "500: %s\n", s)
	}
	for _, h := range r.History {
		fmt.Fprintf(w, "history: %s\n", h)
	}
	for _, l := range r.Logs {
		fmt.Fprintf(w, "--- %s\n", l)
	}
	for _, c := range r.Crashes {
		fmt.Fprintf(w, "CRASH: %s\n", c)
	}
	if r.OK() {
		fmt.Fprintln(w, "ok: no crash, no 500, every acknowledged task finished")
	}
}

// printCounts writes a line of "key=count" pairs, keys sorted.
func printCounts(w io.Writer, title string, counts map[string]int) {
	fmt.Fprint(w, title)
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		fmt.Fprintf(w, " %s=%d", k, counts[k])
	}
	fmt.Fprintln(w)
}
