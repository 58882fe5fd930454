package group

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/log"
)

func (g *group) sortedMemberIDs() []string {
	ids := make([]string, 0, len(g.members))
	for id := range g.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

func (g *group) describe() kmsg.DescribeGroupsResponseGroup {
	d := kmsg.NewDescribeGroupsResponseGroup()
	d.Group, d.State, d.ProtocolType = g.id, string(g.state), g.protocolType
	if g.state == Stable || g.state == CompletingRebalance {
		d.Protocol = g.protocol
	}
	for _, id := range g.sortedMemberIDs() {
		m := g.members[id]
		dm := kmsg.NewDescribeGroupsResponseGroupMember()
		dm.MemberID, dm.InstanceID, dm.ClientID, dm.ClientHost = m.id, m.instanceID, m.clientID, m.clientHost
		dm.ProtocolMetadata = m.metadataFor(g.protocol)
		if g.state == Stable {
			dm.MemberAssignment = m.assignment
		}
		d.Members = append(d.Members, dm)
	}
	return d
}

// persistGroup stores the group's metadata.
func (g *group) persistGroup() error {
	_, err := g.c.append(g.id, []log.KeyValue{{Key: groupKey(g.id), Value: g.metadataValue().AppendTo(nil)}})
	if err != nil {
		g.c.logger.Warn("storing group metadata", "group", g.id, "err", err)
	}
	return err
}

// metadataValue is the group's metadata record: generation, protocol,
// leader and every member with its subscription and assignment.
func (g *group) metadataValue() *kmsg.GroupMetadataValue {
	v := new(kmsg.GroupMetadataValue)
	v.Default()
	v.Version = 3
	v.ProtocolType, v.Generation = g.protocolType, g.generation
	if g.protocol != "" {
		protocol := g.protocol
		v.Protocol = &protocol
	}
	if g.leader != "" {
		leader := g.leader
		v.Leader = &leader
	}
	v.CurrentStateTimestamp = g.stateSince.UnixMilli()
	for _, id := range g.sortedMemberIDs() {
		m := g.members[id]
		vm := kmsg.NewGroupMetadataValueMember()
		vm.MemberID, vm.InstanceID, vm.ClientID, vm.ClientHost = m.id, m.instanceID, m.clientID, m.clientHost
		vm.RebalanceTimeoutMillis = int32(m.rebalanceTimeout.Milliseconds())
		vm.SessionTimeoutMillis = int32(m.sessionTimeout.Milliseconds())
		vm.Subscription, vm.Assignment = m.metadataFor(g.protocol), m.assignment
		v.Members = append(v.Members, vm)
	}
	return v
}

// delete writes tombstones for the group and its offsets and marks it
// Dead; the coordinator forgets it. Only empty groups are deleted.
func (g *group) delete() error {
	records := []log.KeyValue{{Key: groupKey(g.id)}}
	if g.cg != nil {
		records = g.consumerTombstones()
	}
	for t, ps := range g.offsets {
		for p := range ps {
			records = append(records, log.KeyValue{Key: offsetKey(g.id, t, p)})
		}
	}
	if _, err := g.c.append(g.id, records); err != nil {
		return err
	}
	g.offsets = map[string]map[int32]offset{}
	g.transition(Dead)
	g.c.forget(g)
	return nil
}
