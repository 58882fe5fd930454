package group

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// join handles a JoinGroup on the loop. It either answers at once
// (through reply) or parks reply on the member until the rebalance
// completes.
func (g *group) join(req *kmsg.JoinGroupRequest, client Client, reply chan *kmsg.JoinGroupResponse) {
	now := g.c.now()
	fail := func(code int16) { reply <- errorJoin(req, code) }
	if g.state == Dead {
		fail(kerr.CoordinatorNotAvailable.Code)
		return
	}
	if g.cg != nil {
		// A consumer-protocol group takes classic members only once
		// it is empty, and then becomes a classic group again.
		if !g.isEmpty() {
			g.classicJoinToConsumer(req, client, reply)
			return
		}
		if _, err := g.c.append(g.id, g.consumerTombstones()); err != nil {
			fail(kerr.CoordinatorNotAvailable.Code)
			return
		}
		g.cg = nil
		g.protocolType = ""
	}
	if !g.isEmpty() && (req.ProtocolType != g.protocolType || !g.supportsProtocols(req.Protocols)) {
		fail(kerr.InconsistentGroupProtocol.Code)
		return
	}
	sessionTimeout := time.Duration(req.SessionTimeoutMillis) * time.Millisecond
	rebalanceTimeout := time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	if req.Version == 0 {
		rebalanceTimeout = sessionTimeout // v0 has no rebalance timeout
	}

	if req.MemberID == "" {
		g.joinUnknownMember(req, client, reply, now, sessionTimeout, rebalanceTimeout)
		return
	}
	if _, ok := g.pending[req.MemberID]; ok {
		delete(g.pending, req.MemberID)
		m := g.newMember(req, req.MemberID, client, sessionTimeout, rebalanceTimeout)
		g.addAndRebalance(m, reply, req.Version, now)
		return
	}
	m := g.members[req.MemberID]
	if req.InstanceID != nil {
		if known, ok := g.static[*req.InstanceID]; ok && known != req.MemberID {
			fail(kerr.FencedInstanceID.Code)
			return
		}
	}
	if m == nil {
		fail(kerr.UnknownMemberID.Code)
		return
	}
	switch g.state {
	case PreparingRebalance:
		g.updateMember(m, req, sessionTimeout, rebalanceTimeout)
		g.park(m, reply, req.Version, now)
		g.tryCompleteJoin(now)
	case CompletingRebalance, Stable:
		// A follower that rejoins with nothing changed only missed its
		// answer; give it the current generation. A leader rejoining, or
		// anyone with new protocols, starts a rebalance.
		if m.sameProtocols(req.Protocols) && (g.state == CompletingRebalance || m.id != g.leader) {
			m.lastHeartbeat = now
			reply <- g.joinResponse(m, req.Version, false)
			return
		}
		g.updateMember(m, req, sessionTimeout, rebalanceTimeout)
		g.park(m, reply, req.Version, now)
		g.prepareRebalance(now, "member "+m.id+" rejoined")
	default:
		fail(kerr.UnknownMemberID.Code)
	}
}

func (g *group) joinUnknownMember(req *kmsg.JoinGroupRequest, client Client, reply chan *kmsg.JoinGroupResponse, now time.Time, sessionTimeout, rebalanceTimeout time.Duration) {
	newID := newMemberID(client.ID)
	if req.InstanceID != nil {
		if oldID, ok := g.static[*req.InstanceID]; ok {
			g.replaceStaticMember(g.members[oldID], newID, req, client, reply, now, sessionTimeout, rebalanceTimeout)
			return
		}
		// Static members skip the MEMBER_ID_REQUIRED round trip: the
		// instance id already identifies them.
		m := g.newMember(req, newID, client, sessionTimeout, rebalanceTimeout)
		g.addAndRebalance(m, reply, req.Version, now)
		return
	}
	if req.Version >= 4 {
		// KIP-394: hand out the id first, so a client that times out
		// and retries does not leave a ghost member behind.
		g.pending[newID] = now.Add(sessionTimeout)
		resp := kmsg.NewPtrJoinGroupResponse()
		resp.Version = req.Version
		resp.ErrorCode, resp.MemberID, resp.Generation = kerr.MemberIDRequired.Code, newID, -1
		reply <- resp
		return
	}
	m := g.newMember(req, newID, client, sessionTimeout, rebalanceTimeout)
	g.addAndRebalance(m, reply, req.Version, now)
}

// replaceStaticMember gives a rejoining static member a new member id,
// fencing the old one. In a stable group whose chosen protocol the new
// metadata does not change, the member gets its old assignment back
// without a rebalance (KIP-345). Cooperative clients send different
// metadata bytes after a restart (their owned partitions are gone), so
// the test is the protocol the group would select, as in Kafka, not the
// bytes.
func (g *group) replaceStaticMember(old *member, newID string, req *kmsg.JoinGroupRequest, client Client, reply chan *kmsg.JoinGroupResponse, now time.Time, sessionTimeout, rebalanceTimeout time.Duration) {
	g.replyJoinError(old, kerr.FencedInstanceID.Code)
	g.replySyncError(old, kerr.FencedInstanceID.Code)
	delete(g.members, old.id)
	if g.leader == old.id {
		g.leader = newID
	}
	old.id = newID
	old.clientID, old.clientHost = client.ID, client.Host
	g.members[newID] = old
	g.static[*req.InstanceID] = newID
	g.updateMember(old, req, sessionTimeout, rebalanceTimeout)
	old.lastHeartbeat = now

	switch g.state {
	case Stable:
		if g.selectProtocol() == g.protocol {
			if err := g.persistGroup(); err != nil { // the new member id must survive a restart
				g.replyJoinError(old, kerr.CoordinatorNotAvailable.Code)
				reply <- errorJoin(req, kerr.CoordinatorNotAvailable.Code)
				return
			}
			reply <- g.joinResponse(old, req.Version, true)
			return
		}
		g.park(old, reply, req.Version, now)
		g.prepareRebalance(now, "static member "+*req.InstanceID+" changed the group's protocol")
	case CompletingRebalance:
		// The leader may be assigning to the old member id; the new one
		// would get nothing. Rebalance.
		g.park(old, reply, req.Version, now)
		g.prepareRebalance(now, "static member "+*req.InstanceID+" rejoined during sync")
	default:
		g.park(old, reply, req.Version, now)
		g.tryCompleteJoin(now)
	}
}

func errorJoin(req *kmsg.JoinGroupRequest, code int16) *kmsg.JoinGroupResponse {
	resp := kmsg.NewPtrJoinGroupResponse()
	resp.Version = req.Version
	resp.ErrorCode, resp.MemberID, resp.Generation = code, req.MemberID, -1
	return resp
}

func (g *group) newMember(req *kmsg.JoinGroupRequest, id string, client Client, sessionTimeout, rebalanceTimeout time.Duration) *member {
	m := &member{id: id, instanceID: req.InstanceID, clientID: client.ID, clientHost: client.Host}
	g.updateMember(m, req, sessionTimeout, rebalanceTimeout)
	return m
}

func (g *group) updateMember(m *member, req *kmsg.JoinGroupRequest, sessionTimeout, rebalanceTimeout time.Duration) {
	m.protocolType = req.ProtocolType
	m.protocols = req.Protocols
	m.sessionTimeout, m.rebalanceTimeout = sessionTimeout, rebalanceTimeout
}

func (g *group) park(m *member, reply chan *kmsg.JoinGroupResponse, version int16, now time.Time) {
	if m.joinReply != nil && m.joinReply != reply {
		// A second JoinGroup from the same member replaces the first,
		// which learns it was superseded.
		g.replyJoinError(m, kerr.UnknownMemberID.Code)
	}
	m.joinReply, m.joinVersion = reply, version
	m.lastHeartbeat = now
}

func (g *group) addAndRebalance(m *member, reply chan *kmsg.JoinGroupResponse, version int16, now time.Time) {
	if g.isEmpty() {
		g.protocolType = m.protocolType
	}
	g.members[m.id] = m
	g.hadMembers = true
	if m.instanceID != nil {
		g.static[*m.instanceID] = m.id
	}
	g.park(m, reply, version, now)
	if g.state == PreparingRebalance {
		g.extendInitialDelay(now)
		g.tryCompleteJoin(now)
		return
	}
	g.prepareRebalance(now, "member "+m.id+" joined")
}

// prepareRebalance moves the group to PreparingRebalance: members must
// rejoin within the longest rebalance timeout.
func (g *group) prepareRebalance(now time.Time, reason string) {
	if g.state == PreparingRebalance || g.state == Dead {
		return
	}
	if g.state == CompletingRebalance {
		// The assignment being computed is void; waiting syncs learn it.
		for _, m := range g.members {
			g.replySyncError(m, kerr.RebalanceInProgress.Code)
		}
	}
	var timeout time.Duration
	for _, m := range g.members {
		timeout = max(timeout, m.rebalanceTimeout)
	}
	g.rebalanceDeadline = now.Add(timeout)
	g.initialDelayUntil, g.initialDelayCap = time.Time{}, time.Time{}
	if g.state == Empty {
		// The first rebalance of an empty group waits a little for the
		// other members that usually start at the same time.
		if delay := g.c.settings().InitialRebalanceDelay; delay > 0 {
			g.initialDelayUntil = now.Add(delay)
			g.initialDelayCap = now.Add(timeout)
		}
	}
	g.c.logger.Debug("group rebalancing", "group", g.id, "reason", reason, "generation", g.generation)
	g.c.classicRebalances.Add(1)
	g.transition(PreparingRebalance)
	g.tryCompleteJoin(now)
}

// extendInitialDelay pushes the initial delay out as members keep
// arriving, never past the rebalance timeout (Kafka's delayed initial
// join).
func (g *group) extendInitialDelay(now time.Time) {
	if g.initialDelayUntil.IsZero() || !now.Before(g.initialDelayUntil) {
		return
	}
	next := now.Add(g.c.settings().InitialRebalanceDelay)
	if next.After(g.initialDelayCap) {
		next = g.initialDelayCap
	}
	g.initialDelayUntil = next
}

// tryCompleteJoin finishes PreparingRebalance when every member has
// rejoined (and the initial delay is over), or when the rebalance
// deadline passed, dropping those that did not rejoin.
func (g *group) tryCompleteJoin(now time.Time) {
	if g.state != PreparingRebalance {
		return
	}
	deadlinePassed := !now.Before(g.rebalanceDeadline)
	if !deadlinePassed {
		if !g.initialDelayUntil.IsZero() && now.Before(g.initialDelayUntil) {
			return
		}
		if len(g.pending) > 0 {
			return
		}
		for _, m := range g.members {
			if m.joinReply == nil {
				return
			}
		}
	}
	for _, m := range g.members {
		if m.joinReply == nil {
			g.c.logger.Info("group member did not rejoin in time", "group", g.id, "member", m.id)
			g.removeMember(m, kerr.UnknownMemberID.Code)
		}
	}
	for id := range g.pending {
		delete(g.pending, id)
	}
	g.completeJoin(now)
}

func (g *group) completeJoin(now time.Time) {
	g.generation++
	g.rebalanceDeadline, g.initialDelayUntil = time.Time{}, time.Time{}
	if g.isEmpty() {
		g.protocol, g.leader = "", ""
		g.transition(Empty)
		g.persistGroup()
		return
	}
	g.protocol = g.selectProtocol()
	if g.members[g.leader] == nil {
		g.leader = g.firstMemberID()
	}
	g.transition(CompletingRebalance)
	for _, m := range g.members {
		m.assignment = nil
		resp := g.joinResponse(m, m.joinVersion, false)
		m.joinReply <- resp
		m.joinReply = nil
		m.lastHeartbeat = now
	}
}

// joinResponse describes the current generation to m; the leader also
// gets every member's metadata, unless skipAssignment says the
// assignment stands (a static leader's rejoin, v9+ only).
func (g *group) joinResponse(m *member, version int16, staticRejoin bool) *kmsg.JoinGroupResponse {
	resp := kmsg.NewPtrJoinGroupResponse()
	resp.Version = version
	resp.Generation = g.generation
	protocolType, protocol := g.protocolType, g.protocol
	resp.ProtocolType, resp.Protocol = &protocolType, &protocol
	resp.LeaderID, resp.MemberID = g.leader, m.id
	if m.id != g.leader {
		return resp
	}
	if staticRejoin {
		if version < 9 {
			return resp
		}
		resp.SkipAssignment = true
	}
	for _, id := range g.sortedMemberIDs() {
		other := g.members[id]
		resp.Members = append(resp.Members, kmsg.JoinGroupResponseMember{
			MemberID: other.id, InstanceID: other.instanceID, ProtocolMetadata: other.metadataFor(g.protocol),
		})
	}
	return resp
}

// supportsProtocols: a newcomer must share at least one protocol with
// what every current member supports.
func (g *group) supportsProtocols(ps []kmsg.JoinGroupRequestProtocol) bool {
	if len(ps) == 0 {
		return false
	}
	common := g.candidateProtocols()
	for _, p := range ps {
		if common[p.Name] {
			return true
		}
	}
	return false
}

// candidateProtocols are the protocols every member supports.
func (g *group) candidateProtocols() map[string]bool {
	var common map[string]bool
	for _, m := range g.members {
		mine := map[string]bool{}
		for _, p := range m.protocols {
			if common == nil || common[p.Name] {
				mine[p.Name] = true
			}
		}
		common = mine
	}
	return common
}

// selectProtocol is Kafka's vote: each member votes for the first of its
// protocols that everyone supports; the most votes win, ties going to
// the leader's (or first member's) preference order.
func (g *group) selectProtocol() string {
	common := g.candidateProtocols()
	votes := map[string]int{}
	for _, m := range g.members {
		for _, p := range m.protocols {
			if common[p.Name] {
				votes[p.Name]++
				break
			}
		}
	}
	ref := g.members[g.leader]
	if ref == nil {
		ref = g.members[g.firstMemberID()]
	}
	best, bestVotes := "", -1
	for _, p := range ref.protocols {
		if common[p.Name] && votes[p.Name] > bestVotes {
			best, bestVotes = p.Name, votes[p.Name]
		}
	}
	return best
}

func (g *group) firstMemberID() string {
	ids := g.sortedMemberIDs()
	if len(ids) == 0 {
		return ""
	}
	return ids[0]
}
