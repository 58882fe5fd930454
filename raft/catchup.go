package raft

import (
	"time"

	hraft "github.com/hashicorp/raft"
)

// Catching up a follower whose append failed. hashicorp/raft retries a
// failed append (the follower was down, or its group not yet running
// there) only when the leader writes its next entry or at its commit
// keep-alive, an empty append to each follower every CommitTimeout (×1–2).
// That keep-alive is also how hashicorp tells idle followers the commit
// index, which weir's heartbeats carry instead (transport_commit.go), so
// a partition's CommitTimeout is long and its keep-alive nearly never
// runs: at 4 s it was a quarter of an idle broker's CPU with a thousand
// partitions. The retry it stood for is driven from here instead.
//
// Once a second (with the leadership sweep) each group this node leads
// looks for a follower that has fallen behind and stayed there: one that
// answered a heartbeat of this term within catchUpHeard, so it is up and
// its group runs, whose log is known to match the leader's only below the
// leader's last entry, and that has acknowledged no append for
// catchUpAfter. The group then writes a Raft barrier: a new entry, which
// wakes every follower's replication at once, as any entry does, and
// which state machines never see. While a follower stays behind, the
// barriers back off from catchUpAfter to catchUpMax; a follower that is
// down answers no heartbeats and costs none.
const (
	catchUpHeard = 3 * time.Second
	catchUpAfter = 2 * time.Second
	catchUpMax   = 30 * time.Second
	// catchUpEnqueue bounds how long the sweep waits to hand Raft the
	// barrier; a busy leader is writing entries anyway.
	catchUpEnqueue = 50 * time.Millisecond
)

// heard records that target answered a heartbeat of term.
func (ct *commitTracker) heard(target string, term uint64, now time.Time) {
	ct.mu.Lock()
	ct.follower(target, term).heard = now
	ct.mu.Unlock()
}

// behind reports whether a follower heard from in term is known to match
// the leader's log only below last and has acknowledged no append for
// catchUpAfter.
func (ct *commitTracker) behind(term, last uint64, now time.Time) bool {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	for _, fm := range ct.byPeer {
		if fm.term == term && fm.index < last &&
			now.Sub(fm.heard) < catchUpHeard && now.Sub(fm.lastAck) >= catchUpAfter {
			return true
		}
	}
	return false
}

// catchUp writes a barrier when a follower of the group, led here, stays
// behind (above). Only the Mux's leadership goroutine calls it.
func (g *Group) catchUp(now time.Time) {
	if g.raft.State() != hraft.Leader ||
		!g.trans.commits.behind(g.raft.CurrentTerm(), g.raft.LastIndex(), now) {
		g.catchUpWait = 0
		return
	}
	if now.Before(g.catchUpAt) {
		return
	}
	g.catchUpWait = min(max(2*g.catchUpWait, catchUpAfter), catchUpMax)
	g.catchUpAt = now.Add(g.catchUpWait)
	// The future is not waited for: the entry's only work is to wake
	// replication, and its outcome is seen at the next sweep.
	g.raft.Barrier(catchUpEnqueue)
	g.trans.hub.st.catchUps.Add(1)
}
