package group

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/log"
)

// consumerLeave handles a heartbeat with epoch -1 (the member leaves) or
// -2 (a static member leaves and will be back within its session, keeping
// its assignment meanwhile).
func (g *group) consumerLeave(req *kmsg.ConsumerGroupHeartbeatRequest, resp *kmsg.ConsumerGroupHeartbeatResponse) *kmsg.ConsumerGroupHeartbeatResponse {
	fail := func(code int16, msg string) *kmsg.ConsumerGroupHeartbeatResponse {
		return heartbeatError(resp, code, msg)
	}
	cg := g.cg
	id := req.MemberID
	m := cg.members[id]
	if req.InstanceID != nil {
		staticID := cg.static[*req.InstanceID]
		m = cg.members[staticID]
		switch {
		case m == nil:
			return fail(kerr.UnknownMemberID.Code, fmt.Sprintf("Instance id %s is unknown.", *req.InstanceID))
		case staticID != id:
			return fail(kerr.FencedInstanceID.Code, fmt.Sprintf("Static member %s with instance id %s was fenced by member %s.", id, *req.InstanceID, staticID))
		}
	}
	if m == nil {
		return fail(kerr.UnknownMemberID.Code, fmt.Sprintf("member %s is not in group %s", id, g.id))
	}
	resp.MemberID = &id
	resp.MemberEpoch = req.MemberEpoch
	if req.MemberEpoch == staticLeaveEpoch {
		left := m.clone()
		left.epoch, left.revoking = staticLeaveEpoch, partitions{}
		left.revokeDeadline = time.Time{}
		if _, err := g.c.append(g.id, []log.KeyValue{cgCurrentAssignmentRecord(g.id, id, left.currentValue())}); err != nil {
			return fail(kerr.CoordinatorNotAvailable.Code, "")
		}
		cg.members[id] = left
		g.c.logger.Info("static consumer group member left temporarily", "group", g.id, "member", id, "instance", *req.InstanceID)
		g.consumerStateChanged()
		return resp
	}
	if err := g.fenceConsumerMember(m, "left the group"); err != nil {
		return fail(kerr.CoordinatorNotAvailable.Code, "")
	}
	return resp
}

// fenceConsumerMember removes a member: its records become tombstones
// and the group epoch moves, so the next heartbeat computes a target
// assignment without it.
func (g *group) fenceConsumerMember(m *cgMember, why string) error {
	cg := g.cg
	if g.downgradeWithout(m.id) {
		g.c.logger.Info("consumer group member removed", "group", g.id, "member", m.id, "reason", why)
		return g.downgrade(m.id)
	}
	records := []log.KeyValue{
		cgCurrentAssignmentRecord(g.id, m.id, nil),
		cgTargetMemberRecord(g.id, m.id, nil),
		cgMemberMetadataRecord(g.id, m.id, nil),
	}
	rest := membersWith(cg, m.id, nil)
	view := &consumerGroup{members: rest, regexes: cg.regexes}
	regexes := map[string]*resolvedRegex{}
	for _, x := range rest {
		if x.regex != nil && cg.regexes[*x.regex] != nil {
			regexes[*x.regex] = cg.regexes[*x.regex]
		}
	}
	for expr := range cg.regexes {
		if regexes[expr] == nil {
			records = append(records, cgRegexRecord(g.id, expr, nil))
		}
	}
	hash := metadataHashOf(view.subscribedNames("", nil), g.c.opts.Topics)
	epoch := cg.epoch + 1
	records = append(records, cgMetadataRecord(g.id, &cgMetadata{Epoch: epoch, MetadataHash: hash}))
	if _, err := g.c.append(g.id, records); err != nil {
		g.c.logger.Warn("storing consumer group member removal", "group", g.id, "member", m.id, "err", err)
		return err
	}
	g.removeConsumerMember(m.id)
	delete(cg.target, m.id)
	cg.regexes, cg.epoch, cg.metadataHash = regexes, epoch, hash
	g.c.consumerRebalances.Add(1)
	g.c.logger.Info("consumer group member removed", "group", g.id, "member", m.id, "reason", why, "epoch", epoch)
	g.consumerStateChanged()
	return nil
}

// removeConsumerMember forgets a member in memory.
func (g *group) removeConsumerMember(id string) {
	cg := g.cg
	m := cg.members[id]
	if m == nil {
		return
	}
	delete(cg.members, id)
	if m.instanceID != nil && cg.static[*m.instanceID] == id {
		delete(cg.static, *m.instanceID)
	}
}

// consumerStateChanged keeps the classic state the rest of the group
// code reads (Empty for offset expiry and deletion, Stable otherwise) in
// step with the consumer group's membership.
func (g *group) consumerStateChanged() {
	if len(g.cg.members) == 0 {
		g.transition(Empty)
	} else {
		g.transition(Stable)
	}
}

// consumerDeadlines adds the consumer group's session and revocation
// deadlines to consider.
func (g *group) consumerDeadlines(consider func(time.Time)) {
	s := g.c.settings()
	for _, m := range g.cg.members {
		consider(m.lastHeartbeat.Add(m.sessionTimeout(s)))
		consider(m.revokeDeadline)
		consider(m.classicDeadline)
	}
}

// expireConsumerMembers fences members whose session ended, or that did
// not give up their revoked partitions within their rebalance timeout.
func (g *group) expireConsumerMembers(now time.Time) {
	s := g.c.settings()
	for _, id := range g.cg.sortedMemberIDs() {
		if g.cg == nil {
			return // downgraded by the last removal: the classic group's timers rule
		}
		m := g.cg.members[id]
		if m == nil {
			continue
		}
		session := m.sessionTimeout(s)
		var err error
		switch {
		case !now.Before(m.lastHeartbeat.Add(session)):
			err = g.fenceConsumerMember(m, fmt.Sprintf("its session of %v expired", session))
		case !m.revokeDeadline.IsZero() && !now.Before(m.revokeDeadline):
			err = g.fenceConsumerMember(m, fmt.Sprintf("it did not revoke its partitions within its rebalance timeout of %v", m.rebalanceTimeout))
		case !m.classicDeadline.IsZero() && !now.Before(m.classicDeadline):
			err = g.fenceConsumerMember(m, fmt.Sprintf("it did not rejoin or sync within its rebalance timeout of %v", m.rebalanceTimeout))
		}
		if err != nil {
			// Tried again in a second rather than at once.
			m.lastHeartbeat = now.Add(time.Second - session)
			if !m.revokeDeadline.IsZero() {
				m.revokeDeadline = now.Add(time.Second)
			}
			if !m.classicDeadline.IsZero() {
				m.classicDeadline = now.Add(time.Second)
			}
		}
	}
}

// consumerCommitCode is Kafka's check of a commit to a consumer-protocol
// group: with a negative epoch only while the group has no members (an
// admin tool or a consumer outside the group); else from a member at its
// current epoch (STALE_MEMBER_EPOCH otherwise), with OffsetCommit v9 or
// later unless transactional.
func (g *group) consumerCommitCode(memberID string, epoch int32, version int16, transactional bool) int16 {
	cg := g.cg
	if epoch < 0 && len(cg.members) == 0 {
		return 0
	}
	m := cg.members[memberID]
	switch {
	case m == nil:
		return kerr.UnknownMemberID.Code
	case m.classic != nil && epoch != m.epoch:
		return kerr.IllegalGeneration.Code
	case m.classic != nil:
		return 0
	case !transactional && version < 9:
		return kerr.UnsupportedVersion.Code
	case epoch != m.epoch:
		return kerr.StaleMemberEpoch.Code
	}
	return 0
}

// consumerFetchCode is OffsetFetch's check (v9+) for a consumer-protocol
// group: a request naming a member must come from it at its epoch.
func (g *group) consumerFetchCode(memberID *string, epoch int32) int16 {
	if g.cg == nil || (memberID == nil && epoch < 0) {
		return 0
	}
	id := ""
	if memberID != nil {
		id = *memberID
	}
	m := g.cg.members[id]
	switch {
	case m == nil:
		return kerr.UnknownMemberID.Code
	case epoch != m.epoch:
		return kerr.StaleMemberEpoch.Code
	}
	return 0
}

// consumerTombstones delete every record of the consumer group but its
// offsets, in Kafka's order.
func (g *group) consumerTombstones() []log.KeyValue {
	cg := g.cg
	ids := cg.sortedMemberIDs()
	var records []log.KeyValue
	for _, id := range ids {
		records = append(records, cgCurrentAssignmentRecord(g.id, id, nil))
	}
	for _, id := range ids {
		records = append(records, cgTargetMemberRecord(g.id, id, nil))
	}
	records = append(records, cgTargetMetadataRecord(g.id, nil))
	for _, id := range ids {
		records = append(records, cgMemberMetadataRecord(g.id, id, nil))
	}
	for expr := range cg.regexes {
		records = append(records, cgRegexRecord(g.id, expr, nil))
	}
	records = append(records, cgPartitionMetadataTombstone(g.id), cgMetadataRecord(g.id, nil))
	return records
}
