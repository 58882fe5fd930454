package group

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// checkMember applies the checks SyncGroup, Heartbeat and OffsetCommit
// share, in Kafka's order; it returns the member or an error code.
func (g *group) checkMember(memberID string, instanceID *string, generation int32) (*member, int16) {
	if g.state == Dead {
		return nil, kerr.CoordinatorNotAvailable.Code
	}
	if instanceID != nil {
		if known, ok := g.static[*instanceID]; ok && known != memberID {
			return nil, kerr.FencedInstanceID.Code
		}
	}
	m := g.members[memberID]
	if m == nil {
		return nil, kerr.UnknownMemberID.Code
	}
	if generation != g.generation {
		return nil, kerr.IllegalGeneration.Code
	}
	return m, 0
}

func (g *group) sync(req *kmsg.SyncGroupRequest, reply chan *kmsg.SyncGroupResponse) {
	if g.cg != nil && g.state != Dead {
		g.classicSyncToConsumer(req, reply)
		return
	}
	resp := kmsg.NewPtrSyncGroupResponse()
	resp.Version = req.Version
	answer := func(code int16) {
		resp.ErrorCode = code
		reply <- resp
	}
	m, code := g.checkMember(req.MemberID, req.InstanceID, req.Generation)
	if code != 0 {
		answer(code)
		return
	}
	if (req.ProtocolType != nil && *req.ProtocolType != g.protocolType) || (req.Protocol != nil && *req.Protocol != g.protocol) {
		answer(kerr.InconsistentGroupProtocol.Code)
		return
	}
	m.lastHeartbeat = g.c.now()
	switch g.state {
	case PreparingRebalance:
		answer(kerr.RebalanceInProgress.Code)
	case Stable:
		reply <- g.syncResponse(m, req.Version)
	case CompletingRebalance:
		g.replySyncError(m, kerr.RebalanceInProgress.Code) // a duplicate sync supersedes
		m.syncReply, m.syncVersion = reply, req.Version
		if m.id != g.leader {
			return
		}
		assignments := map[string][]byte{}
		for _, a := range req.GroupAssignment {
			assignments[a.MemberID] = a.MemberAssignment
		}
		for id, mm := range g.members {
			mm.assignment = assignments[id]
			if mm.assignment == nil {
				mm.assignment = []byte{}
			}
		}
		if err := g.persistGroup(); err != nil {
			// Without a durable assignment the generation cannot stand;
			// everyone rejoins.
			for _, mm := range g.members {
				mm.assignment = nil
				g.replySyncError(mm, kerr.CoordinatorNotAvailable.Code)
			}
			g.prepareRebalance(g.c.now(), "storing the assignment failed")
			return
		}
		g.transition(Stable)
		for _, mm := range g.members {
			if mm.syncReply != nil {
				mm.syncReply <- g.syncResponse(mm, mm.syncVersion)
				mm.syncReply = nil
			}
		}
	default:
		answer(kerr.UnknownMemberID.Code)
	}
}

func (g *group) syncResponse(m *member, version int16) *kmsg.SyncGroupResponse {
	resp := kmsg.NewPtrSyncGroupResponse()
	resp.Version = version
	protocolType, protocol := g.protocolType, g.protocol
	resp.ProtocolType, resp.Protocol = &protocolType, &protocol
	resp.MemberAssignment = m.assignment
	if resp.MemberAssignment == nil {
		resp.MemberAssignment = []byte{}
	}
	return resp
}

func (g *group) heartbeat(req *kmsg.HeartbeatRequest) int16 {
	if g.cg != nil && g.state != Dead {
		return g.classicHeartbeatToConsumer(req)
	}
	m, code := g.checkMember(req.MemberID, req.InstanceID, req.Generation)
	if code != 0 {
		return code
	}
	m.lastHeartbeat = g.c.now()
	switch g.state {
	case PreparingRebalance:
		return kerr.RebalanceInProgress.Code
	case CompletingRebalance, Stable:
		return 0
	default:
		return kerr.UnknownMemberID.Code
	}
}

// leave removes the listed members (v3+ batches them; older versions name
// one). The per-member codes are returned in request order.
func (g *group) leave(members []kmsg.LeaveGroupRequestMember) (top int16, codes []int16) {
	if g.state == Dead {
		return kerr.CoordinatorNotAvailable.Code, nil
	}
	if g.cg != nil {
		return g.classicLeaveToConsumer(members)
	}
	var removed bool
	for _, lm := range members {
		codes = append(codes, g.leaveOne(lm, &removed))
	}
	if !removed {
		return 0, codes
	}
	now := g.c.now()
	switch g.state {
	case PreparingRebalance:
		g.tryCompleteJoin(now)
	case Stable, CompletingRebalance:
		g.prepareRebalance(now, "members left")
	}
	return 0, codes
}

func (g *group) leaveOne(lm kmsg.LeaveGroupRequestMember, removed *bool) int16 {
	id := lm.MemberID
	if lm.InstanceID != nil {
		known, ok := g.static[*lm.InstanceID]
		switch {
		case !ok:
			return kerr.UnknownMemberID.Code
		case id != "" && id != known:
			return kerr.FencedInstanceID.Code
		}
		id = known
	}
	if _, ok := g.pending[id]; ok {
		delete(g.pending, id)
		return 0
	}
	m := g.members[id]
	if m == nil {
		return kerr.UnknownMemberID.Code
	}
	g.c.logger.Debug("group member left", "group", g.id, "member", id)
	g.removeMember(m, kerr.UnknownMemberID.Code)
	*removed = true
	return 0
}
