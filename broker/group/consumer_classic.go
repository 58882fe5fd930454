package group

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/log"
)

// Online migration between the protocols, as Kafka 4.x does it: a
// classic group whose members use the consumer embedded protocol becomes
// a consumer group when a consumer-protocol member joins it; its classic
// members stay in, speaking JoinGroup, SyncGroup, Heartbeat and
// LeaveGroup, which the coordinator translates into the consumer
// protocol's membership (epochs, target assignment, reconciliation).
// When the last consumer-protocol member leaves a group of classic
// members, it becomes a classic group again and rebalances.

// MigrationPolicy is Kafka's group.consumer.migration.policy.
type MigrationPolicy string

const (
	MigrationDisabled      MigrationPolicy = "disabled"
	MigrationUpgrade       MigrationPolicy = "upgrade"
	MigrationDowngrade     MigrationPolicy = "downgrade"
	MigrationBidirectional MigrationPolicy = "bidirectional"
)

func (p MigrationPolicy) upgrade() bool { return p == MigrationUpgrade || p == MigrationBidirectional }
func (p MigrationPolicy) downgrade() bool {
	return p == MigrationDowngrade || p == MigrationBidirectional
}

// classicMeta is what a member speaking the classic protocol inside a
// consumer group keeps of its JoinGroup.
type classicMeta struct {
	sessionTimeout time.Duration
	protocols      []kmsg.JoinGroupRequestProtocol
}

// sessionTimeout is the member's own (classic) or the group's.
func (m *cgMember) sessionTimeout(s Settings) time.Duration {
	if m.classic != nil {
		return m.classic.sessionTimeout
	}
	return s.ConsumerSessionTimeout
}

// canUpgrade: a classic group with members may become a consumer group.
func (g *group) canUpgrade() bool {
	s := g.c.settings()
	return s.MigrationPolicy.upgrade() && g.protocolType == "consumer" && g.state != Dead &&
		(s.ConsumerMaxSize <= 0 || len(g.members) <= s.ConsumerMaxSize)
}

// upgraded is the consumer group a classic group with members becomes,
// and the records that make it so: each member keeps its subscription
// and its last assignment, as its target, at the group's generation.
// Parked JoinGroup and SyncGroup requests are answered
// REBALANCE_IN_PROGRESS so their members rejoin in the new group.
func (g *group) upgraded() (*consumerGroup, []log.KeyValue) {
	for _, m := range g.members {
		g.replyJoinError(m, kerr.RebalanceInProgress.Code)
		g.replySyncError(m, kerr.RebalanceInProgress.Code)
	}
	cg := newConsumerGroup()
	cg.epoch, cg.targetEpoch = g.generation, g.generation
	records := []log.KeyValue{{Key: groupKey(g.id)}}
	for _, id := range g.sortedMemberIDs() {
		old := g.members[id]
		var sub kmsg.ConsumerMemberMetadata
		_ = sub.ReadFrom(old.metadataFor(g.protocol))
		var asg kmsg.ConsumerMemberAssignment
		_ = asg.ReadFrom(old.assignment)
		assigned := g.topicIDs(asg.Topics)
		m := &cgMember{
			id: id, instanceID: old.instanceID, clientID: old.clientID, clientHost: old.clientHost,
			topics: sortedUnique(sub.Topics), rebalanceTimeout: old.rebalanceTimeout,
			epoch: g.generation, prevEpoch: g.generation, state: memberStable,
			assigned: assigned, revoking: partitions{},
			classic:       &classicMeta{sessionTimeout: old.sessionTimeout, protocols: slices.Clone(old.protocols)},
			lastHeartbeat: old.lastHeartbeat,
		}
		if sub.Rack != nil {
			m.rackID = sub.Rack
		}
		cg.members[id] = m
		cg.target[id] = clonePartitions(assigned)
		if m.instanceID != nil {
			cg.static[*m.instanceID] = id
		}
		records = append(records, cgMemberMetadataRecord(g.id, id, m.metadataValue()))
	}
	cg.metadataHash = metadataHashOf(cg.subscribedNames("", nil), g.c.opts.Topics)
	records = append(records, cgMetadataRecord(g.id, &cgMetadata{Epoch: cg.epoch, MetadataHash: cg.metadataHash}))
	for _, id := range cg.sortedMemberIDs() {
		records = append(records, cgTargetMemberRecord(g.id, id, &cgTargetMember{TopicPartitions: toTopicPartitions(cg.target[id])}))
	}
	records = append(records, cgTargetMetadataRecord(g.id, &cgTargetMetadata{AssignmentEpoch: cg.targetEpoch}))
	for _, id := range cg.sortedMemberIDs() {
		records = append(records, cgCurrentAssignmentRecord(g.id, id, cg.members[id].currentValue()))
	}
	return cg, records
}

// installUpgrade makes the group the consumer group cg, dropping its
// classic membership; called once the records are written.
func (g *group) installUpgrade(cg *consumerGroup) {
	if len(g.members) > 0 {
		g.c.logger.Info("classic group upgraded to the consumer protocol", "group", g.id, "members", len(g.members), "epoch", cg.epoch)
	}
	g.cg = cg
	g.members, g.static, g.pending = map[string]*member{}, map[string]string{}, map[string]time.Time{}
	g.protocolType, g.protocol, g.generation, g.leader = "consumer", "", 0, ""
	g.hadMembers = true
}

// topicIDs maps a classic assignment's topic names to ids; topics that
// no longer exist are left out.
func (g *group) topicIDs(topics []kmsg.ConsumerMemberAssignmentTopic) partitions {
	out := partitions{}
	for _, t := range topics {
		id, n, ok := g.c.opts.Topics.ByName(t.Topic)
		if !ok {
			continue
		}
		for _, p := range t.Partitions {
			if p >= 0 && p < n {
				out[id] = append(out[id], p)
			}
		}
		if ps := out[id]; ps != nil {
			slices.Sort(ps)
			out[id] = slices.Compact(ps)
		}
	}
	return out
}

// classicAssignment encodes a member's assignment for a classic member,
// at the embedded protocol version its subscription used.
func (g *group) classicAssignment(m *cgMember) []byte {
	var a kmsg.ConsumerMemberAssignment
	a.Default()
	if len(m.classic.protocols) > 0 && len(m.classic.protocols[0].Metadata) >= 2 {
		md := m.classic.protocols[0].Metadata
		a.Version = min(int16(md[0])<<8|int16(md[1]), 3)
	}
	for _, t := range sortedTopicIDs(m.assigned) {
		name, _, ok := g.c.opts.Topics.ByID(t)
		if !ok {
			continue
		}
		a.Topics = append(a.Topics, kmsg.ConsumerMemberAssignmentTopic{Topic: name, Partitions: slices.Clone(m.assigned[t])})
	}
	return a.AppendTo(nil)
}

// classicJoinToConsumer is a classic member's JoinGroup in a consumer
// group: a heartbeat of the consumer protocol with the subscription and
// owned partitions of its embedded protocol, answered at once with its
// member epoch as the generation.
func (g *group) classicJoinToConsumer(req *kmsg.JoinGroupRequest, client Client, reply chan *kmsg.JoinGroupResponse) {
	fail := func(code int16) { reply <- errorJoin(req, code) }
	cg := g.cg
	if req.ProtocolType != "consumer" || !cg.supportsClassic(req.Protocols) {
		fail(kerr.InconsistentGroupProtocol.Code)
		return
	}
	memberID := req.MemberID
	unknown := memberID == ""
	if unknown {
		memberID = newConsumerMemberID()
		if req.Version >= 4 && req.InstanceID == nil {
			resp := kmsg.NewPtrJoinGroupResponse()
			resp.Version = req.Version
			resp.ErrorCode, resp.MemberID, resp.Generation = kerr.MemberIDRequired.Code, memberID, -1
			reply <- resp
			return
		}
	}
	s := g.c.settings()
	if s.ConsumerMaxSize > 0 && len(cg.members) >= s.ConsumerMaxSize && cg.members[memberID] == nil {
		fail(kerr.GroupMaxSizeReached.Code)
		return
	}
	var sub kmsg.ConsumerMemberMetadata
	if err := sub.ReadFrom(req.Protocols[0].Metadata); err != nil {
		fail(kerr.InconsistentGroupProtocol.Code)
		return
	}

	var old *cgMember
	replaced := ""
	if req.InstanceID == nil {
		old = cg.members[memberID]
		if old == nil {
			old = &cgMember{id: memberID, state: memberStable, assigned: partitions{}, revoking: partitions{}}
		}
	} else {
		staticID := cg.static[*req.InstanceID]
		static := cg.members[staticID]
		switch {
		case unknown && static != nil:
			// The instance comes back under a new id and takes the
			// old member's place and assignment.
			old = static.clone()
			old.id, old.epoch, old.prevEpoch = memberID, 0, 0
			old.assigned, old.revoking = clonePartitions(static.assigned), partitions{}
			replaced = staticID
		case unknown:
			old = &cgMember{id: memberID, state: memberStable, assigned: partitions{}, revoking: partitions{}}
		case static == nil:
			fail(kerr.UnknownMemberID.Code)
			return
		case staticID != memberID:
			fail(kerr.FencedInstanceID.Code)
			return
		default:
			old = static
		}
	}
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.MemberID, hb.MemberEpoch, hb.InstanceID = g.id, memberID, old.epoch, req.InstanceID
	hb.RebalanceTimeoutMillis = req.RebalanceTimeoutMillis
	if req.Version == 0 {
		hb.RebalanceTimeoutMillis = req.SessionTimeoutMillis
	}
	hb.RackID, hb.SubscribedTopicNames = sub.Rack, sub.Topics
	if hb.SubscribedTopicNames == nil {
		hb.SubscribedTopicNames = []string{}
	}
	hb.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	for _, tp := range sub.OwnedPartitions {
		if id, _, ok := g.c.opts.Topics.ByName(tp.Topic); ok {
			hb.Topics = append(hb.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: id, Partitions: tp.Partitions})
		}
	}
	classic := &classicMeta{sessionTimeout: time.Duration(req.SessionTimeoutMillis) * time.Millisecond, protocols: slices.Clone(req.Protocols)}
	next, code, _ := g.applyConsumerHeartbeat(cg, hb, client, old, replaced, classic, nil)
	if code != 0 {
		fail(code)
		return
	}
	next.classicDeadline = g.c.now().Add(next.rebalanceTimeout) // the sync timer
	resp := kmsg.NewPtrJoinGroupResponse()
	resp.Version = req.Version
	resp.MemberID, resp.Generation = next.id, next.epoch
	protocolType, protocol := "consumer", next.classic.protocols[0].Name
	resp.ProtocolType, resp.Protocol = &protocolType, &protocol
	resp.LeaderID = ""
	reply <- resp
}

// supportsClassic: a classic member may join if it shares a protocol
// with every classic member already in.
func (cg *consumerGroup) supportsClassic(ps []kmsg.JoinGroupRequestProtocol) bool {
	if len(ps) == 0 {
		return false
	}
	var common map[string]bool
	for _, m := range cg.members {
		if m.classic == nil {
			continue
		}
		mine := map[string]bool{}
		for _, p := range m.classic.protocols {
			if common == nil || common[p.Name] {
				mine[p.Name] = true
			}
		}
		common = mine
	}
	for _, p := range ps {
		if common == nil || common[p.Name] {
			return true
		}
	}
	return false
}

// checkClassicMember is the check SyncGroup, Heartbeat and OffsetCommit
// of a classic member in a consumer group share.
func (g *group) checkClassicMember(memberID string, instanceID *string, generation int32) (*cgMember, int16) {
	cg := g.cg
	if instanceID != nil {
		if known, ok := cg.static[*instanceID]; ok && known != memberID {
			return nil, kerr.FencedInstanceID.Code
		}
	}
	m := cg.members[memberID]
	switch {
	case m == nil || m.classic == nil:
		return nil, kerr.UnknownMemberID.Code
	case generation != m.epoch:
		return nil, kerr.IllegalGeneration.Code
	}
	return m, 0
}

// classicRebalanceDue: the member must rejoin to catch up, a new group
// epoch or partitions now free for it.
func (g *group) classicRebalanceDue(m *cgMember) bool {
	cg := g.cg
	if m.state == memberUnrevoked {
		return false // it rejoins itself once it revoked
	}
	if cg.epoch > m.epoch {
		return true
	}
	if m.state == memberUnreleased {
		next, _ := reconcile(m, cg.targetEpoch, cg.target[m.id], heldByOthers(cg.members, m.id), classicOwned(m))
		return next != m && !equalPartitions(next.assigned, m.assigned)
	}
	return false
}

// classicOwned is what a classic member owns: what it was last given.
func classicOwned(m *cgMember) []kmsg.ConsumerGroupHeartbeatRequestTopic {
	out := []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	for _, t := range sortedTopicIDs(m.assigned) {
		out = append(out, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: t, Partitions: m.assigned[t]})
	}
	return out
}

func (g *group) classicSyncToConsumer(req *kmsg.SyncGroupRequest, reply chan *kmsg.SyncGroupResponse) {
	resp := kmsg.NewPtrSyncGroupResponse()
	resp.Version = req.Version
	m, code := g.checkClassicMember(req.MemberID, req.InstanceID, req.Generation)
	if code == 0 && ((req.ProtocolType != nil && *req.ProtocolType != "consumer") || (req.Protocol != nil && *req.Protocol != m.classic.protocols[0].Name)) {
		code = kerr.InconsistentGroupProtocol.Code
	}
	if code == 0 && g.classicRebalanceDue(m) {
		m.askRejoin(g.c.now())
		code = kerr.RebalanceInProgress.Code
	}
	if code != 0 {
		resp.ErrorCode = code
		reply <- resp
		return
	}
	m.lastHeartbeat = g.c.now()
	m.classicDeadline = time.Time{}
	protocolType, protocol := "consumer", m.classic.protocols[0].Name
	resp.ProtocolType, resp.Protocol = &protocolType, &protocol
	resp.MemberAssignment = g.classicAssignment(m)
	reply <- resp
}

func (g *group) classicHeartbeatToConsumer(req *kmsg.HeartbeatRequest) int16 {
	m, code := g.checkClassicMember(req.MemberID, req.InstanceID, req.Generation)
	if code != 0 {
		return code
	}
	m.lastHeartbeat = g.c.now()
	if g.classicRebalanceDue(m) {
		m.askRejoin(g.c.now())
		return kerr.RebalanceInProgress.Code
	}
	return 0
}

func (g *group) classicLeaveToConsumer(members []kmsg.LeaveGroupRequestMember) (int16, []int16) {
	var codes []int16
	for _, lm := range members {
		id := lm.MemberID
		if lm.InstanceID != nil {
			known, ok := g.cg.static[*lm.InstanceID]
			switch {
			case !ok:
				codes = append(codes, kerr.UnknownMemberID.Code)
				continue
			case id != "" && id != known:
				codes = append(codes, kerr.FencedInstanceID.Code)
				continue
			}
			id = known
		}
		m := g.cg.members[id]
		if m == nil {
			codes = append(codes, kerr.UnknownMemberID.Code)
			continue
		}
		if err := g.fenceConsumerMember(m, "left the group (LeaveGroup)"); err != nil {
			codes = append(codes, kerr.CoordinatorNotAvailable.Code)
			continue
		}
		codes = append(codes, 0)
		if g.cg == nil {
			// Downgraded: the rest are the classic group's.
			for range members[len(codes):] {
				codes = append(codes, kerr.UnknownMemberID.Code)
			}
			break
		}
	}
	return 0, codes
}

// downgradeWithout reports whether removing the member leaves only
// classic members (at least one), which the policy lets become a classic
// group again.
func (g *group) downgradeWithout(id string) bool {
	if !g.c.settings().MigrationPolicy.downgrade() || len(g.cg.members) <= 1 {
		return false
	}
	for mid, m := range g.cg.members {
		if mid != id && m.classic == nil {
			return false
		}
	}
	return true
}

// downgrade turns the consumer group into a classic group of its classic
// members, without the member that leaves, and starts a rebalance in it
// so they rejoin. The records written first delete the consumer group's
// and store the classic one's.
func (g *group) downgrade(leaving string) error {
	cg := g.cg
	members := map[string]*member{}
	static := map[string]string{}
	var ids []string
	for id, m := range cg.members {
		if id == leaving {
			continue
		}
		ids = append(ids, id)
		mm := &member{
			id: id, instanceID: m.instanceID, clientID: m.clientID, clientHost: m.clientHost,
			protocolType: "consumer", protocols: slices.Clone(m.classic.protocols),
			sessionTimeout: m.classic.sessionTimeout, rebalanceTimeout: m.rebalanceTimeout,
			assignment: g.classicAssignment(m), lastHeartbeat: m.lastHeartbeat,
		}
		members[id] = mm
		if mm.instanceID != nil {
			static[*mm.instanceID] = id
		}
	}
	sort.Strings(ids)
	classic := &group{id: g.id, c: g.c, members: members, static: static, protocolType: "consumer", generation: cg.epoch, leader: ids[0], stateSince: g.c.now()}
	classic.protocol = classic.selectProtocol()
	classic.state = Stable
	records := g.consumerTombstones()
	records = append(records, log.KeyValue{Key: groupKey(g.id), Value: classic.metadataValue().AppendTo(nil)})
	if _, err := g.c.append(g.id, records); err != nil {
		return fmt.Errorf("downgrading group %s: %w", g.id, err)
	}
	g.cg = nil
	g.members, g.static, g.pending = members, static, map[string]time.Time{}
	g.protocolType, g.protocol, g.generation, g.leader = "consumer", classic.protocol, cg.epoch, ids[0]
	g.transition(Stable)
	g.c.logger.Info("consumer group downgraded to the classic protocol", "group", g.id, "members", len(members), "generation", g.generation)
	g.prepareRebalance(g.c.now(), "downgraded from the consumer protocol")
	return nil
}

// askRejoin starts the member's join timer, unless it runs already.
func (m *cgMember) askRejoin(now time.Time) {
	if m.classicDeadline.IsZero() {
		m.classicDeadline = now.Add(m.rebalanceTimeout)
	}
}
