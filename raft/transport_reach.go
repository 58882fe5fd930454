package raft

import (
	"errors"
	"syscall"
	"time"
)

// refusedWithin is how recent a refused dial must be to tell that the
// member is down now: an older one may predate the member's start.
const refusedWithin = 3 * time.Second

// PeerRefused reports whether this node's transport holds no connection to
// the node at addr (a mux address, as Group.Leader returns it, or a member
// address "addr#identity") and its last attempt to connect, within the
// last few seconds, was refused: nothing listens there, so the node's
// process is down, not paused or cut off. The failover sweep reads it to
// replace a dead process's leaders without waiting for its controller
// session to expire; a node that is slow, paused or unreachable in any
// other way is not reported here, and the session decides.
func (m *Mux) PeerRefused(addr string) bool {
	m.rpcMu.Lock()
	h := m.hub
	m.rpcMu.Unlock()
	if h == nil {
		return false
	}
	addr, _ = SplitMemberAddr(addr)
	h.mu.Lock()
	var peers []*peer
	for _, p := range h.peers {
		if p.addr == addr {
			peers = append(peers, p)
		}
	}
	h.mu.Unlock()
	refused := false
	now := time.Now()
	for _, p := range peers {
		p.mu.Lock()
		for i := range p.lanes {
			l := &p.lanes[i]
			if l.cc != nil {
				p.mu.Unlock()
				return false
			}
			// A dial in progress does not yet say otherwise: with a
			// thousand groups trying the dead member, one usually is.
			// A lane backing off after the refusal has not tried
			// since, and still knows nothing newer.
			current := now.Sub(l.errAt) < refusedWithin || now.Before(l.retryAt)
			refused = refused || (current && errors.Is(l.err, syscall.ECONNREFUSED))
		}
		p.mu.Unlock()
	}
	return refused
}
