package group

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// loadedConsumer accumulates a consumer-protocol group's records during
// replay: the latest of each key wins and a tombstone deletes.
type loadedConsumer struct {
	meta       *cgMetadata
	targetMeta *cgTargetMetadata
	members    map[string]*cgMemberMetadata
	current    map[string]*cgCurrentAssignment
	target     map[string]*cgTargetMember
	regexes    map[string]*cgRegex
}

func (lg *loadedGroup) consumer() *loadedConsumer {
	if lg.cg == nil {
		lg.cg = &loadedConsumer{
			members: map[string]*cgMemberMetadata{},
			current: map[string]*cgCurrentAssignment{},
			target:  map[string]*cgTargetMember{},
			regexes: map[string]*cgRegex{},
		}
	}
	return lg.cg
}

// applyConsumer replays one record of a consumer-protocol group.
func (lg *loadedGroup) applyConsumer(r *consumerRecord) {
	lc := lg.consumer()
	switch r.Type {
	case consumerGroupMetadataType:
		lc.meta = r.Metadata
	case consumerGroupTargetMetadataType:
		lc.targetMeta = r.TargetMetadata
	case consumerGroupMemberMetadataType:
		setOrDelete(lc.members, r.Member, r.MemberMetadata)
	case consumerGroupCurrentAssignmentType:
		setOrDelete(lc.current, r.Member, r.Current)
	case consumerGroupTargetMemberType:
		setOrDelete(lc.target, r.Member, r.TargetMember)
	case consumerGroupRegexType:
		setOrDelete(lc.regexes, r.Regex, r.RegexValue)
	}
}

func setOrDelete[V any](m map[string]*V, key string, v *V) {
	if v == nil {
		delete(m, key)
		return
	}
	m[key] = v
}

// restoreConsumer rebuilds a consumer-protocol group from its records.
// Members come back with a fresh session, as after a coordinator move in
// Kafka: they must heartbeat within it or be fenced.
func (g *group) restoreConsumer(lc *loadedConsumer, now time.Time) {
	cg := newConsumerGroup()
	cg.epoch, cg.metadataHash = lc.meta.Epoch, lc.meta.MetadataHash
	if lc.targetMeta != nil {
		cg.targetEpoch = lc.targetMeta.AssignmentEpoch
	}
	for id, t := range lc.target {
		cg.target[id] = fromTopicPartitions(t.TopicPartitions)
	}
	for expr, r := range lc.regexes {
		cg.regexes[expr] = &resolvedRegex{topics: r.Topics, version: r.Version, timestamp: r.TimestampMs}
	}
	for id, md := range lc.members {
		m := &cgMember{
			id: id, instanceID: md.InstanceID, rackID: md.RackID,
			clientID: md.ClientID, clientHost: md.ClientHost,
			topics: sortedUnique(md.SubscribedTopicNames), regex: md.SubscribedTopicRegex,
			rebalanceTimeout: time.Duration(md.RebalanceTimeoutMs) * time.Millisecond,
			assignor:         md.ServerAssignor,
			state:            memberStable,
			assigned:         partitions{}, revoking: partitions{},
			lastHeartbeat: now,
		}
		if len(m.topics) == 0 {
			m.topics = nil
		}
		if c := md.Classic; c != nil && (c.SessionTimeoutMs != 0 || len(c.SupportedProtocols) > 0) {
			// An empty struct is how Kafka reads a member without the
			// field; a classic member always has protocols.
			m.classic = &classicMeta{sessionTimeout: time.Duration(c.SessionTimeoutMs) * time.Millisecond}
			for _, p := range c.SupportedProtocols {
				m.classic.protocols = append(m.classic.protocols, kmsg.JoinGroupRequestProtocol{Name: p.Name, Metadata: p.Metadata})
			}
		}
		if cur := lc.current[id]; cur != nil {
			m.epoch, m.prevEpoch, m.state = cur.MemberEpoch, cur.PreviousMemberEpoch, memberState(cur.State)
			m.assigned = fromTopicPartitions(cur.AssignedPartitions)
			m.revoking = fromTopicPartitions(cur.PartitionsPendingRevocation)
			if m.state == memberUnrevoked {
				m.revokeDeadline = now.Add(m.rebalanceTimeout)
			}
		}
		cg.members[id] = m
		if m.instanceID != nil {
			cg.static[*m.instanceID] = id
		}
	}
	g.cg = cg
	g.protocolType, g.hadMembers = "consumer", true
	g.consumerStateChanged()
}
