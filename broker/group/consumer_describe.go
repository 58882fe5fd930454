package group

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// memberTypeConsumer is ConsumerGroupDescribe's MemberType (v1, KIP-1099)
// of a member that speaks the consumer protocol.
const (
	memberTypeClassic  = 0
	memberTypeConsumer = 1
)

// ConsumerGroupDescribe describes consumer-protocol groups; a classic
// group, or none, is GROUP_ID_NOT_FOUND, which is how Kafka's admin
// client knows to describe it with DescribeGroups instead.
func (c *Coordinator) ConsumerGroupDescribe(req *kmsg.ConsumerGroupDescribeRequest) *kmsg.ConsumerGroupDescribeResponse {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	for _, id := range req.Groups {
		d := kmsg.NewConsumerGroupDescribeResponseGroup()
		d.Group = id
		notFound := func(msg string) {
			d.ErrorCode = kerr.GroupIDNotFound.Code
			d.ErrorMessage = &msg
		}
		g, code := c.get(id, false)
		switch {
		case id == "":
			d.ErrorCode = kerr.InvalidGroupID.Code
		case code != 0:
			d.ErrorCode = code
		case g == nil:
			notFound(fmt.Sprintf("Group %s not found.", id))
		default:
			found := false
			ok := g.do(func() {
				if g.cg == nil || g.state == Dead {
					return
				}
				found = true
				g.consumerDescribe(&d, req.Version)
			})
			switch {
			case !ok && g.stopErr(0) != 0:
				d.ErrorCode = g.stopErr(0)
			case !found:
				notFound(fmt.Sprintf("Group %s is not a consumer group.", id))
			}
		}
		resp.Groups = append(resp.Groups, d)
	}
	return resp
}

func (g *group) consumerDescribe(d *kmsg.ConsumerGroupDescribeResponseGroup, version int16) {
	cg := g.cg
	s := g.c.settings()
	d.State = string(cg.state())
	d.Epoch, d.AssignmentEpoch = cg.epoch, cg.targetEpoch
	d.AssignorName = cg.preferredAssignor(s.defaultAssignor())
	for _, id := range cg.sortedMemberIDs() {
		m := cg.members[id]
		dm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
		dm.MemberID, dm.InstanceID, dm.RackID, dm.MemberEpoch = m.id, m.instanceID, m.rackID, m.epoch
		dm.ClientID, dm.ClientHost = m.clientID, m.clientHost
		dm.SubscribedTopics = slices.Clone(m.topics)
		if dm.SubscribedTopics == nil {
			dm.SubscribedTopics = []string{}
		}
		dm.SubscribedTopicRegex = m.regex
		dm.Assignment = g.describedAssignment(m.assigned)
		dm.TargetAssignment = g.describedAssignment(cg.target[id])
		if version >= 1 {
			dm.MemberType = memberTypeConsumer
			if m.classic != nil {
				dm.MemberType = memberTypeClassic
			}
		}
		d.Members = append(d.Members, dm)
	}
}

// describedAssignment names an assignment's topics; a topic deleted
// since is left out.
func (g *group) describedAssignment(a partitions) kmsg.Assignment {
	out := kmsg.Assignment{TopicPartitions: []kmsg.AssignmentTopicPartition{}}
	for _, t := range sortedTopicIDs(a) {
		name, _, ok := g.c.opts.Topics.ByID(t)
		if !ok {
			continue
		}
		out.TopicPartitions = append(out.TopicPartitions, kmsg.AssignmentTopicPartition{TopicID: t, Topic: name, Partitions: slices.Clone(a[t])})
	}
	return out
}
