package simulate

import (
	"time"
)

// planFaults draws the faults of the enabled kinds (each kind one or two
// times, never overlapping itself) over the fault window, which covers the
// submissions and a little after, and schedules their starts and stops.
// It returns them in schedule order and the time the last one heals.
func (s *sim) planFaults() ([]Fault, time.Duration) {
	window := max(s.wl.span+3*time.Second, 5*time.Second)
	var fs []Fault
	for _, kind := range allFaults { // fixed order: the flag's order does not change the run
		if !s.cfg.has(kind) {
			continue
		}
		if kind == "worker" {
			if s.cfg.Workers > 0 {
				fs = append(fs, s.workerFaults(window)...)
			}
			continue
		}
		if kind == "busy" {
			if s.cfg.Workers > 0 {
				fs = append(fs, s.busyFaults(window)...)
			}
			continue
		}
		if kind == "poison" {
			if s.cfg.Workers > 0 {
				fs = append(fs, s.poisonFaults(window)...)
			}
			continue
		}
		if kind == "restart" {
			if s.cfg.Workers > 0 {
				fs = append(fs, s.restartFaults(window)...)
			}
			continue
		}
		if kind == "hang" {
			if s.cfg.Workers > 0 {
				fs = append(fs, s.hangFaults(window)...)
			}
			continue
		}
		k := 1 + s.rng.IntN(2)
		slot := window / time.Duration(k)
		for i := range k {
			dur := 200*time.Millisecond + time.Duration(s.rng.Int64N(int64(1800*time.Millisecond)))
			if kind == "pause" && s.rng.IntN(3) == 0 {
				dur += 5 * time.Second // past lease expiry: late outcomes must be fenced
			}
			at := 100*time.Millisecond + time.Duration(i)*slot
			if slot > dur {
				at += time.Duration(s.rng.Int64N(int64(slot - dur)))
			}
			fs = append(fs, s.makeFault(kind, Span{At: at, For: dur}))
		}
	}
	if s.cfg.Workload == "w4" && len(s.wl.arrivals) > 0 {
		// W4: kill -9 the owner of the first group mid-run.
		node := s.route(s.wl.arrivals[0].spec.ID)
		fs = append(fs, &Crash{Span: Span{At: max(s.wl.span*4/10, 100*time.Millisecond), For: 2 * time.Second}, Node: node, LoseUnsynced: true})
	}
	if s.cfg.quietCrash && len(s.wl.arrivals) > 0 {
		node := s.route(s.wl.arrivals[0].spec.ID)
		fs = append(fs, &Crash{Span: Span{At: 20 * time.Second, For: 15 * time.Second}, Node: node, LoseUnsynced: true})
	}
	if s.cfg.has("churn") && s.cfg.Peers > s.cfg.Replicas && s.cfg.KillCount < 2 {
		// Churn also takes one peer out for good (with peers to spare
		// for its replicas), forgotten by hand 3 s later, and brings one
		// in late; not when --kill takes two for good (a third gone
		// could leave a partition no voter to recover from).
		at := 100*time.Millisecond + time.Duration(s.rng.Int64N(int64(window*6/10)))
		leaver, ok := s.leaver(s.rng.IntN(s.cfg.Peers))
		// A peer leaving for good takes its replicas' disks with it: the
		// guarantees hold while a majority of every partition's replicas
		// survive, so with fewer than 3 replicas nobody leaves.
		if ok && s.cfg.Replicas < 3 {
			ok = false
		}
		if s.cfg.KillSelect == KillVoters {
			ok = false // a disk lost beside the voters': the checker accounts the kill's only
		}
		if ok {
			fs = append(fs, &Leave{Span: Span{At: at, For: 3 * time.Second}, Node: leaver})
		}
		// And one peer (not the founder, not the leaver) joins late.
		joiner := 1 + s.rng.IntN(s.cfg.Peers-1)
		if ok && joiner == leaver {
			joiner = 1 + joiner%(s.cfg.Peers-1)
		}
		fs = append(fs, &Join{Span: Span{At: 100*time.Millisecond + time.Duration(s.rng.Int64N(int64(window*6/10)))}, Node: joiner})
	}
	var heal time.Duration
	for _, f := range fs {
		at, dur := f.Window()
		s.at(at, func() { f.start(s) })
		s.at(at+dur, func() { f.stop(s) })
		heal = max(heal, at+dur)
	}
	return fs, heal
}

func (s *sim) makeFault(kind string, sp Span) Fault {
	node := s.rng.IntN(s.cfg.Peers)
	switch kind {
	case "partition":
		return s.makePartition(sp)
	case "crash":
		return &Crash{Span: sp, Node: node, LoseUnsynced: true}
	case "churn":
		sp.For += time.Second
		return &Crash{Span: sp, Node: node}
	case "drop":
		return &Clog{Span: sp, Drop: 0.05 + 0.25*s.rng.Float64()}
	case "dup":
		return &Clog{Span: sp, Dup: 0.05 + 0.25*s.rng.Float64()}
	case "reorder":
		return &Clog{Span: sp, Reorder: time.Millisecond + time.Duration(s.rng.Int64N(int64(20*time.Millisecond)))}
	case "pause":
		return &Pause{Span: sp, Node: node}
	case "forge":
		return &Forge{Span: sp, Every: 5*time.Millisecond + time.Duration(s.rng.Int64N(int64(20*time.Millisecond)))}
	case "slow":
		return &Slow{Span: sp, Node: node, Factor: 2 + s.rng.IntN(9),
			Delay: 5*time.Millisecond + time.Duration(s.rng.Int64N(int64(95*time.Millisecond)))}
	}
	return s.makeSkew(sp, node)
}

func (s *sim) makePartition(sp Span) Fault {
	p := &Partition{Span: sp}
	if s.cfg.Peers == 1 {
		p.Sides[1] = []int{0} // the client loses the only node
		return p
	}
	perm := s.rng.Perm(s.cfg.Peers)
	cut := 1 + s.rng.IntN(s.cfg.Peers-1)
	p.Sides[0], p.Sides[1] = perm[:cut], perm[cut:]
	p.OneWay = s.rng.IntN(3) == 0
	return p
}

func (s *sim) makeSkew(sp Span, node int) Fault {
	f := &Skew{Span: sp, Node: node, Kind: SkewKind(1 + s.rng.IntN(3))}
	switch f.Kind {
	case Linear:
		f.PPM = 1000 + s.rng.Int64N(99_000)
		if s.rng.IntN(2) == 0 {
			f.PPM = -f.PPM
		}
	case Step:
		f.Step = 500*time.Millisecond + time.Duration(s.rng.Int64N(int64(2500*time.Millisecond)))
	case Periodic:
		f.PPM = 50_000
		f.Period = 200*time.Millisecond + time.Duration(s.rng.Int64N(int64(1800*time.Millisecond)))
	}
	return f
}

// leaver returns the first node from i on (wrapping) whose labels other
// nodes all carry too: tasks that require a label wait for a peer that
// has it, so the last one's leaving would leave them waiting for good
// (pinned tasks fail instead, and are what Leave tests).
func (s *sim) leaver(i int) (int, bool) {
	for k := range s.cfg.Peers {
		n := (i + k) % s.cfg.Peers
		covered := true
		for key, v := range nodeLabels(s.cfg, n) {
			other := false
			for j := range s.cfg.Peers {
				if j != n && nodeLabels(s.cfg, j)[key] == v {
					other = true
					break
				}
			}
			covered = covered && other
		}
		if covered {
			return n, true
		}
	}
	return 0, false
}
