package broker

import (
	"slices"
	"strconv"
	"time"

	"github.com/weir-broker/weir/broker/controller"
	"github.com/weir-broker/weir/raft"
)

// Replacing dead leaders.
//
// A partition group's own timers notice a silent leader (a follower
// starts an election of its own after 3–6 s without a word from it,
// replication.go), but they are sized for thousands of idle groups, not
// for the fastest failover, and a process that died can be seen sooner.
// What replaces a dead leader besides them is broker liveness, as in Kafka, whose controller elects new
// leaders once a broker's session (broker.session.timeout.ms, 9 s)
// expired, and as in CockroachDB, whose quiesced ranges wake when their
// leader's node liveness lapses.
//
// Every second each broker looks at the partitions it follows. A leader
// is gone when:
//   - its process is gone: this broker's Raft transport finds its address
//     refusing connections (raft.Mux.PeerRefused), which, with groups
//     heartbeating it every few seconds, is within a second or two;
//   - its broker's session expired, judged against the controller log's
//     clock (liveByLog), and this follower has not heard from it for
//     longer than its heartbeats are apart (leaderSilence);
//   - no leader is known, and the one the controller last recorded is
//     this broker (it restarted and lost the leadership with its
//     process) or a broker that is not live.
//
// The live in-sync replicas then stand for election in replica order:
// the first at once, each next one campaignStagger later while there is
// still no leader (the first may be unable to win: its log may be
// behind). Raft's vote decides who leads, and is safe whoever stands
// (raft.Group.Campaign); this only decides when, so that a dead process's
// partitions are led elsewhere within a few seconds, and those of a
// broker that stopped answering by its followers' timers or its session,
// whichever comes first.
const (
	// campaignStagger separates the replicas standing for one
	// partition, so that they do not split its vote: a replica that
	// stands while another's election is under way starts a newer term
	// that voids it, and hashicorp/raft retries a lost election only
	// after its election timeout (3–6 s for a partition). Thousands
	// of elections at once take seconds on a small machine.
	campaignStagger = 6 * time.Second
	// leaderSilence is how long a follower must not have heard from its
	// leader before an expired session counts: an idle leader's
	// heartbeats are up to a fifth of its heartbeat timeout apart, plus
	// their batching delay. A broker whose heartbeats reach the
	// controller late (a busy controller, thousands of reports queued)
	// may seem to have lost its session while its groups still
	// heartbeat; its followers do not stand against it then.
	leaderSilence = partitionLeaderHeartbeatTimeout/5 + time.Second
	// electionGrace is how long a replica that knows no leader waits
	// for an election under way (thousands of new groups electing at
	// once take seconds on a small machine) before standing itself.
	electionGrace = 5 * time.Second
	// campaignRetry is how long a replica that stood waits before
	// standing again while the leader is still gone; Raft's own
	// election timer retries a lost election meanwhile.
	campaignRetry = partitionHeartbeatTimeout
)

// leaderlessSince is what the sweep remembers of a partition whose
// leader it found gone: since when (in term), and when this replica last
// stood.
type leaderlessSince struct {
	since, stood time.Time
	term         uint64
	contested    bool // the term moved while the leader was gone
}

// replaceDeadLeaders is the sweep; it runs every replicaProgressEvery on
// one goroutine, which alone touches rs.leaderless.
func (rs *Replicas) replaceDeadLeaders() {
	v := rs.view()
	now := time.Now()
	self := rs.node.NodeID
	live := liveByLog(v)
	up := upBrokers(live, self, func(id int32) (string, bool) {
		reg, ok := v.Broker(id)
		return reg.RPCAddr, ok
	}, rs.mux().PeerRefused)
	next := make(map[*Partition]leaderlessSince, len(rs.leaderless))
	stood := map[string]int{}
	for _, p := range rs.localReplicas() {
		if p.solo || p.IsLeader() || p.failure() != nil {
			continue
		}
		leaderID, leaderAddr := p.group.Leader()
		var why string
		switch {
		case leaderID == "":
		case brokerGone(leaderID, self, live) && now.Sub(p.group.LastContact()) > leaderSilence:
			why = "leader's broker session expired"
		case rs.mux().PeerRefused(leaderAddr):
			why = "leader's process refuses connections"
		default:
			continue
		}
		cp, ok := v.Partition(p.topic.ID(), p.Index)
		if !ok {
			continue
		}
		lastRefuses := false
		if leaderID == "" {
			if !lastLeaderGone(cp, self, up, p.group.HasExistingState()) {
				continue
			}
			why = "no leader known, and the last one is gone"
			if reg, ok := v.Broker(cp.Leader); ok && cp.Leader != self && rs.mux().PeerRefused(reg.RPCAddr) {
				why, lastRefuses = "no leader known, and the last one's process refuses connections", true
			}
		}
		// An election someone started since the last look (a newer
		// term) restarts the wait, and adds the grace for an election
		// under way: standing now would void it.
		st, seen := rs.leaderless[p]
		if term := p.group.Term(); !seen || term != st.term {
			st.contested = st.contested || seen
			st.since, st.term = now, term
		}
		rank := slices.Index(standingOrder(cp, up), self)
		if leaderID == "" && cp.Leader == self {
			rank = 0 // it led until its restart, and holds the log it led with
		}
		wait := standingWait(rank, leaderID != "", lastRefuses, st.contested)
		if rank >= 0 && now.Sub(st.since) >= wait &&
			(st.stood.IsZero() || now.Sub(st.stood) >= campaignRetry) && rs.votes(p) {
			st.stood = now
			p.group.Campaign()
			stood[why]++
		}
		next[p] = st
	}
	rs.leaderless = next
	for why, n := range stood {
		rs.logger.Info("standing for the leadership of partitions whose leader is gone", "partitions", n, "why", why)
	}
}

// standingWait is how long after its leader was found gone a replica of
// rank (in standingOrder) waits before standing. No leader known may
// mean an election under way (a new group's, or one that Raft's own
// timers started), which standing would void: that gets electionGrace
// to end, and so does a partition whose term moved while its leader was
// gone. But a replica whose own timer fired first forgets its leader
// when its pre-vote fails against a replica that still heard from that
// leader, and no election is under way then: when the leader the
// controller last recorded refuses connections, and the term has not
// moved, it stands as if it still knew that leader (a partition waited
// for the next replica's timer, 4 s, in a 3,000-partition failover).
func standingWait(rank int, leaderKnown, lastRefuses, contested bool) time.Duration {
	wait := time.Duration(rank) * campaignStagger
	if (!leaderKnown && !lastRefuses) || contested {
		wait += electionGrace
	}
	return wait
}

// liveByLog judges brokers live against the controller log's own clock:
// a broker is gone when its last heartbeat is more than the session
// timeout older than the newest heartbeat any broker got into the log.
// Against this broker's clock instead (View.Live), a controller that
// stalls or elects (thousands of partitions' reports queued ahead of the
// heartbeats) would let every session seem to expire at once, and every
// follower would stand against a leader that is alive.
func liveByLog(v *controller.View) func(int32) bool {
	brokers := v.Brokers()
	var newest int64
	for _, b := range brokers {
		newest = max(newest, b.LastHeartbeatMs)
	}
	timeout := v.SessionTimeout().Milliseconds()
	return func(id int32) bool {
		for _, b := range brokers {
			if b.NodeID == id {
				return newest-b.LastHeartbeatMs <= timeout
			}
		}
		return false
	}
}

// upBrokers is live narrowed to brokers whose process is there: a broker
// whose RPC address (addrOf) refuses connections (refused, that is
// raft.Mux.PeerRefused) is down whatever its session says, so it neither
// counts as a partition's last leader still about nor stands first for
// the leadership it lost. Left in the standing order while its session
// ran out, a dead preferred leader held every survivor back a
// campaignStagger. Each broker is asked about once per sweep.
func upBrokers(live func(int32) bool, self int32, addrOf func(int32) (string, bool), refused func(addr string) bool) func(int32) bool {
	down := map[int32]bool{}
	return func(id int32) bool {
		if !live(id) {
			return false
		}
		d, seen := down[id]
		if !seen {
			addr, ok := addrOf(id)
			d = ok && id != self && refused(addr)
			down[id] = d
		}
		return !d
	}
}

// brokerGone reports whether the group leader this replica knows is on
// a broker whose session expired.
func brokerGone(leaderID string, self int32, live func(int32) bool) bool {
	id, err := strconv.Atoi(leaderID)
	return err == nil && int32(id) != self && !live(int32(id))
}

// lastLeaderGone reports, for a replica that knows no leader, whether the
// leader the controller last recorded is gone: this broker, which
// therefore lost the leadership in a restart (restarted: the replica
// had Raft state when it opened; a new group's first leader is the
// controller's record too, and its own election is under way), or a
// broker that is not live (or none at all).
func lastLeaderGone(cp controller.Partition, self int32, live func(int32) bool, restarted bool) bool {
	return (cp.Leader == self && restarted) || cp.Leader < 0 || !live(cp.Leader)
}

// standingOrder lists who stands for a partition whose leader is gone,
// first to last: its in-sync replicas that are up (live, for
// upBrokers), in replica order (a broker that lost its leadership in a
// restart is live again, and stands with its log). A partition with no
// ISR recorded counts every replica in sync, as its first leader does.
func standingOrder(cp controller.Partition, live func(int32) bool) []int32 {
	order := make([]int32, 0, len(cp.Replicas))
	for _, r := range cp.Replicas {
		if live(r) && (len(cp.ISR) == 0 || slices.Contains(cp.ISR, r)) {
			order = append(order, r)
		}
	}
	return order
}

// votes reports whether this broker's replica of p is a voter of its
// group: a replica catching up as a non-voter may not stand.
func (rs *Replicas) votes(p *Partition) bool {
	servers, err := p.group.Configuration()
	if err != nil {
		return false
	}
	self := strconv.Itoa(int(rs.node.NodeID))
	for _, s := range servers {
		if s.ID == self {
			return s.Voter
		}
	}
	return false
}

// The controller group's dead leader is replaced the same way, by a look
// every second. Its own timers notice a silent leader after 2–4 s, and
// the first pre-vote then fails against a voter that heard from the
// leader more recently: a killed controller leader was replaced 3.6 s
// later (1,000 partitions, three brokers), and every partition's new
// leader waits for the controller to record it. When the leader's
// process refuses connections, its voters stand in id order, the first
// at once and the next controllerStagger later if there is still no
// leader; a member still hearing from the leader grants the vote, as it
// does for a leadership transfer (raft.Group.Campaign).
const controllerStagger = 2 * time.Second

// controllerLeaderless is what the controller's sweep remembers, on its
// one goroutine: the last leader it knew, and since when that leader's
// process has been found gone.
type controllerLeaderless struct {
	leaderID, leaderAddr string
	since, stood         time.Time
}

// replaceDeadLeader is the controller group's sweep.
func (c *controllerNode) replaceDeadLeader() {
	if c.group.IsLeader() {
		c.leaderless = controllerLeaderless{}
		return
	}
	st := &c.leaderless
	if id, addr := c.group.Leader(); id != "" && id != st.leaderID {
		*st = controllerLeaderless{leaderID: id, leaderAddr: addr}
	}
	// A leader forgotten since the last look (this member's own timer
	// made it a candidate) is still the one to judge.
	if st.leaderID == "" || !c.mux.PeerRefused(st.leaderAddr) {
		st.since, st.stood = time.Time{}, time.Time{}
		return
	}
	now := time.Now()
	if st.since.IsZero() {
		st.since = now
	}
	servers, err := c.group.Configuration()
	if err != nil {
		return
	}
	order := controllerStandingOrder(servers, st.leaderID, c.mux.PeerRefused)
	rank := slices.Index(order, strconv.Itoa(int(c.node.NodeID)))
	if rank < 0 || now.Sub(st.since) < time.Duration(rank)*controllerStagger ||
		(!st.stood.IsZero() && now.Sub(st.stood) < controllerStagger*time.Duration(len(order))) {
		return
	}
	st.stood = now
	c.logger.Info("standing for the controller's leadership", "leader", st.leaderID, "why", "leader's process refuses connections")
	c.group.Campaign()
}

// controllerStandingOrder lists the controller voters that stand when
// leader's process is gone, first to last: every other voter whose
// address does not refuse connections, in node id order.
func controllerStandingOrder(servers []raft.Server, leader string, refused func(addr string) bool) []string {
	var order []string
	for _, s := range servers {
		if s.Voter && s.ID != leader && !refused(s.Addr) {
			order = append(order, s.ID)
		}
	}
	slices.SortFunc(order, func(a, b string) int {
		x, _ := strconv.Atoi(a)
		y, _ := strconv.Atoi(b)
		return x - y
	})
	return order
}
