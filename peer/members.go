package peer

// ReloadMembers reads --members again and makes it the list of peers
// allowed (SIGHUP); the peers it no longer lists are disconnected at once
// and refused from then on, and the failure detector finds them dead as
// it would a crashed peer. Without --members it does nothing (ok false).
// On an error the list stays as it was.
func (p *Peer) ReloadMembers() (ok bool, listed, disconnected int, err error) {
	g, isGated := p.tr.(gated)
	if p.cfg.MembersFile == "" || !isGated {
		return false, 0, 0, nil
	}
	listed, disconnected, err = g.ReloadMembers()
	return err == nil, listed, disconnected, err
}
