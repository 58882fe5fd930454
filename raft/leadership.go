package raft

import (
	"time"

	hraft "github.com/hashicorp/raft"
)

// Leadership changes of every group reach their owners through one
// goroutine per Mux rather than one per group: with thousands of groups a
// goroutine each is tens of megabytes of stacks for something that
// happens a few times a day.
//
// Every group registers a hashicorp observer on the Mux's one channel.
// Observers never block Raft, so a full channel drops observations; the
// dispatcher therefore never trusts an observation's contents, only that
// something changed, and reads the group's current leader instead. A
// sweep of every group each leadershipSweep catches whatever a dropped
// observation would have told, so a change is seen within that bound at
// worst and at once as a rule.
const (
	// leadershipQueue is the shared observation channel's capacity.
	leadershipQueue = 4096
	// leadershipSweep bounds how late a change whose observation was
	// dropped is seen.
	leadershipSweep = time.Second
)

// LeaderFunc is told a group's leadership on this node (true: it leads).
// It runs on the Mux's dispatcher, one call at a time for all groups, so
// it must not block: hand slow work to a goroutine of your own.
type LeaderFunc func(leading bool)

// OnLeaderChange sets fn to be told of this node's leadership of the
// group on every change (nil: nobody is), and at once when it leads now.
func (g *Group) OnLeaderChange(fn LeaderFunc) {
	g.leadMu.Lock()
	g.onLeader, g.mustTell = fn, fn != nil
	g.leadMu.Unlock()
	g.mux.leadershipDue(g)
}

// leadershipDue asks the dispatcher to look at g now.
func (m *Mux) leadershipDue(g *Group) {
	select {
	case m.leadCh <- g:
	default:
		// Full: the sweep looks at every group within leadershipSweep.
	}
}

// dispatchLeadership is the Mux's leadership goroutine.
func (m *Mux) dispatchLeadership() {
	defer m.wg.Done()
	sweep := time.NewTicker(leadershipSweep)
	defer sweep.Stop()
	for {
		select {
		case <-m.done:
			return
		case o := <-m.obsCh:
			lo, ok := o.Data.(hraft.LeaderObservation)
			if !ok {
				continue
			}
			if g := m.groupOf(o.Raft); g != nil {
				if lo.LeaderID != "" {
					g.leaderChanges.Add(1)
				}
				g.checkLeadership()
			}
		case g := <-m.leadCh:
			g.checkLeadership()
		case now := <-sweep.C:
			for _, g := range m.runningGroups() {
				g.checkLeadership()
				g.catchUp(now)
			}
		}
	}
}

// groupOf finds the running group of a Raft instance.
func (m *Mux) groupOf(r *hraft.Raft) *Group {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.byRaft[r]
}

// runningGroups copies the running groups.
func (m *Mux) runningGroups() []*Group {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*Group, 0, len(m.groups))
	for _, g := range m.groups {
		out = append(out, g)
	}
	return out
}

// checkLeadership compares the group's leadership with what its owner
// was last told and tells it of a change; only the dispatcher calls it.
// g.leadMu is held across the call to the owner's function, and Shutdown
// takes it after the group stopped, so no owner hears from a group after
// Shutdown returned.
func (g *Group) checkLeadership() {
	g.leadMu.Lock()
	defer g.leadMu.Unlock()
	if g.stopped {
		return
	}
	_, id := g.raft.LeaderWithID()
	now := string(id) == g.id && g.raft.State() == hraft.Leader
	if now == g.leading && !g.mustTell {
		return
	}
	changed := now != g.leading
	g.leading, g.mustTell = now, false
	if changed {
		g.roleTimers(now)
		g.log.Info("raft leadership changed", "leader", now, "leader_id", string(id))
		select { // replace a value the reader has not taken yet
		case <-g.leaderCh:
		default:
		}
		g.leaderCh <- now
	}
	if g.onLeader != nil && (changed || now) {
		g.onLeader(now)
	}
}

// roleTimers gives the group the heartbeat timeout of its role here
// (Config.LeaderHeartbeatTimeout).
func (g *Group) roleTimers(leading bool) {
	if g.leaderHT <= 0 || g.leaderHT == g.followerHT {
		return
	}
	rc := g.raft.ReloadableConfig()
	rc.HeartbeatTimeout, rc.ElectionTimeout = g.followerHT, g.electionTO
	if leading {
		rc.HeartbeatTimeout, rc.ElectionTimeout = g.leaderHT, max(g.electionTO, g.leaderHT)
	}
	if err := g.raft.ReloadConfig(rc); err != nil {
		g.log.Warn("raft group kept its timers", "leading", leading, "err", err)
	}
}
